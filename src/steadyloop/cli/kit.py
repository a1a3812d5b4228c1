"""What ``run`` and ``chat`` both open: the tools, the session store, and an agent that talks in a session.

Every prompt's messages (the user's, the assistant's, the tool results) are appended to the session when the
prompt ends, however it ends, and its events are recorded as they happen, usage included even for a run
that failed. A storage failure is reported once on stderr and never stops the conversation.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..context.keeper import ContextPolicy
from ..errors import InvalidInput
from ..loop import LoopPolicy
from ..messages import AssistantMessage, ImagePart, Message, ToolResultMessage, Turn, UserMessage
from ..request_body import ModelParams
from ..sessions import EventRecorder, SessionNotFound, SessionUsage, SQLiteSessionStore, reconstruct
from ..tools.approvals import ApprovalBroker, ApprovalPolicy
from ..tools.definition import Tool
from ..wire.windows import context_limit_for
from .config import Resolved
from .tools import COMPACT_WINDOW, default_tools, system_prompt

__all__ = ["AGENT_ID", "APPROVAL_POLICY", "AgentOptions", "Conversation", "open_conversation"]

#: The agent id the CLI's sessions belong to.
AGENT_ID = "cli"

#: Everything that changes the world waits for a yes at the terminal.
APPROVAL_POLICY = ApprovalPolicy(
    require_for=frozenset({"mutate-reversible", "mutate-irreversible", "destructive"})
)

_TITLE_CHARS = 60
_KEPT = (UserMessage, AssistantMessage, ToolResultMessage)


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """How to set up the agent, from the command line.

    Attributes:
        system: the system prompt; ``None`` for the CLI's default.
        tools: give the model the file and shell tools.
        mcp: MCP server command lines whose tools are added.
        think: the reasoning effort.
        max_tokens: the reply ceiling.
        temperature: the sampling temperature.
        max_turns: requests one prompt may make.
        session: resume this session.
        resume_latest: resume the most recently active session.
        response_format: hold the answer to a JSON schema.
        tool_routing: ask each step as one tool's call or an answer (``LoopPolicy.tool_routing``).
    """

    system: str | None = None
    tools: bool = True
    mcp: Sequence[str] = ()
    think: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    max_turns: int | None = None
    session: str | None = None
    resume_latest: bool = False
    response_format: Mapping[str, Any] | None = None
    tool_routing: bool = False
    cwd: Path = field(default_factory=Path.cwd)


class Conversation:
    """An agent talking in a session of the store; the session is created at the first prompt.

    Args:
        agent: the agent, its transcript already holding the resumed session's messages.
        store: where sessions live.
        session_id: the resumed session, or ``None`` for a new one.
    """

    def __init__(self, agent: Agent, store: SQLiteSessionStore, session_id: str | None) -> None:
        self.agent = agent
        self.store = store
        self.session_id = session_id
        self._unsubscribe: Callable[[], None] | None = None
        self._warned = False
        if session_id is not None:
            self._attach(session_id)

    def _attach(self, session_id: str) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.session_id = session_id
        self.agent.session_id = session_id
        recorder = EventRecorder(self.store, session_id, AGENT_ID)
        self._unsubscribe = self.agent.subscribe(recorder.record)

    def _warn(self, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            print(f"steadyloop: warning: the session could not be saved: {exc}", file=sys.stderr)

    async def prompt(self, text: str, images: Sequence[ImagePart] = ()) -> Turn:
        """Run one prompt and keep what it added to the transcript, whether it finished or not."""
        if self.session_id is None:
            title = text.strip().splitlines()[0][:_TITLE_CHARS] if text.strip() else None
            try:
                self._attach((await self.store.create(AGENT_ID, title=title)).session_id)
            except Exception as exc:  # a broken store must not take the conversation with it
                self._warn(exc)
        before = len(self.agent.state.messages)
        try:
            return await self.agent.prompt(text, images=images)
        finally:
            added: list[Message] = [m for m in self.agent.state.messages[before:] if isinstance(m, _KEPT)]
            if added and self.session_id is not None:
                try:
                    await self.store.append_messages(self.session_id, added, agent_id=AGENT_ID)
                except Exception as exc:
                    self._warn(exc)

    def reset(self) -> None:
        """Start over: an empty transcript, and a new session at the next prompt."""
        self.agent.reset()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.session_id = None
        self.agent.session_id = None

    async def usage(self) -> SessionUsage:
        """What the session has spent over its whole life."""
        if self.session_id is None:
            return SessionUsage()
        info = await self.store.get(self.session_id, agent_id=AGENT_ID)
        return info.usage if info is not None else SessionUsage()


async def _mcp(lines: Sequence[str], stack: contextlib.AsyncExitStack) -> list[Tool]:
    try:
        from ..tools.mcp import MCPServerSpec, mcp_tools
    except ImportError as exc:
        raise InvalidInput("--mcp needs the MCP SDK: pip install 'steadyloop[mcp]'") from exc
    specs: list[MCPServerSpec] = []
    for line in lines:
        spec = MCPServerSpec.from_command_line(line)
        taken = {s.name for s in specs}
        name, n = spec.name, 2
        while name in taken:  # two servers run by the same executable (npx, uvx) need their own labels
            name, n = f"{spec.name}_{n}", n + 1
        specs.append(MCPServerSpec.from_command_line(line, name=name))
    toolset = await mcp_tools(*specs)
    stack.push_async_callback(toolset.aclose)
    return list(toolset.tools)


@contextlib.asynccontextmanager
async def open_conversation(
    resolved: Resolved, options: AgentOptions, *, approvals: ApprovalBroker | None
) -> AsyncIterator[Conversation]:
    """The agent for ``resolved`` with the tools and session ``options`` ask for; closed on exit.

    Raises:
        SessionNotFound: ``options.session`` names no session of the CLI's.
        MCPError: an MCP server could not be started.
    """
    assert resolved.model is not None, "the model is named before the agent is built"
    async with contextlib.AsyncExitStack() as stack:
        store = SQLiteSessionStore()
        stack.push_async_callback(store.close)
        # Context keeping needs the window; asked once here, and left off for a server that will not say.
        window = await context_limit_for(resolved.endpoint, resolved.model, resolved.context_length)
        tools: list[Tool] = []
        if options.tools:
            tools += default_tools(options.cwd, compact=window is not None and window <= COMPACT_WINDOW)
        if options.mcp:
            tools += await _mcp(options.mcp, stack)
        session_id: str | None = None
        history: list[Message] = []
        if options.session is not None:
            info = await store.get(options.session, agent_id=AGENT_ID)
            if info is None:
                raise SessionNotFound(f"no session {options.session!r} (see: steadyloop sessions list)")
            session_id = info.session_id
        elif options.resume_latest:
            latest = await store.latest(AGENT_ID)
            session_id = latest.session_id if latest is not None else None
        if session_id is not None:
            history = reconstruct(await store.load_messages(session_id, agent_id=AGENT_ID))
        params = ModelParams(
            model=resolved.model,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            reasoning_effort=options.think,
            response_format=options.response_format,
        )
        policy = LoopPolicy(
            context_limit=window,
            context=ContextPolicy() if window else None,
            tool_routing=options.tool_routing,
        )
        system = options.system
        if system is None:
            system = system_prompt(options.cwd) if tools else ""
        agent = Agent(
            resolved.endpoint,
            params,
            system=system,
            tools=tools,
            messages=history,
            policy=policy,
            approvals=approvals,
            approval_policy=APPROVAL_POLICY,
            max_turns=options.max_turns,
        )
        yield Conversation(agent, store, session_id)
