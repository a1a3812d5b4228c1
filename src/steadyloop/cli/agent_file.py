"""``--agent FILE``: run and chat as the agent a spec document describes (TOML, or JSON by its suffix).

Three layers, weakest first: the CLI's own defaults (its approval policy, context keeping where the window
is known), the document, then the command line's flags (``-m``, ``--think``, ``--temperature``,
``--max-tokens``, ``--max-turns``, ``--no-tools``; ``--system`` replaces the document's prompt). The CLI
offers its file and shell tools and the ``--mcp`` servers; the document picks from them by name, and its own
bundled servers run only with ``--trust-bundle``. Each warning about the document is printed on stderr.

The document's endpoint is used unless ``--base-url`` or ``-e`` names one. It gets a key only where the
rule of ``resolve_api_key`` gives it one: ``--api-key``, or ``OPENAI_API_KEY`` when the document's URL is
``OPENAI_BASE_URL``; any other URL gets none, so a document cannot send the operator's key elsewhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from .. import AgentSettings, Endpoint, InvalidInput, Tool, agent_settings
from ..local import key_for
from ..spec import (
    AgentSpec,
    ApprovalsSpec,
    ContextSpec,
    EndpointSpec,
    LoopSpec,
    MCPServer,
    ModelSpec,
    SpecError,
    ToolsSpec,
    parse_spec_text,
    resolve_agent_spec,
    resolve_api_key,
)
from .config import EndpointChoice, Resolved, resolve
from .files import read_named_text

__all__ = ["cli_settings", "flag_layer", "load_agent_file", "resolve_for_agent", "servers_of"]


def load_agent_file(path: str, *, trust_bundle: bool = False) -> AgentSpec:
    """The document at ``path``; its warnings go to stderr.

    Raises:
        InvalidInput: it cannot be read, or it was refused (every reason on the one line).
    """
    file = Path(path)
    text = read_named_text(path, "agent file")
    try:
        parsed = parse_spec_text(
            text, format="json" if file.suffix.lower() == ".json" else "toml", bundle=trust_bundle
        )
    except SpecError as exc:
        raise InvalidInput(f"{path}: {exc}") from exc
    for warning in parsed.warnings:
        hint = " (pass --trust-bundle to run them)" if warning.path == ("bundle",) else ""
        print(f"steadyloop: warning: {path}: {warning}{hint}", file=sys.stderr, flush=True)
    return parsed.spec


def _with_timeouts(endpoint: Endpoint, spec: AgentSpec) -> Endpoint:
    if spec.endpoint.request_timeout is not None:
        endpoint = replace(endpoint, request_timeout=spec.endpoint.request_timeout)
    if spec.endpoint.first_token_timeout is not None:
        endpoint = replace(endpoint, first_token_timeout=spec.endpoint.first_token_timeout)
    return endpoint


def resolve_for_agent(
    spec: AgentSpec,
    choice: EndpointChoice,
    *,
    start_local: Callable[[], tuple[str, str]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Resolved:
    """The endpoint and model for an agent document: the flags' endpoint if they name one, else the
    document's, else the usual order (``steadyloop.cli.config``)."""
    env = os.environ if env is None else env
    if choice.model is None and spec.model.name:
        choice = replace(choice, model=spec.model.name)
    url = spec.endpoint.base_url
    flags_name_one = choice.base_url or choice.name or choice.provider or choice.api not in (None, "openai")
    chain = spec.endpoint.chain()
    if chain is not None and not flags_name_one:
        # The document's provider (and its failover), at the document's URL when it names one.
        resolved = resolve(replace(choice, provider=chain, base_url=url), env=env, start_local=start_local)
        endpoint = _with_timeouts(resolved.endpoint, spec)
        window = spec.endpoint.context_length or resolved.context_length
        return replace(resolved, endpoint=endpoint, context_length=window)
    if url is None or flags_name_one:
        return resolve(choice, env=env, start_local=start_local)
    key = resolve_api_key(
        url,
        choice.api_key or key_for(url),
        inherited_base_url=env.get("OPENAI_BASE_URL"),
        inherited_api_key=env.get("OPENAI_API_KEY"),
    )
    endpoint = _with_timeouts(Endpoint(url, api_key=key), spec)
    model = choice.model or env.get("STEADYLOOP_MODEL") or None
    return Resolved(endpoint, model, label=endpoint.shown_url, context_length=spec.endpoint.context_length)


def servers_of(lines: Sequence[str]) -> list[MCPServer]:
    """``--mcp`` command lines as servers, labelled by their executable (``_2``, ``_3`` for repeats).

    Raises:
        InvalidInput: a line is empty, has a quote left open, or holds a NUL.
    """
    from ..tools.mcp import MCPServerSpec

    servers: list[MCPServer] = []
    for line in lines:
        parsed = MCPServerSpec.from_command_line(line)  # the one reading of a command line, and its refusals
        base, n = parsed.name, 2
        name = base
        while name in {s.name for s in servers}:
            name, n = f"{base}_{n}", n + 1
        servers.append(MCPServer(name=name, command=parsed.command, args=parsed.args))
    return servers


def cli_settings(
    spec: AgentSpec,
    *,
    model: str,
    window: int | None,
    tools: Sequence[Tool],
    servers: Sequence[MCPServer],
    require_for: Sequence[str],
    flags: AgentSpec,
    system: str | None,
    default_system: str,
) -> AgentSettings:
    """The agent's settings: the CLI's defaults under the document, the flags over it.

    Args:
        spec: the document.
        model: the model in use (the flags', the document's, or the one the endpoint serves).
        window: the context window, where known; context keeping is on by default when it is.
        tools: the CLI's tools, for the document to pick from.
        servers: the ``--mcp`` servers, likewise.
        require_for: the effect classes the CLI gates by default.
        flags: the command line's settings as a layer.
        system: ``--system``, which replaces the document's prompt.
        default_system: the prompt when neither the document nor ``--system`` gives one (with tools).
    """
    host = AgentSpec(
        endpoint=EndpointSpec(context_length=window),
        approvals=ApprovalsSpec(require_for=tuple(require_for)),
        context=ContextSpec(enabled=window is not None),
    )
    resolved = resolve_agent_spec([host, spec, flags])
    settings = agent_settings(resolved, tools=tools, servers=servers, model=model)
    settings = replace(settings, params=replace(settings.params, model=model))
    if system is not None:
        return replace(settings, system=system)
    if resolved.prompt is None and settings.tools:
        return replace(settings, system=default_system)
    return settings


def flag_layer(
    *,
    think: str | None,
    temperature: float | None,
    max_tokens: int | None,
    max_turns: int | None,
    tools: bool,
) -> AgentSpec:
    """The command line's settings as the strongest layer."""
    return AgentSpec(
        model=ModelSpec(reasoning_effort=think, temperature=temperature, max_tokens=max_tokens),
        loop=LoopSpec(max_turns=max_turns),
        tools=ToolsSpec() if tools else ToolsSpec(names=()),
    )
