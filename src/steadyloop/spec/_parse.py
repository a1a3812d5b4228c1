"""``parse_spec``: a JSON-like value read into an ``AgentSpec``, every problem reported at once.

Refused (``SpecError``), because they are about the document rather than a value: it is not an object, its
``spec`` token is missing or of another major version, a ``requires`` entry this host does not honour, and
a table or list of the wrong kind. Everything else that is wrong is dropped with a warning: a value of the
wrong type, an out-of-range number (dropped, not clamped: a clamp would invent a value nobody wrote, while
dropping falls back to one somebody did), an unknown field, and anything that looks like a credential.
``null`` reads as absent. Strings are literals: ``${VAR}`` is kept as written, never expanded.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Literal, TypeVar, cast

from ..providers import UnknownProvider, preset_name
from ._reader import Path, Reader, kind, short
from ._values import (
    EFFECT_CLASSES,
    EFFORT_LEVELS,
    FEATURES,
    HOOK_EVENTS,
    AgentSpec,
    ApprovalsSpec,
    ContextSpec,
    EndpointSpec,
    HookSpec,
    LoopSpec,
    MCPServer,
    ModelSpec,
    ParsedSpec,
    PromptSection,
    SpecError,
    SpecProblem,
    ToolsSpec,
)

__all__ = ["parse_spec", "parse_spec_text"]

T = TypeVar("T")

_TOKEN = re.compile(r"^steadyloop\.agent/(\d{1,6})(?:\.(\d{1,6}))?$")
_MAJOR = 1
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")

# Request fields that are the loop's to set; an extra body never overrides them.
_LOOP_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "tools"})


def parse_spec(document: object, *, bundle: bool = False, features: Collection[str] = FEATURES) -> ParsedSpec:
    """Read an agent document (the value ``json.loads`` or ``tomllib.loads`` returned).

    Args:
        document: the document.
        bundle: read ``bundle.mcp_servers`` too. A bundled server is a program to run, so taking one in is
            the host's decision; without it the bundle is skipped with a warning, and a document that
            ``requires`` it is refused.
        features: what this host honours of ``requires`` (default: everything this library does).

    Returns:
        the spec and every warning, each with its path.

    Raises:
        SpecError: the document was refused; it lists every reason at once.
    """
    reader = Reader()
    try:
        spec = _document(reader, document, bundle, frozenset(features))
    except RecursionError:  # a Python value nested past the interpreter's limit in a place we recurse
        reader.refuse((), "nested too deeply to read")
        spec = None
    if reader.errors or spec is None:
        raise SpecError(tuple(reader.errors), tuple(reader.warnings))
    return ParsedSpec(spec, tuple(reader.warnings))


def parse_spec_text(
    text: str,
    *,
    format: Literal["toml", "json"] = "toml",
    bundle: bool = False,
    features: Collection[str] = FEATURES,
) -> ParsedSpec:
    """Read an agent document from its text, TOML or JSON.

    Raises:
        SpecError: the text is not TOML/JSON, or the document was refused.
    """
    try:
        document: object = tomllib.loads(text) if format == "toml" else json.loads(text)
    except (ValueError, RecursionError) as exc:
        kind = "TOML" if format == "toml" else "JSON"
        raise SpecError((SpecProblem((), f"not valid {kind}: {short(str(exc), 200)}"),)) from None
    return parse_spec(document, bundle=bundle, features=features)


# -- the document's shape ------------------------------------------------------------------------------

_TOP = (
    "spec",
    "requires",
    "name",
    "description",
    "endpoint",
    "model",
    "prompt",
    "tools",
    "approvals",
    "context",
    "loop",
    "hooks",
    "bundle",
)


def _document(reader: Reader, document: object, bundle: bool, features: frozenset[str]) -> AgentSpec | None:
    if not isinstance(document, Mapping):
        reader.refuse((), f"an agent document is a table (an object), got {kind(document)}")
        return None
    top = reader.table(document, ())
    assert top is not None  # a mapping met first is always read
    _token(reader, top.get("spec"))
    reader.fields(top, (), _TOP)
    honoured = features if bundle else features - {"bundle"}
    requires: list[str] = []
    for i, feature in enumerate(reader.array(top.get("requires"), ("requires",)) or ()):
        if isinstance(feature, str) and feature in honoured:
            if feature not in requires:
                requires.append(feature)
        elif feature is not None:  # what a document needs and the host cannot give refuses the document
            why = "bundles are not allowed here" if feature == "bundle" else "this host does not honour it"
            reader.refuse(("requires", i), f"requires {short(feature)}, and {why}")
    spec = AgentSpec(
        requires=tuple(requires),
        name=reader.text(top.get("name"), ("name",)),
        description=reader.text(top.get("description"), ("description",)),
        endpoint=_endpoint(reader, top.get("endpoint")),
        model=_model(reader, top.get("model")),
        prompt=_by_id(reader, top.get("prompt"), ("prompt",), _section),
        tools=_tools(reader, top.get("tools")),
        approvals=_approvals(reader, top.get("approvals")),
        context=_context(reader, top.get("context")),
        loop=_loop(reader, top.get("loop")),
        hooks=_by_id(reader, top.get("hooks"), ("hooks",), _hook),
    )
    if bundle:
        spec = replace(spec, bundle=_bundle(reader, top.get("bundle")))
    elif top.get("bundle") is not None:
        reader.warn(
            ("bundle",), "bundled MCP servers are programs to run and this host did not allow them; ignored"
        )
    return spec


def _token(reader: Reader, token: object) -> None:
    path: Path = ("spec",)
    if token is None:
        reader.refuse(path, f'missing; an agent document opens with spec = "steadyloop.agent/{_MAJOR}"')
        return
    match = _TOKEN.match(token) if isinstance(token, str) else None
    if match is None:
        reader.refuse(path, f'{short(token)} is not a spec token such as "steadyloop.agent/{_MAJOR}"')
    elif int(match.group(1)) != _MAJOR:
        reader.refuse(path, f"version {match.group(1)} is not {_MAJOR}, the one this host reads")


def _endpoint(reader: Reader, value: object) -> EndpointSpec:
    path: Path = ("endpoint",)
    table = reader.table(value, path)
    if table is None:
        return EndpointSpec()
    known = ("base_url", "provider", "failover", "context_length", "request_timeout", "first_token_timeout")
    reader.fields(table, path, known)
    provider = _preset(reader, table.get("provider"), (*path, "provider"))
    failover = _failover(reader, table.get("failover"), (*path, "failover"))
    if failover and provider is None:
        reader.refuse((*path, "failover"), "hands over from a provider: name one in endpoint.provider")
    return EndpointSpec(
        base_url=_base_url(reader, table.get("base_url"), (*path, "base_url")),
        provider=provider,
        failover=failover,
        context_length=reader.whole(table.get("context_length"), (*path, "context_length"), 1, 10**9),
        request_timeout=reader.number(table.get("request_timeout"), (*path, "request_timeout"), 0, 1e6),
        first_token_timeout=reader.number(
            table.get("first_token_timeout"), (*path, "first_token_timeout"), 0, 1e6
        ),
    )


def _preset(reader: Reader, value: object, path: Path) -> str | None:
    """A provider preset's name as ``PROVIDERS`` spells it; an unknown one is refused."""
    name = reader.text(value, path, empty=False)
    if name is None:
        return None
    try:
        return preset_name(name)
    except UnknownProvider as error:
        reader.refuse(path, f"{short(name)} is no provider preset; known: {', '.join(error.known)}")
        return None


