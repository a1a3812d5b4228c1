"""What ``run`` and ``chat`` both open: the tools, the session store, and an agent that lives in a session.

The agent is bound to its session (``AgentSession``): every message (the user's, the assistant's, the tool
results) is appended as it ends, so a kill mid-prompt loses nothing already shown; its events and usage
are recorded as they happen, and its fold is kept, so a long conversation is summarised once per fold,
across prompts and restarts. A storage failure is reported once on stderr and never stops the
conversation. A new session is created in the store with its first message.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import ApprovalPolicy, ContextPolicy, Tool
from ..agent import Agent
from ..errors import InvalidInput
from ..loop import LoopPolicy
from ..messages import ImagePart, Turn
from ..request_body import ModelParams
from ..sessions import AgentSession, SessionNotFound, SessionStore, SessionUsage, open_store
from ..spec import AgentSpec, MCPServer
from ..steering import ToolRouting
from ..tools import ApprovalBroker
from ..wire import context_limit_for
from .config import Resolved
from .described_paths import names_the_project, paths_described_by, readme_for_how, written_folders
from .file_reads import SKIPPED_DIRS, Root
from .how_tested import asks_how_to_test, tells_how_to_test, where_tests_may_be_told
from .named_in_files import file_head, files_declaring, files_defining, settings_asked
from .steering import FILE_TOOL_ROUTING
from .tools import COMPACT_WINDOW, default_tools, listed_files, paths_to_name, system_prompt

__all__ = ["AGENT_ID", "APPROVAL_POLICY", "AgentOptions", "Conversation", "open_conversation"]

#: The agent id the CLI's sessions belong to.
AGENT_ID = "cli"

#: Everything that changes the world waits for a yes at the terminal.
APPROVAL_POLICY = ApprovalPolicy(
    require_for=frozenset({"mutate-reversible", "mutate-irreversible", "destructive"})
)


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
        store: the session store (``open_store``: a PostgreSQL URL or a SQLite file); ``None`` for the
            CLI's default file.
        response_format: hold the answer to a JSON schema.
        tool_routing: ask each step as one tool's call or an answer (``LoopPolicy.tool_routing``).
        tool_gate: with routing, ask tool-or-answer first (``LoopPolicy.tool_gate``).
        spec: the agent document (``--agent``); the flags above are layered over it.
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
    store: str | None = None
    response_format: Mapping[str, Any] | None = None
    tool_routing: bool = False
    tool_gate: bool = True
    cwd: Path = field(default_factory=Path.cwd)
    spec: AgentSpec | None = None


class Conversation:
    """An agent living in a session of the store.

    Args:
        agent: the agent, bound to ``session``.
        store: where sessions live.
        session: the session the agent lives in.
        resumed: the session existed before (``--continue``, ``--session``).
    """

    def __init__(
        self, agent: Agent, store: SessionStore, session: AgentSession, *, resumed: bool = False
    ) -> None:
        self.agent = agent
        self.store = store
        self.session = session
        self.resumed = resumed

    @property
    def session_id(self) -> str | None:
        """The session's id once it is in the store (a new one is created with its first message)."""
        return self.session.session_id if self.session.created else None

    async def prompt(self, text: str, images: Sequence[ImagePart] = ()) -> Turn:
        """Run one prompt; the session keeps every message as it ends, whether the prompt finishes or not."""
        return await self.agent.prompt(text, images=images)

    def reset(self) -> None:
        """Start over: an empty transcript, in a new session created with the next prompt."""
        self.session = AgentSession(self.store, agent_id=AGENT_ID, on_failure=self.session.on_failure)
        self.resumed = False
        self.agent.reset(session=self.session)

    async def usage(self) -> SessionUsage:
        """What the session has spent over its whole life."""
        if self.session_id is None:
            return SessionUsage()
        info = await self.store.get(self.session_id, agent_id=AGENT_ID)
        return info.usage if info is not None else SessionUsage()


def _warn_once() -> Callable[[str], None]:
    warned = False

    def warn(text: str) -> None:
        nonlocal warned
        if not warned:
            warned = True
            print(f"steadyloop: warning: {text}", file=sys.stderr)

    return warn


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
        store = open_store(options.store)
        stack.push_async_callback(store.close)
        # Context keeping needs the window; asked once here, and left off for a server that will not say.
        window = await context_limit_for(resolved.endpoint, resolved.model, resolved.context_length)
        tools: list[Tool] = []
        if options.tools and options.spec is None:  # an agent document picks its own (_spec_agent)
            tools += default_tools(options.cwd, compact=window is not None and window <= COMPACT_WINDOW)
        if options.mcp and options.spec is None:
            tools += await _mcp(options.mcp, stack)
        session_id: str | None = None
        if options.session is not None:
            info = await store.get(options.session, agent_id=AGENT_ID)
            if info is None:
                raise SessionNotFound(f"no session {options.session!r} (see: steadyloop sessions list)")
            session_id = info.session_id
        elif options.resume_latest:
            latest = await store.latest(AGENT_ID)
            session_id = latest.session_id if latest is not None else None
        session = await AgentSession.open(
            store, agent_id=AGENT_ID, session_id=session_id, on_failure=_warn_once()
        )
        if options.spec is not None:
            agent = await _spec_agent(resolved, options, options.spec, approvals, session, stack)
            yield Conversation(agent, store, session, resumed=session_id is not None)
            return
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
            tool_routing=_file_tool_routing(options.cwd) if options.tool_routing else False,
            tool_gate=options.tool_gate,
        )
        system = options.system
        if system is None:
            system = system_prompt(options.cwd) if tools else ""
        agent = Agent(
            resolved.endpoint,
            params,
            system=system,
            tools=tools,
            session=session,
            policy=policy,
            approvals=approvals,
            approval_policy=APPROVAL_POLICY,
            max_turns=options.max_turns,
        )
        yield Conversation(agent, store, session, resumed=session_id is not None)


