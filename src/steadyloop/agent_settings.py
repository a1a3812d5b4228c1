"""From a resolved agent spec to a running ``Agent``: the prompt, the model, the tools, the policies (public).

``agent_settings`` picks the agent's tools out of what the host offers (``tools.names``: absent is every
tool, ``[]`` none, a list exactly those) and its MCP servers the same way (``tools.servers``, over the
host's servers and the document's own bundled ones), and fills what no layer said with the library's
defaults. Connecting the servers is I/O and stays with the caller (``mcp_server_spec`` and
``steadyloop.tools.mcp.mcp_tools``); their tools are handed to ``AgentSettings.agent`` with the endpoint.

A spec's hooks call read-only tools: at their event, the tool runs with the hook's arguments and its text
becomes context on the question (``steadyloop.hooks``). They run without asking anyone, which is why a hook
may only name a tool whose effect is ``read``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .agent import Agent
from .context.keeper import ContextPolicy
from .errors import InvalidInput
from .hooks import HookContext, HookEvent, HookOutcome, HookRunner
from .loop import LifecycleHooks, LoopPolicy
from .messages import text_of
from .request_body import ModelParams
from .sessions.bound import AgentSession
from .spec import AgentSpec, HookSpec, JsonValue, MCPServer
from .tools.approvals import ApprovalBroker, ApprovalPolicy
from .tools.batch import ToolPolicy
from .tools.definition import EffectClass, Tool, ToolContext, ToolResult
from .wire.endpoints import Endpoint

if TYPE_CHECKING:
    from .tools.mcp import MCPServerSpec

__all__ = ["AgentSettings", "agent_settings", "mcp_server_spec", "spec_hook_runner"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What an ``Agent`` is built from, worked out from a resolved spec.

    Attributes:
        system: the system prompt.
        params: the model and what to ask of it.
        tools: the host's tools the agent gets.
        servers: the MCP servers the agent gets; the caller connects them.
        policy: the loop policy (tool runs, continuations, discovery, the window and context keeping).
        approval_policy: which calls wait for a decision.
        hooks: lifecycle hooks that call read-only tools.
        max_turns: requests one prompt may make.
        run_timeout: seconds a run may take.
    """

    system: str
    params: ModelParams
    tools: tuple[Tool, ...] = ()
    servers: tuple[MCPServer, ...] = ()
    policy: LoopPolicy = field(default_factory=LoopPolicy)
    approval_policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    hooks: tuple[HookSpec, ...] = ()
    max_turns: int | None = None
    run_timeout: float | None = None

    def agent(
        self,
        endpoint: Endpoint,
        *,
        tools: Sequence[Tool] = (),
        messages: Sequence[Any] = (),
        approvals: ApprovalBroker | None = None,
        session_id: str | None = None,
        hook_context: HookContext | None = None,
        session: AgentSession | None = None,
    ) -> Agent:
        """An ``Agent`` with these settings.

        Args:
            endpoint: where to send requests.
            tools: more tools, such as the connected servers' (``mcp_tools(...).tools``).
            messages: a transcript to start from.
            approvals: the broker gated calls wait on.
            session_id: the session the agent talks in.
            hook_context: what the hooks are told besides the prompt (session, host, extra).
            session: the stored session the agent lives in (its history, fold and capability snapshot).

        Raises:
            InvalidInput: a hook names a tool the agent does not have, or one that is not read-only.
        """
        every = (*self.tools, *tools)
        lifecycle = None
        if self.hooks:
            lifecycle = LifecycleHooks(
                run=spec_hook_runner(self.hooks, every), context=hook_context or HookContext()
            )
        return Agent(
            endpoint,
            self.params,
            system=self.system,
            tools=every,
            messages=messages,
            policy=self.policy,
            approvals=approvals,
            approval_policy=self.approval_policy,
            max_turns=self.max_turns,
            run_timeout=self.run_timeout,
            session_id=session_id,
            lifecycle=lifecycle,
            session=session,
        )


def agent_settings(
    spec: AgentSpec,
    *,
    tools: Sequence[Tool] = (),
    servers: Sequence[MCPServer] = (),
    model: str | None = None,
) -> AgentSettings:
    """The settings a resolved spec asks for, out of what the host offers.

    Args:
        spec: the resolved spec (``resolve_agent_spec``).
        tools: the host's tools, the registry ``tools.names`` picks from.
        servers: the host's MCP servers; ``spec.bundle`` adds the document's own (a host server of the
            same name wins).
        model: the model when the spec names none (the one the endpoint serves, say).

    Raises:
        InvalidInput: the spec names a tool or server the host does not offer, or no model is named.
    """
    name = spec.model.name or model
    if not name:
        raise InvalidInput("the agent names no model: set model.name in the document, or pass one")
    chosen = _pick("tool", {t.name: t for t in tools}, spec.tools.names)
    offered = {s.name: s for s in spec.bundle or ()}
    offered.update((s.name, s) for s in servers)
    picked_servers = _pick("MCP server", offered, spec.tools.servers)
    return AgentSettings(
        system=spec.system_prompt or "",
        params=_params(spec, name),
        tools=tuple(chosen),
        servers=tuple(picked_servers),
        policy=_policy(spec),
        approval_policy=_approvals(spec),
        hooks=spec.hooks or (),
        max_turns=spec.loop.max_turns,
        run_timeout=spec.loop.run_timeout,
    )


