"""Layering documents (``resolve_agent_spec``), writing one back out (``export_spec``), and whose key an
endpoint gets (``resolve_api_key``).

Layering rules, one per kind of field:

- a value: the strongest layer that has one wins; absent (``None``) inherits, and nothing else does;
- ``prompt`` and ``hooks``: merged by id; different ids stack, the same id replaces (in the place the id
  first appeared); ``bundle`` servers likewise by name;
- ``model.extra_body`` and ``approvals.overrides``: merged by key;
- ``tools.names``, ``tools.servers`` and ``approvals.require_for``: replaced whole, since the union of
  "these two" and "none" would silently widen a scoped agent;
- ``requires``: every layer's, since each layer still needs what it asked for.

Each rule is associative, so resolving ``[a, b, c]`` equals resolving ``[a, resolve([b, c])]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from types import MappingProxyType
from typing import TypeVar

from ..wire.endpoints import NO_KEY
from ._values import (
    SPEC_VERSION,
    AgentSpec,
    ApprovalsSpec,
    ContextSpec,
    EndpointSpec,
    HookSpec,
    JsonValue,
    LoopSpec,
    MCPServer,
    ModelSpec,
    PromptSection,
    ToolsSpec,
)

__all__ = ["export_spec", "resolve_agent_spec", "resolve_api_key"]

T = TypeVar("T")
V = TypeVar("V")


def resolve_agent_spec(layers: Sequence[AgentSpec]) -> AgentSpec:
    """Layer specs into one, the weakest first (host settings, then the agent's document, then overrides).

    The result is itself a spec: fields no layer gave are still absent, for the host's defaults to fill.
    """
    out = AgentSpec()
    for layer in layers:
        out = _over(out, layer)
    return out


def _over(base: AgentSpec, top: AgentSpec) -> AgentSpec:
    return AgentSpec(
        requires=tuple(dict.fromkeys((*base.requires, *top.requires))),
        name=_value(base.name, top.name),
        description=_value(base.description, top.description),
        endpoint=_fieldwise(base.endpoint, top.endpoint),
        model=_model(base.model, top.model),
        prompt=_by_key(base.prompt, top.prompt, _section_id),
        tools=_fieldwise(base.tools, top.tools),
        approvals=_approvals(base.approvals, top.approvals),
        context=_fieldwise(base.context, top.context),
        loop=_fieldwise(base.loop, top.loop),
        hooks=_by_key(base.hooks, top.hooks, _hook_id),
        bundle=_by_key(base.bundle, top.bundle, _server_name),
    )


def _value(base: T | None, top: T | None) -> T | None:
    return base if top is None else top


S = TypeVar("S", EndpointSpec, ModelSpec, ToolsSpec, ApprovalsSpec, ContextSpec, LoopSpec)


def _fieldwise(base: S, top: S) -> S:
    given = {f.name: getattr(top, f.name) for f in fields(top) if getattr(top, f.name) is not None}
    return replace(base, **given)


def _model(base: ModelSpec, top: ModelSpec) -> ModelSpec:
    return replace(_fieldwise(base, top), extra_body=_merge_map(base.extra_body, top.extra_body))


def _approvals(base: ApprovalsSpec, top: ApprovalsSpec) -> ApprovalsSpec:
    return replace(_fieldwise(base, top), overrides=_merge_map(base.overrides, top.overrides))


def _merge_map(base: Mapping[str, V] | None, top: Mapping[str, V] | None) -> Mapping[str, V] | None:
    if base is None:
        return top
    if top is None:
        return base
    return MappingProxyType({**base, **top})


def _by_key(
    base: tuple[T, ...] | None, top: tuple[T, ...] | None, key: Callable[[T], str]
) -> tuple[T, ...] | None:
    if base is None:
        return top
    if top is None:
        return base
    merged = {key(item): item for item in base}
    merged.update((key(item), item) for item in top)
    return tuple(merged.values())


def _section_id(section: PromptSection) -> str:
    return section.id


def _hook_id(hook: HookSpec) -> str:
    return hook.id


def _server_name(server: MCPServer) -> str:
    return server.name


# -- export --------------------------------------------------------------------------------------------


def export_spec(spec: AgentSpec) -> dict[str, JsonValue]:
    """The spec as a document (JSON-ready) that ``parse_spec`` reads back to the same spec.

    Bundled servers lose their ``env`` and ``headers``, the places a secret could ride along, so what is
    exported can be shared; the redacted document is still a valid one.
    """
    doc: dict[str, JsonValue] = {"spec": SPEC_VERSION}
    if spec.requires:
        doc["requires"] = list(spec.requires)
    _put(doc, "name", spec.name)
    _put(doc, "description", spec.description)
    _put(doc, "endpoint", _flat(spec.endpoint))
    model = _flat(spec.model)
    if spec.model.extra_body is not None:
        model["extra_body"] = _json_copy(spec.model.extra_body)
    _put(doc, "model", model)
    if spec.prompt is not None:
        doc["prompt"] = [{"id": s.id, "text": s.text} for s in spec.prompt]
    tools = _flat(spec.tools)
    _put(doc, "tools", tools)
    approvals = _flat(spec.approvals)
    if spec.approvals.overrides is not None:
        approvals["overrides"] = dict(spec.approvals.overrides)
    _put(doc, "approvals", approvals)
    _put(doc, "context", _flat(spec.context))
    _put(doc, "loop", _flat(spec.loop))
    if spec.hooks is not None:
        doc["hooks"] = [_hook(h) for h in spec.hooks]
    if spec.bundle is not None:
        doc["bundle"] = {"mcp_servers": {s.name: _server(s) for s in spec.bundle}}
    return doc


def _put(doc: dict[str, JsonValue], key: str, value: JsonValue) -> None:
    if value is not None and value != {}:
        doc[key] = value


def _flat(value: object) -> dict[str, JsonValue]:
    """A sub-spec's plain fields (tuples as lists); mappings are the caller's to add."""
    out: dict[str, JsonValue] = {}
    for f in fields(value):  # type: ignore[arg-type]
        item = getattr(value, f.name)
        if item is None or isinstance(item, Mapping):
            continue
        out[f.name] = list(item) if isinstance(item, tuple) else item
    return out


def _hook(hook: HookSpec) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {"id": hook.id, "event": hook.event, "tool": hook.tool}
    if hook.arguments:
        out["arguments"] = _json_copy(hook.arguments)
    if hook.max_tokens is not None:
        out["max_tokens"] = hook.max_tokens
    return out


def _server(server: MCPServer) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    if server.command is not None:
        out["command"] = server.command
        if server.args:
            out["args"] = list(server.args)
        if server.cwd is not None:
            out["cwd"] = server.cwd
    if server.url is not None:
        out["url"] = server.url
    return out


def _json_copy(value: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    return {k: _copy(v) for k, v in value.items()}


def _copy(value: JsonValue) -> JsonValue:
    if isinstance(value, Mapping):
        return _json_copy(value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# -- keys ----------------------------------------------------------------------------------------------


def resolve_api_key(
    base_url: str | None,
    api_key: str | None,
    *,
    inherited_base_url: str | None,
    inherited_api_key: str | None,
) -> str:
    """Which key an endpoint gets: its own; none where it names a URL of its own; else the inherited one.

    Nothing here applies it: which key goes where is the host's rule to state, and a library guessing could
    send a key where it was never meant to go. This is the conservative rule: a document naming somebody
    else's endpoint never receives the operator's key (or ``$OPENAI_API_KEY``).

    Args:
        base_url: the endpoint's own URL, if it names one.
        api_key: the endpoint's own key, if it has one.
        inherited_base_url: the URL of the settings it inherits from.
        inherited_api_key: those settings' key.

    Returns:
        the key to send; ``NO_KEY`` for none.
    """
    if api_key:
        return api_key
    if base_url is not None and _normal(base_url) != _normal(inherited_base_url):
        return NO_KEY
    return inherited_api_key or NO_KEY


def _normal(url: str | None) -> str | None:
    return None if url is None else url.strip().rstrip("/")
