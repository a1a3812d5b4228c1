"""The commands besides ``run`` and ``chat``: ``sessions``, ``models`` and ``local``."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import list_models
from ..errors import InvalidInput
from ..messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, UserMessage, text_of
from ..sessions import SessionNotFound, SessionStore, last_run, open_store
from .chat import session_listing
from .config import Resolved, local_idle, local_model
from .kit import AGENT_ID
from .render import TerminalProgress, call_text

if TYPE_CHECKING:
    from ..local import LocalServer, LocalServerConfig

__all__ = ["LocalChoice", "build_native", "bundled_server", "local_command", "models", "sessions"]

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


async def sessions(action: str, session_id: str | None, *, store: str | None = None) -> int:
    """``sessions list|show ID|export ID|delete ID``; returns the exit code.

    Raises:
        SessionNotFound: the id names no session of the CLI's.
    """
    opened = open_store(store)
    try:
        return await _sessions(opened, action, session_id)
    finally:
        await opened.close()


async def _sessions(store: SessionStore, action: str, session_id: str | None) -> int:
    if action == "list":
        print(await session_listing(store), flush=True)
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
        end = await last_run(store, info)
        if end is not None and end.outcome != "completed":
            print(
                f"the last run ended without an answer ({end.outcome}): {end.error or 'no reason recorded'}"
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


@dataclass(frozen=True, slots=True)
class LocalChoice:
    """What ``local up`` (or the bundled default) asks of the local server; ``None`` takes the default.

    Attributes:
        port: listen on this port.
        ctx: the context size in tokens.
        template: the chat template (``jsonblock``, ``think``, ``stock``).
        idle: stop after this many seconds without a request (0 = never; default: ``local_idle()``).
        model: which of ``steadyloop.local.models.MODELS`` (default: ``local_model()``).
        keyless: serve requests without the server's key (see ``steadyloop.local.keys``).
    """

    port: int | None = None
    ctx: int | None = None
    template: str | None = None
    idle: float | None = None
    model: str | None = None
    keyless: bool = False


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(f"· {text}", file=sys.stderr, flush=True)


def _config(choice: LocalChoice) -> LocalServerConfig:
    from ..local import LocalServerConfig

    settings: dict[str, Any] = {"model": choice.model or local_model()}
    if choice.ctx is not None:
        settings["ctx"] = choice.ctx
    if choice.template is not None:
        settings["template"] = choice.template
    return LocalServerConfig(**settings, require_key=not choice.keyless)


def _reusable(choice: LocalChoice, cfg: LocalServerConfig) -> LocalServer | None:
    """A healthy server the steadyloop command started, running what was asked; never someone else's."""
    from ..local import CLI_STARTED_BY, health, matches, status

    for server in status(cfg.home):
        if server.started_by != CLI_STARTED_BY or (choice.port is not None and server.port != choice.port):
            continue
        # Other settings, or an older template than this steadyloop ships, are not reused; a server that
        # `local up --no-key` started keyless is, as its owner asked for it.
        if not (matches(server, cfg) or matches(server, replace(cfg, require_key=False))):
            continue
        if health(server.port) == 200:
            return server
    return None


def bundled_server(choice: LocalChoice | None = None, *, quiet: bool = False) -> tuple[str, str]:
    """The bundled local model's ``(base_url, model)``: one the steadyloop command started, or a new one.

    A server another process started in the shared cache is never picked up: the command uses servers it
    started (said on stderr) or starts its own on a free port. A server started here is marked as the
    CLI's (a bare ``steadyloop local down`` stops it) and stops by itself after ``choice.idle`` seconds
    without a request (default: :func:`~.config.local_idle`). The first start installs the server and the
    model, showing download bytes and build steps on stderr.
    """
    from ..local import CLI_STARTED_BY, Heartbeat, no_progress, start

    choice = choice or LocalChoice()
    cfg = _config(choice)
    found = _reusable(choice, cfg)
    if found is not None:
        _announce_use(found.home, found.port)
        _say(f"using the bundled model at {found.base_url} (started by steadyloop, pid {found.pid})", quiet)
        return found.base_url, found.model
    idle = local_idle() if choice.idle is None else choice.idle
    with Heartbeat(no_progress if quiet else TerminalProgress()) as progress:
        server = start(cfg, choice.port, progress=progress, idle_stop=idle, started_by=CLI_STARTED_BY)
    stops = f"stops after {idle:g} s without a request" if idle else "runs until `steadyloop local down`"
    _say(f"started the bundled model at {server.base_url} (pid {server.pid}; {stops})", quiet)
    if server.engine == "xllamacpp":
        _say(
            "it runs on the prebuilt engine; `steadyloop local build` compiles one for this CPU that reads "
            "prompts about a quarter faster (about 6 min on 2 cores, once)",
            quiet,
        )
    return server.base_url, server.model