def _pick(kind: str, offered: Mapping[str, Any], names: Sequence[str] | None) -> list[Any]:
    if names is None:
        return list(offered.values())
    missing = [n for n in names if n not in offered]
    if missing:
        have = ", ".join(sorted(offered)) or "none"
        raise InvalidInput(
            f"the agent asks for {kind}s this host does not offer: {', '.join(missing)} (offered: {have})"
        )
    return [offered[n] for n in names]


def _params(spec: AgentSpec, name: str) -> ModelParams:
    model = spec.model
    return ModelParams(
        model=name,
        temperature=model.temperature,
        max_tokens=model.max_tokens,
        reasoning_effort=model.reasoning_effort,
        tool_choice=model.tool_choice,
        extra_body=_plain(model.extra_body) if model.extra_body else {},
        reasoning_replay=model.reasoning_replay,
    )


def _policy(spec: AgentSpec) -> LoopPolicy:
    base, tools, loop = LoopPolicy(), spec.tools, spec.loop
    tool_base = ToolPolicy()
    context = None
    if spec.context.enabled:
        keep = ContextPolicy()
        context = ContextPolicy(
            keep_last=_or(spec.context.keep_last, keep.keep_last),
            max_chars=_or(spec.context.max_chars, keep.max_chars),
        )
    return LoopPolicy(
        max_tool_iterations=_or(loop.max_tool_iterations, base.max_tool_iterations),
        tools=ToolPolicy(
            parallel=_or(tools.parallel, tool_base.parallel),
            max_concurrency=_or(tools.max_concurrency, tool_base.max_concurrency),
            timeout=_or(tools.timeout, tool_base.timeout),
        ),
        max_continuations=_or(loop.max_continuations, base.max_continuations),
        tool_discovery=_or(tools.discovery, base.tool_discovery),
        recover_tool_calls=_or(tools.recover_calls, base.recover_tool_calls),
        context_limit=_or(spec.endpoint.context_length, base.context_limit),
        context=context,
    )


def _approvals(spec: AgentSpec) -> ApprovalPolicy:
    base, given = ApprovalPolicy(), spec.approvals
    require = base.require_for if given.require_for is None else frozenset(given.require_for)
    return ApprovalPolicy(
        require_for=cast(frozenset[EffectClass], require),
        overrides=dict(given.overrides or {}),
        timeout_s=_or(given.timeout, base.timeout_s),
    )


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


def _plain(value: Mapping[str, JsonValue]) -> dict[str, Any]:
    # A fresh copy: the request body must not share (or let anyone mutate) the spec's values.
    def copy(item: JsonValue) -> Any:
        if isinstance(item, Mapping):
            return {k: copy(v) for k, v in item.items()}
        if isinstance(item, list):
            return [copy(v) for v in item]
        return item

    return {k: copy(v) for k, v in value.items()}


def spec_hook_runner(hooks: Sequence[HookSpec], tools: Sequence[Tool]) -> HookRunner:
    """A ``HookRunner`` that runs each hook by calling its read-only tool with its arguments.

    A tool that raises or answers with an error is that hook's error; the others still run.

    Raises:
        InvalidInput: a hook names a tool not in ``tools``, or one whose effect is not ``read``.
    """
    by_name = {t.name: t for t in tools}
    bound: list[tuple[HookSpec, Tool]] = []
    for hook in hooks:
        tool = by_name.get(hook.tool)
        if tool is None:
            raise InvalidInput(f"hook {hook.id!r} calls {hook.tool!r}, which the agent does not have")
        if tool.effect != "read":
            raise InvalidInput(
                f"hook {hook.id!r} calls {hook.tool!r}, whose effect is {tool.effect or 'not declared'}; "
                "hooks run without approval, so they may only call read-only tools"
            )
        bound.append((hook, tool))

    async def run(
        event: HookEvent, context: HookContext, *, cancel: asyncio.Event | None
    ) -> list[HookOutcome]:
        outcomes: list[HookOutcome] = []
        for hook, tool in bound:
            if hook.event != event:
                continue
            call = ToolContext(call_id=f"hook_{hook.id}", name=tool.name, cancelled=cancel or asyncio.Event())
            try:
                result = ToolResult.of(await tool.execute(_plain(hook.arguments), call))
            except Exception as exc:  # one failing hook costs only its own context
                outcomes.append(HookOutcome(hook_id=hook.id, error=f"{type(exc).__name__}: {exc}"))
                continue
            text = text_of(result.content)
            if result.is_error:
                outcomes.append(HookOutcome(hook_id=hook.id, error=text or "the tool reported an error"))
            else:
                outcomes.append(HookOutcome(hook_id=hook.id, text=text or None, max_tokens=hook.max_tokens))
        return outcomes

    return run


def mcp_server_spec(server: MCPServer) -> MCPServerSpec:
    """A spec's MCP server as ``steadyloop.tools.mcp`` connects it (needs the ``mcp`` extra).

    Environment values and headers are passed as the literals the document holds.
    """
    try:
        from .tools.mcp import MCPServerSpec
    except ImportError as exc:
        raise InvalidInput("MCP servers need the MCP SDK: pip install 'steadyloop[mcp]'") from exc
    return MCPServerSpec(
        name=server.name,
        command=server.command,
        args=server.args,
        env=dict(server.env) if server.env is not None else None,
        cwd=server.cwd,
        url=server.url,
        headers=dict(server.headers) if server.headers is not None else None,
    )
