"""The commands besides ``run`` and ``chat``: ``sessions``, ``models`` and ``local``."""

from __future__ import annotations

import sys

from ..errors import InvalidInput
from ..messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, UserMessage, text_of
from ..sessions import SessionNotFound, SQLiteSessionStore
from ..wire.windows import list_models
from .chat import session_rows
from .config import Resolved
from .kit import AGENT_ID
from .render import TerminalProgress, call_text

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
        print(f"{resolved.endpoint.base_url} lists no models")
    return 0


def bundled_server() -> tuple[str, str]:
    """The bundled local model's ``(base_url, model)``: a running one, or one started now and left running.

    The first start installs the server and the model, showing download bytes and build steps on stderr.
    """
    from ..local import LocalServerConfig, start, status
    from ..local.server import health

    for server in status():
        if server.model and health(server.port) == 200:
            return server.base_url, server.model
    server = start(LocalServerConfig(), progress=TerminalProgress())
    return server.base_url, server.model


def local_command(action: str) -> int:
    """``local up|down|status``: manage the bundled model's server."""
    from ..local import status, stop

    if action == "up":
        url, model = bundled_server()
        print(f"{url}\t{model}")
        return 0
    running = status()
    if action == "status":
        for server in running:
            print(f"{server.base_url}\t{server.model}\tpid {server.pid}\tlog {server.log_path}")
        if not running:
            print("no local model running (start one: steadyloop local up)")
        return 0
    for server in running:
        stop(server.port)
        print(f"stopped {server.base_url}", file=sys.stderr)
    if not running:
        print("no local model running", file=sys.stderr)
    return 0
