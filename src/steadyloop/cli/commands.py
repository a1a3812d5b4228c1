"""The commands besides ``run`` and ``chat``: ``sessions``, ``models`` and ``local``."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInput
from ..messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, UserMessage, text_of
from ..sessions import SessionNotFound, SQLiteSessionStore
from ..wire.windows import list_models
from .chat import session_rows
from .config import Resolved, local_idle
from .kit import AGENT_ID
from .render import TerminalProgress, call_text

if TYPE_CHECKING:
    from ..local import LocalServer

__all__ = ["bundled_server", "local_command", "models", "sessions"]

_SHOW_CHARS = 2000


def _show(message: Message) -> str:
    if isinstance(message, UserMessage):
        return f"user: {text_of(message.content)}"
    if isinstance(message, SystemMessage):
        return f"system: {message.content}"
    if isinstance(message, ToolResultMessage):
        text = text_of(message.content)
        cut = text if len(text) <= _SHOW_CHARS else text[:_SHOW_CHARS] + "…"
        return f"tool{' (error)' if message.is_error else ''}: {cut}"
    assert isinstance(message, AssistantMessage)
    lines = [f"assistant: {message.content}"] if message.content or not message.tool_calls else []
    lines += [f"assistant calls {call_text(c.name, c.arguments)}" for c in message.tool_calls]
    return "\n".join(lines)


async def sessions(action: str, session_id: str | None) -> int:
    """``sessions list|show ID|export ID|delete ID``; returns the exit code.

    Raises:
        SessionNotFound: the id names no session of the CLI's.
    """
    async with SQLiteSessionStore() as store:
        if action == "list":
            found = await store.list(AGENT_ID)
            print("\n".join(session_rows(found)) if found else "no sessions yet", flush=True)
            return 0
        if session_id is None:
            raise InvalidInput(f"sessions {action} needs a session id (see: steadyloop sessions list)")
        if action == "show":
            info = await store.get(session_id, agent_id=AGENT_ID)
            if info is None:
                raise SessionNotFound(f"no session {session_id!r} (see: steadyloop sessions list)")
            usage = info.usage
            print(f"session {info.session_id}: {info.title or ''}".rstrip())
            print(
                f"{info.message_count} messages, {usage.prompt_tokens:,} prompt + "
                f"{usage.completion_tokens:,} completion tokens"
            )
            for message in await store.load_messages(session_id, agent_id=AGENT_ID):
                print(_show(message))
            return 0
        if action == "export":
            sys.stdout.write(await store.export_jsonl(session_id, agent_id=AGENT_ID))
            sys.stdout.flush()
            return 0
        if not await store.delete(session_id, agent_id=AGENT_ID):
            raise SessionNotFound(f"no session {session_id!r} (see: steadyloop sessions list)")
        print(f"deleted {session_id}")
        return 0


async def models(resolved: Resolved) -> int:
    """``models``: what the endpoint serves, with each model's window where the listing says."""
    listed = await list_models(resolved.endpoint)
    for info in listed:
        window = f"{info.context_length:,} tokens" if info.context_length else "window not listed"
        print(f"{info.id}\t{window}")
    if not listed:
        print(f"{resolved.endpoint.shown_url} lists no models")
    return 0


def bundled_server(idle: float | None = None) -> tuple[str, str]:
    """The bundled local model's ``(base_url, model)``: a running one, or one started now.

    A server started here is marked as the CLI's (a bare ``steadyloop local down`` stops it) and stops by
    itself after ``idle`` seconds without a request (default: :func:`~.config.local_idle`). The first start
    installs the server and the model, showing download bytes and build steps on stderr.
    """
    from ..local import CLI_STARTED_BY, LocalServerConfig, start, status
    from ..local.server import health

    for server in status():
        if server.model and health(server.port) == 200:
            _announce_use(server.home, server.port)
            return server.base_url, server.model
    server = start(
        LocalServerConfig(),
        progress=TerminalProgress(),
        idle_stop=local_idle() if idle is None else idle,
        started_by=CLI_STARTED_BY,
    )
    return server.base_url, server.model


def _announce_use(home: Path, port: int) -> None:
    # The reaper counts a touched sidecar as use: a server chosen now is not stopped before it is asked.
    # Servers started elsewhere have no sidecar, and get none.
    from ..local.config import Cache

    with contextlib.suppress(OSError):
        os.utime(Cache(home).sidecar(port))


def _idle_text(server: LocalServer) -> str:
    if server.reaper_pid is None or server.idle_stop is None:
        return "runs until down"
    return f"stops after {server.idle_stop:g} s idle"


def local_command(
    action: str, *, port: int | None = None, every: bool = False, idle: float | None = None
) -> int:
    """``local up [--idle S]|down [--port N|--all]|status``: manage the bundled model's server.

    Raises:
        InvalidInput: an option that does not go with ``action``.
    """
    from ..local import CLI_STARTED_BY, start_reaper, status, stop
    from ..local.server import ports_to_stop

    if (port is not None or every) and action != "down":
        raise InvalidInput("--port and --all go with `steadyloop local down`")
    if idle is not None and action != "up":
        raise InvalidInput("--idle goes with `steadyloop local up`")
    if idle is not None and not 0 <= idle < float("inf"):
        raise InvalidInput(f"--idle must be seconds (0 = never stop), not {idle}")
    if action == "up":
        before = {s.port: s for s in status()}
        url, model = bundled_server(idle)
        reused = next((s for s in before.values() if s.base_url == url), None)
        if reused is not None and idle is not None:
            if reused.started_by == CLI_STARTED_BY:
                start_reaper(reused.port, idle, reused.home)  # re-armed with the idle time asked for now
            else:
                print(f"{url} was not started by steadyloop: its idle stop is left as it is", file=sys.stderr)
        print(f"{url}\t{model}")
        return 0
    running = status()
    if action == "status":
        for server in running:
            by = f"started by {server.started_by}" if server.started_by else "started elsewhere"
            print(
                f"{server.base_url}\t{server.model}\tpid {server.pid}\t{by}\t{_idle_text(server)}"
                f"\tlog {server.log_path}"
            )
        if not running:
            print("no local model running (start one: steadyloop local up)")
        return 0
    ports = ports_to_stop(running, port, every=every)
    for chosen in ports:
        what = "stopped" if stop(chosen) else "nothing running on"
        print(f"{what} http://127.0.0.1:{chosen}/v1", file=sys.stderr)
    if not ports:
        others = f" ({len(running)} started elsewhere left running; --all stops them)" if running else ""
        print(f"no local model started by steadyloop is running{others}", file=sys.stderr)
    return 0