def _failover(reader: Reader, value: object, path: Path) -> tuple[str, ...] | None:
    """Candidates ``provider[:model]``; the model is kept as written (only the first colon splits)."""
    items = reader.array(value, path)
    if items is None:
        return None
    candidates: list[str] = []
    for i, item in enumerate(items):
        text = reader.text(item, (*path, i), empty=False)
        if text is None:
            continue
        name, colon, model = text.strip().partition(":")
        preset = _preset(reader, name, (*path, i))
        if preset is None:
            continue
        model = model.strip()
        if colon and not model:
            reader.warn((*path, i), "names no model after ':'; the run's model is used")
        candidates.append(f"{preset}:{model}" if model else preset)
    return tuple(candidates)


def _base_url(reader: Reader, value: object, path: Path) -> str | None:
    url = reader.text(value, path)
    if url is None:
        return None
    url = url.strip()
    if not re.match(r"^https?://[^\s/?#]+(?:/[^\s]*)?$", url):
        reader.warn(path, f"{short(url)} is not an http:// or https:// URL; ignored")
        return None
    authority = url.split("://", 1)[1].split("/", 1)[0]
    if "@" in authority or re.search(r"[?&](?:api_?key|key|token|access_token)=", url, re.IGNORECASE):
        reader.warn(path, "carries a credential (user:password@ or a key in the query); ignored")
        return None
    return url.rstrip("/")