async def _spec_agent(
    resolved: Resolved,
    options: AgentOptions,
    spec: AgentSpec,
    approvals: ApprovalBroker | None,
    session: AgentSession,
    stack: contextlib.AsyncExitStack,
) -> Agent:
    from .agent_file import cli_settings, flag_layer, servers_of

    assert resolved.model is not None
    window = await context_limit_for(
        resolved.endpoint, resolved.model, spec.endpoint.context_length or resolved.context_length
    )
    settings = cli_settings(
        spec,
        model=resolved.model,
        window=window,
        tools=default_tools(options.cwd, compact=window is not None and window <= COMPACT_WINDOW),
        servers=servers_of(options.mcp),
        require_for=sorted(APPROVAL_POLICY.require_for),
        flags=flag_layer(
            think=options.think,
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            max_turns=options.max_turns,
            tools=options.tools,
        ),
        system=options.system,
        default_system=system_prompt(options.cwd),
    )
    if options.response_format is not None:
        settings = replace(settings, params=replace(settings.params, response_format=options.response_format))
    connected = await _connect(settings.servers, stack) if settings.servers else []
    return settings.agent(resolved.endpoint, tools=connected, approvals=approvals, session=session)


async def _connect(servers: Sequence[MCPServer], stack: contextlib.AsyncExitStack) -> list[Tool]:
    from ..agent_settings import mcp_server_spec

    try:
        from ..tools.mcp import mcp_tools
    except ImportError as exc:
        raise InvalidInput("the agent's MCP servers need the MCP SDK: pip install 'steadyloop[mcp]'") from exc
    toolset = await mcp_tools(*(mcp_server_spec(s) for s in servers))
    stack.push_async_callback(toolset.aclose)
    return list(toolset.tools)


def _file_tool_routing(cwd: Path) -> ToolRouting:
    """The command's routing over ``cwd``: its examples, and a request naming one of the files or folders
    its tools list (in words, or by a function or setting the file defines) first looks at that path."""
    files = paths_to_name(cwd, folders=False)
    folders = paths_to_name(cwd, folders=True)
    # Reading files for the names they define is bounded: the schema's files, or the top level's.
    defining = files_defining(cwd, listed_files(cwd) or [f for f in files if "/" not in f])
    declared_in = files_declaring(cwd, files)
    described = paths_described_by(files, folders)

    def named_in_files(request: str) -> list[str]:
        declaring = defining(request) if settings_asked(request) else []
        # A setting asked of in words is where it is declared: "the Python version" also describes a
        # version.py, and given both, the 1.5B model read packaging's src/packaging/version.py.
        told = told_how_to_test(cwd, files) if asks_how_to_test(request) else []
        found = declaring or [
            *described(request),
            *(told or readme_for_how(request, files)),
            *(declared_in(request) or defining(request)),
        ]
        # A folder is written with a trailing slash: a list_dir that lists no folders still takes it.
        found = [f"{p}/" if p in folders else p for p in found]
        return list(dict.fromkeys([*found, *_folders_under(cwd, request)]))

    return replace(
        FILE_TOOL_ROUTING,
        named_in_files=named_in_files,
        about_files=names_the_project,
        path_arguments={"read_file": ("path", "file"), "list_dir": ("path", "folder")},
    )


def told_how_to_test(cwd: Path, files: Sequence[str]) -> list[str]:
    """The first of the files that may say how the project's tests are run that does (``how_tested``),
    read from its head: README.rst says nothing of tests in click's source, tox.ini does."""
    for path in where_tests_may_be_told(files):
        text = file_head(cwd / path)
        if text is not None and tells_how_to_test(path, text):
            return [path]
    return []


def _folders_under(cwd: Path, request: str) -> list[str]:
    """The folders under ``cwd`` the request writes out as paths, each with a trailing slash (the routing
    then lets ``list_dir`` take one its schema does not list)."""
    root = Root(cwd)
    found: list[str] = []
    for path in written_folders(request):
        try:
            target = root.inside(path)
        except (OSError, ValueError):
            continue
        parts = target.relative_to(root.path).parts
        if parts and target.is_dir() and not any(p in SKIPPED_DIRS or p.startswith(".") for p in parts):
            found.append("/".join(parts) + "/")
    return found