def _key_note(url: str, quiet: bool) -> None:
    from ..local import key_file_for, key_note, read_key

    path = key_file_for(url)
    if path is not None and read_key(path) is not None:
        _say(key_note(path), quiet)


def build_native(*, quiet: bool = False) -> int:
    """``local build``: compile the native ``llama-server`` for this CPU, once; print where it is."""
    from ..local import BUILT_NOTE, Heartbeat, LocalServerConfig, ensure_binary, no_progress

    with Heartbeat(no_progress if quiet else TerminalProgress()) as progress:
        binary = ensure_binary(LocalServerConfig(engine="llama-server"), progress)
    print(binary, flush=True)
    _say(BUILT_NOTE, quiet)
    return 0


def _announce_use(home: Path, port: int) -> None:
    # The reaper counts a touched sidecar as use: a server chosen now is not stopped before it is asked.
    from ..local import Cache

    with contextlib.suppress(OSError):
        os.utime(Cache(home).sidecar(port))


def _idle_text(server: LocalServer) -> str:
    stops = [f"after {server.idle_stop:g} s idle"] if server.idle_stop is not None else []
    stops += [f"when pid {server.owner} exits"] if server.owner is not None else []
    if server.reaper_pid is None or not stops:
        return "runs until down"
    return f"stops {' or '.join(stops)}"


def local_command(
    action: str,
    *,
    port: int | None = None,
    every: bool = False,
    idle: float | None = None,
    ctx: int | None = None,
    template: str | None = None,
    quiet: bool = False,
    model: str | None = None,
    keyless: bool = False,
) -> int:
    """``local up [--port N] [--ctx N] [--template T] [--idle S] [--no-key]|down [--port N|--all]|status|build``.

    Raises:
        InvalidInput: an option that does not go with ``action``.
    """
    from ..local import ports_to_stop, start_reaper, status, stop

    if action == "build" and (port is not None or every):
        raise InvalidInput("--port and --all do not go with `steadyloop local build`")
    if every and action != "down":
        raise InvalidInput("--all goes with `steadyloop local down`")
    if port is not None and action == "status":
        raise InvalidInput("--port goes with `steadyloop local up` or `down`")
    if action != "up":
        for given, flag in ((idle, "--idle"), (ctx, "--ctx"), (template, "--template"), (model, "--model")):
            if given is not None:
                raise InvalidInput(f"{flag} goes with `steadyloop local up`")
        if keyless:
            raise InvalidInput("--no-key goes with `steadyloop local up`")
    if idle is not None and not 0 <= idle < float("inf"):
        raise InvalidInput(f"--idle must be seconds (0 = never stop), not {idle}")
    if action == "build":
        return build_native(quiet=quiet)
    if action == "up":
        before = {s.base_url for s in status()}
        url, served = bundled_server(LocalChoice(port, ctx, template, idle, model, keyless), quiet=quiet)
        if url in before and idle is not None:
            reused = next(s for s in status() if s.base_url == url)
            start_reaper(reused.port, idle, reused.home)  # re-armed with the idle time asked for now
        print(f"{url}\t{served}")
        _key_note(url, quiet)
        return 0
    running = status()
    if action == "status":
        for server in running:
            by = f"started by {server.started_by}" if server.started_by else "started elsewhere"
            print(
                f"{server.base_url}\t{server.model}\t{server.engine or '-'}\tpid {server.pid}\t{by}"
                f"\t{_idle_text(server)}"
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