def _model(reader: Reader, value: object) -> ModelSpec:
    path: Path = ("model",)
    table = reader.table(value, path)
    if table is None:
        return ModelSpec()
    known = ("name", "temperature", "max_tokens", "reasoning_effort", "tool_choice", "reasoning_replay")
    reader.fields(table, path, (*known, "extra_body"))
    extra = reader.json_table(table.get("extra_body"), (*path, "extra_body"))
    if extra is not None:
        for key in sorted(_LOOP_FIELDS & extra.keys()):
            reader.warn((*path, "extra_body", key), "is the loop's to set; ignored")
            del extra[key]
    return ModelSpec(
        name=reader.text(table.get("name"), (*path, "name"), empty=False),
        temperature=reader.number(table.get("temperature"), (*path, "temperature"), 0, 2),
        max_tokens=reader.whole(table.get("max_tokens"), (*path, "max_tokens"), 1, 10**8),
        reasoning_effort=reader.choice(
            table.get("reasoning_effort"), (*path, "reasoning_effort"), EFFORT_LEVELS
        ),
        tool_choice=cast(
            Literal["auto", "required", "none"] | None,
            reader.choice(table.get("tool_choice"), (*path, "tool_choice"), ("auto", "required", "none")),
        ),
        reasoning_replay=reader.flag(table.get("reasoning_replay"), (*path, "reasoning_replay")),
        extra_body=None if extra is None else MappingProxyType(extra),
    )


def _by_id(
    reader: Reader,
    value: object,
    path: Path,
    read: Callable[[Reader, Mapping[str, object], Path], T | None],
) -> tuple[T, ...] | None:
    """Entries with ids; a repeated id keeps the first one's place and the last one's value."""
    items = reader.array(value, path)
    if items is None:
        return None
    kept: dict[str, T] = {}
    for i, item in enumerate(items):
        table = reader.table(item, (*path, i))
        if table is None:
            continue
        entry = read(reader, table, (*path, i))
        if entry is None:
            continue
        ident = cast(str, getattr(entry, "id"))  # noqa: B009 - both entry types have one
        if ident in kept:
            reader.warn((*path, i, "id"), f"{short(ident)} appears earlier too; this one replaces it")
        kept[ident] = entry
    return tuple(kept.values())


def _section(reader: Reader, table: Mapping[str, object], path: Path) -> PromptSection | None:
    reader.fields(table, path, ("id", "text"))
    ident = reader.text(table.get("id"), (*path, "id"), empty=False)
    text = reader.text(table.get("text"), (*path, "text"))
    if ident is None or text is None:
        reader.warn(path, "a prompt section needs an id and a text; this one is ignored")
        return None
    return PromptSection(ident, text)


def _hook(reader: Reader, table: Mapping[str, object], path: Path) -> HookSpec | None:
    reader.fields(table, path, ("id", "event", "tool", "arguments", "max_tokens"))
    ident = reader.text(table.get("id"), (*path, "id"), empty=False)
    event = reader.choice(table.get("event"), (*path, "event"), HOOK_EVENTS)
    tool = reader.name(table.get("tool"), (*path, "tool"))
    arguments = reader.json_table(table.get("arguments"), (*path, "arguments"))
    max_tokens = reader.whole(table.get("max_tokens"), (*path, "max_tokens"), 1, 10**6)
    if ident is None or event is None or tool is None:
        reader.warn(path, "a hook needs an id, an event and a tool; this one is ignored")
        return None
    return HookSpec(
        id=ident,
        event=event,
        tool=tool,
        arguments=MappingProxyType(arguments or {}),
        max_tokens=max_tokens,
    )


def _tools(reader: Reader, value: object) -> ToolsSpec:
    path: Path = ("tools",)
    table = reader.table(value, path)
    if table is None:
        return ToolsSpec()
    known = ("names", "servers", "discovery", "parallel", "max_concurrency", "timeout", "recover_calls")
    reader.fields(table, path, known)
    return ToolsSpec(
        names=reader.names(table.get("names"), (*path, "names"), reader.name),
        servers=reader.names(table.get("servers"), (*path, "servers"), reader.name),
        discovery=cast(
            Literal["all", "ondemand"] | None,
            reader.choice(table.get("discovery"), (*path, "discovery"), ("all", "ondemand")),
        ),
        parallel=reader.flag(table.get("parallel"), (*path, "parallel")),
        max_concurrency=reader.whole(table.get("max_concurrency"), (*path, "max_concurrency"), 0, 1024),
        timeout=reader.number(table.get("timeout"), (*path, "timeout"), 0, 1e6, above=True),
        recover_calls=reader.flag(table.get("recover_calls"), (*path, "recover_calls")),
    )


