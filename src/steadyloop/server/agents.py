"""A session's agent as a document: made from a create request, kept in the session, built into an ``Agent``.

A session keeps its own layer (an agent document, ``docs/spec.md``) in the store, so a restarted server
builds the same agent. The server's layer goes under it at every build: the server decides the endpoint
(a session's document cannot point the server at another URL or bring programs to run), and what the
server offers (tools, MCP servers) is what a session may pick from. The server's approvals are a floor
(``server/floor.py``): a create request that would lower them is refused, and a kept layer is held to
them at every build.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from steadyloop import AgentSettings, InvalidInput, agent_settings, parse_spec
from steadyloop.spec import (
    AgentSpec,
    ApprovalsSpec,
    ContextSpec,
    EndpointSpec,
    LoopSpec,
    ModelSpec,
    PromptSection,
    SpecError,
    ToolsSpec,
    export_spec,
    resolve_agent_spec,
)

from .errors import ApiError
from .floor import below_floor, held_to_floor
from .schemas import CreateSession
from .settings import ServerSettings

__all__ = ["build_settings", "check_floor", "document_of", "server_layer", "session_layer"]


def session_layer(body: CreateSession) -> AgentSpec:
    """The session's own layer: its agent document with the request's fields over it.

    Raises:
        ApiError: the document was refused (``invalid_request``, every problem named).
    """
    base = AgentSpec()
    if body.agent is not None:
        try:
            base = parse_spec(body.agent, bundle=False).spec
        except SpecError as exc:
            problems = "; ".join(str(p) for p in exc.problems[:10])
            raise ApiError("invalid_request", f"the agent document was refused: {problems}") from None
        # The server decides where requests go and what runs on its machine; only the window is taken.
        base = replace(base, endpoint=EndpointSpec(context_length=base.endpoint.context_length), bundle=None)
    approvals = body.approvals
    top = AgentSpec(
        model=ModelSpec(
            name=body.model,
            temperature=body.temperature,
            max_tokens=body.max_tokens,
            reasoning_effort=body.thinking,
        ),
        tools=ToolsSpec(
            names=tuple(body.tools) if body.tools is not None else None,
            servers=tuple(body.mcp_servers) if body.mcp_servers is not None else None,
        ),
        approvals=ApprovalsSpec(
            require_for=tuple(approvals.require_for)
            if approvals and approvals.require_for is not None
            else None,
            overrides=dict(approvals.overrides) if approvals and approvals.overrides is not None else None,
            timeout=approvals.timeout_s if approvals else None,
        ),
        context=ContextSpec(enabled=body.context),
        loop=LoopSpec(max_turns=body.max_turns),
    )
    spec = resolve_agent_spec([base, top])
    if body.system is not None:  # the request's prompt replaces the document's, as --system does
        spec = replace(spec, prompt=(PromptSection(id="system", text=body.system),))
    return spec


def server_layer(settings: ServerSettings, window: int | None) -> AgentSpec:
    """What the server says under every session: its approval policy, context keeping, its own document."""
    policy = settings.approval_policy
    own = AgentSpec(
        endpoint=EndpointSpec(context_length=window),
        approvals=ApprovalsSpec(
            require_for=tuple(sorted(policy.require_for)),
            overrides=dict(policy.overrides) or None,
            timeout=policy.timeout_s,
        ),
        context=ContextSpec(enabled=window is not None),
    )
    return resolve_agent_spec([own, settings.agent]) if settings.agent is not None else own


def check_floor(settings: ServerSettings, layer: AgentSpec) -> None:
    """Refuse a session layer whose approvals would lower the server's.

    Raises:
        ApiError: ``approvals_below_floor``, naming each lowering and the floor.
    """
    floor = server_layer(settings, None).approvals
    problems = below_floor(layer.approvals, floor, settings.tools)
    if problems:
        gated = ", ".join(floor.require_for or ()) or "no effect"
        raise ApiError(
            "approvals_below_floor",
            f"the server's approvals are a floor a session may not lower: {'; '.join(problems)} "
            f"(the floor gates {gated}, decided within {floor.timeout:g} s)",
            hint="leave approvals out to take the server's, or only add effects and tools and shorten "
            "timeout_s; the operator sets the floor (steadyloop serve --require-approval, --approval-timeout)",
        )


def document_of(spec: AgentSpec) -> str:
    """The layer as the JSON kept in the session."""
    return json.dumps(export_spec(spec), sort_keys=True)


def layer_of(document: str) -> AgentSpec:
    """A kept layer back (a document this server wrote).

    Raises:
        InvalidInput: it no longer reads.
    """
    try:
        data: Any = json.loads(document)
    except ValueError as exc:
        raise InvalidInput(f"the session's agent document is not JSON: {exc}") from None
    return parse_spec(data, bundle=False).spec


def build_settings(
    settings: ServerSettings, layer: AgentSpec, *, model: str | None, window: int | None
) -> AgentSettings:
    """The ``AgentSettings`` of a session: the server's layer, then the session's, out of what it offers.

    Raises:
        ApiError: the session names a tool or MCP server the server does not offer, or no model.
    """
    own = server_layer(settings, window)
    layer = replace(layer, approvals=held_to_floor(layer.approvals, own.approvals, settings.tools))
    spec = resolve_agent_spec([own, layer])
    try:
        return agent_settings(spec, tools=settings.tools, servers=settings.mcp_servers, model=model)
    except InvalidInput as exc:
        raise ApiError("invalid_request", str(exc)) from None