def _approvals(reader: Reader, value: object) -> ApprovalsSpec:
    path: Path = ("approvals",)
    table = reader.table(value, path)
    if table is None:
        return ApprovalsSpec()
    reader.fields(table, path, ("require_for", "overrides", "timeout"))

    def effect(item: object, at: Path) -> str | None:
        return reader.choice(item, at, EFFECT_CLASSES)

    overrides: dict[str, bool] | None = None
    given = reader.table(table.get("overrides"), (*path, "overrides"))
    if given is not None:
        overrides = {}
        for key, item in given.items():
            if reader.name(key, (*path, "overrides", key)) is None:
                continue
            gate = reader.flag(item, (*path, "overrides", key))
            if gate is not None:
                overrides[key] = gate
    return ApprovalsSpec(
        require_for=reader.names(table.get("require_for"), (*path, "require_for"), effect),
        overrides=None if overrides is None else MappingProxyType(overrides),
        timeout=reader.number(table.get("timeout"), (*path, "timeout"), 0, 1e6, above=True),
    )


def _context(reader: Reader, value: object) -> ContextSpec:
    path: Path = ("context",)
    table = reader.table(value, path)
    if table is None:
        return ContextSpec()
    reader.fields(table, path, ("enabled", "keep_last", "max_chars"))
    return ContextSpec(
        enabled=reader.flag(table.get("enabled"), (*path, "enabled")),
        keep_last=reader.whole(table.get("keep_last"), (*path, "keep_last"), 0, 10**6),
        max_chars=reader.whole(table.get("max_chars"), (*path, "max_chars"), 0, 10**9),
    )


def _loop(reader: Reader, value: object) -> LoopSpec:
    path: Path = ("loop",)
    table = reader.table(value, path)
    if table is None:
        return LoopSpec()
    reader.fields(table, path, ("max_tool_iterations", "max_continuations", "max_turns", "run_timeout"))
    return LoopSpec(
        max_tool_iterations=reader.whole(
            table.get("max_tool_iterations"), (*path, "max_tool_iterations"), 1, 10**6
        ),
        max_continuations=reader.whole(table.get("max_continuations"), (*path, "max_continuations"), 0, 100),
        max_turns=reader.whole(table.get("max_turns"), (*path, "max_turns"), 1, 10**6),
        run_timeout=reader.number(table.get("run_timeout"), (*path, "run_timeout"), 0, 1e7, above=True),
    )


def _bundle(reader: Reader, value: object) -> tuple[MCPServer, ...] | None:
    table = reader.table(value, ("bundle",))
    if table is None:
        return None
    reader.fields(table, ("bundle",), ("mcp_servers",))
    path: Path = ("bundle", "mcp_servers")
    servers = reader.table(table.get("mcp_servers"), path)
    if servers is None:
        return None
    out: list[MCPServer] = []
    for name, entry in servers.items():
        server = _server(reader, name, entry, (*path, name))
        if server is not None:
            out.append(server)
    return tuple(out)


def _server(reader: Reader, name: str, value: object, path: Path) -> MCPServer | None:
    table = reader.table(value, path)
    if table is None or reader.name(name, path) is None:
        return None
    reader.fields(table, path, ("command", "args", "env", "cwd", "url", "headers"))
    command = reader.text(table.get("command"), (*path, "command"), empty=False)
    url = _base_url(reader, table.get("url"), (*path, "url"))
    args = _texts(reader, table.get("args"), (*path, "args"))
    env = _literals(reader, table.get("env"), (*path, "env"), _ENV_NAME)
    cwd = reader.text(table.get("cwd"), (*path, "cwd"), empty=False)
    headers = _literals(reader, table.get("headers"), (*path, "headers"), _HEADER_NAME)
    if (command is None) == (url is None):
        reader.warn(path, "a bundled server has either a command or a url; this one is ignored")
        return None
    if url is not None and (args or env or cwd):
        reader.warn(path, "args, env and cwd are for a command, not a url; ignored")
        args, env, cwd = (), None, None
    if command is not None and headers:
        reader.warn((*path, "headers"), "headers are for a url, not a command; ignored")
        headers = None
    return MCPServer(name=name, command=command, args=args, env=env, cwd=cwd, url=url, headers=headers)


def _texts(reader: Reader, value: object, path: Path) -> tuple[str, ...]:
    items = reader.array(value, path) or []
    return tuple(t for i, item in enumerate(items) if (t := reader.text(item, (*path, i))) is not None)


def _literals(reader: Reader, value: object, path: Path, names: re.Pattern[str]) -> Mapping[str, str] | None:
    table = reader.table(value, path)
    if table is None:
        return None
    out: dict[str, str] = {}
    for key, item in table.items():
        if not names.match(key):
            reader.warn((*path, key), "is not a valid name here; ignored")
            continue
        text = reader.text(item, (*path, key))
        if text is not None:
            out[key] = text
    return MappingProxyType(out)
