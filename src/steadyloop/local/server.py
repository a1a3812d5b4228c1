"""Starting, finding and stopping local servers on loopback, each known by its port and recorded PID.

A server runs in its own session (so it outlives the process that started it and a terminal's Ctrl-C does
not reach it), writes its output to ``$home/logs/llama-server-PORT.log`` and is recorded in
``$home/run/llama-server-PORT.pid``: the same files ``shared/llm/up.sh`` and ``down.sh`` use, so servers
started by either are seen and stopped by both. A server started here also gets ``llama-server-PORT.json``,
saying who started it and when it stops by itself: a reaper process (see ``reaper.py``), recorded in
``reaper-PORT.pid``, stops it after that many seconds without a request, and when the process that asked
for it exits (``start(stop_with=PID)``: a test run's servers stop with the run, even when it is killed).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import InvalidInput
from ._process import (
    KILL_WAIT,
    cmdline,
    health,
    read_pid,
    serves_port,
    spawn,
    terminate,
    wait_healthy,
    write_pid,
)
from .build import ensure_binary, ensure_xllamacpp, xllamacpp_python
from .config import (
    CLI_STARTED_BY,
    HOST,
    Cache,
    Engine,
    LocalServerConfig,
    LocalServerError,
    Progress,
    default_home,
    no_progress,
)
from .engine import with_engine
from .keys import new_key, read_key, write_key
from .models import MODELS, TEMPLATE_FILES, ensure_model, model_path

__all__ = [
    "LocalServer",
    "engine_of",
    "health",
    "matches",
    "port_in_use",
    "ports_to_stop",
    "running_server",
    "server_command",
    "start",
    "start_reaper",
    "status",
    "stop",
    "wait_healthy",
]


@dataclass(frozen=True)
class LocalServer:
    """A running local server; as a context manager it stops the server on exit.

    Attributes:
        port: the loopback port it listens on.
        pid: its process id, as recorded in the pid file.
        base_url: the OpenAI-compatible base URL, ``http://127.0.0.1:PORT/v1``.
        log_path: its stdout and stderr.
        model: the model alias it serves (what ``/v1/models`` and every response's ``model`` say).
        home: the cache directory its pid file lives in.
        startup_seconds: spawn to the first ``/health`` 200, when this process started it.
        started_by: who started it (``"steadyloop-cli"``, ``"steadyloop.local"``); ``None`` for a server
            started elsewhere, such as by ``up.sh``.
        idle_stop: the seconds without a request after which its reaper stops it; ``None`` when it has none.
        reaper_pid: the process that watches it for idleness or its owner's exit, while one runs.
        owner: the process it stops with (see :func:`start`'s ``stop_with``); ``None`` when it has none.
        engine: ``"llama-server"`` (native) or ``"xllamacpp"`` (prebuilt); ``None`` when its command line
            cannot be read.
        api_key: the key its requests must carry (``Authorization: Bearer KEY``); ``None`` when it asks for
            none (see ``LocalServerConfig.require_key``). Never shown in its ``repr``.
    """

    port: int
    pid: int
    base_url: str
    log_path: Path
    model: str
    home: Path
    startup_seconds: float | None = None
    started_by: str | None = None
    idle_stop: float | None = None
    reaper_pid: int | None = None
    owner: int | None = None
    engine: Engine | None = None
    api_key: str | None = field(default=None, repr=False)

    def stop(self) -> bool:
        """Stop this server; see :func:`stop`."""
        return stop(self.port, home=self.home)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------- commands


def _package_file(cache: Cache, *parts: str) -> Path:
    resource = resources.files(__package__ or "steadyloop.local")
    for part in parts:
        resource = resource / part
    if isinstance(resource, Path):
        return resource
    # Installed zipped: the server process needs a real file, so keep a copy in the cache.
    copy = cache.home / "share" / parts[-1]
    data = resource.read_bytes()
    if not copy.is_file() or copy.read_bytes() != data:
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(data)
    return copy


def server_command(cfg: LocalServerConfig, port: int) -> list[str]:
    """The command line that serves ``cfg`` on ``port``, on the engine it runs now; it installs nothing.

    The order of llama-server's arguments is up.sh's, so a server it started with the same settings is
    recognised by :func:`running_server`.
    """
    cfg = with_engine(cfg)
    cache = Cache(cfg.home)
    spec = MODELS[cfg.model]
    template_name = cfg.resolved_template
    if template_name not in spec.templates:
        raise InvalidInput(f"model {cfg.model!r} supports templates {spec.templates}, not {template_name!r}")
    template = TEMPLATE_FILES[template_name]
    template_file = str(_package_file(cache, "templates", template)) if template else None
    model = str(model_path(cfg.home, spec))
    # The key goes as a file: a command line is readable by every user of the machine.
    key_file = ("--api-key-file", str(cache.key_file(port))) if cfg.require_key else ()
    if cfg.engine == "llama-server":
        return [
            *(str(cache.binary), "-m", model, "--alias", spec.alias, "--host", HOST, "--port", str(port)),
            *("-c", str(cfg.ctx), "-t", str(cfg.threads), "--no-webui"),
            *(("--chat-template-file", template_file) if template_file else ()),
            *key_file,
            *cfg.extra_args,
        ]
    python = xllamacpp_python(cfg.home)
    return [
        *(str(python), str(_package_file(cache, "_xllamacpp_main.py")), "--model", model),
        *("--alias", spec.alias, "--port", str(port), "--ctx", str(cfg.ctx), "--threads", str(cfg.threads)),
        *(("--chat-template-file", template_file) if template_file else ()),
        *key_file,
    ]


def _same_command(a: Sequence[str], b: Sequence[str]) -> bool:
    # Template files are compared by content: up.sh passes its own copy of the same template.
    if len(a) == len(b) + 1:
        a = a[1:]  # a script's interpreter comes first in /proc/PID/cmdline
    if len(a) != len(b):
        return False
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x == y:
            continue
        if i == 0 or a[i - 1] != "--chat-template-file":
            return False
        try:
            if Path(x).read_bytes() != Path(y).read_bytes():
                return False
        except OSError:
            return False
    return True


# -------------------------------------------------------------------------------------------------- ports


def port_in_use(port: int) -> bool:
    """Whether something already holds loopback ``port`` (a listener, or any socket bound to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR, as servers set it, so a recently closed connection in TIME_WAIT does not count.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _check_port(port: int, cache: Cache) -> None:
    if not 0 < port < 65536:
        raise InvalidInput(f"port must be between 1 and 65535, not {port}")
    pid = read_pid(cache.pid_file(port))
    if pid is not None and serves_port(pid, port):
        raise LocalServerError(
            f"a local server (pid {pid}) already runs on {HOST}:{port}; stop it with "
            f"`python -m steadyloop.local down --port {port}`, or pick another port"
        )
    if port_in_use(port):
        raise LocalServerError(
            f"{HOST}:{port} is already in use by another process; pick another port, or give none to get a "
            "free one"
        )


# ------------------------------------------------------------------------------------ sidecar and reaper


def _write_sidecar(path: Path, started_by: str | None, idle: float | None, owner: int | None = None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"started_by": started_by, "idle": idle, "owner": owner}) + "\n")
    os.replace(tmp, path)


def _read_sidecar(path: Path) -> tuple[str | None, float | None, int | None]:
    """``(started_by, idle, owner)`` from a sidecar; all ``None`` when there is none or it is unreadable."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    started_by, idle, owner = data.get("started_by"), data.get("idle"), data.get("owner")
    return (
        started_by if isinstance(started_by, str) else None,
        float(idle) if isinstance(idle, int | float) and idle > 0 else None,
        owner if isinstance(owner, int) and not isinstance(owner, bool) and owner > 0 else None,
    )


def _reaper_pid(cache: Cache, port: int) -> int | None:
    """The running reaper of ``port``; a stale reaper pid file is removed."""
    pid_file = cache.reaper_pid_file(port)
    pid = read_pid(pid_file)
    if pid is None:
        return None
    # serves_port also guards against a reused PID: the reaper's own command line carries --port PORT.
    argv = cmdline(pid)
    if serves_port(pid, port) and (argv is None or "reap" in argv):
        return pid
    pid_file.unlink(missing_ok=True)
    return None


def start_reaper(port: int, idle: float, home: Path | None = None, *, owner: int | None = None) -> int | None:
    """Have the server on ``port`` stopped after ``idle`` seconds without a request, or when ``owner`` exits.

    The reaper is ``python -m steadyloop.local reap``, in a session of its own like the server, so it
    outlives the caller. It polls the server every few seconds (see ``reaper.py``), stops it with
    :func:`stop`, and exits as soon as the server is gone however it went. A reaper already watching
    ``port`` is replaced, so calling this again changes the idle time (the owner is kept unless another is
    given); ``idle <= 0`` with no owner only removes it.

    Returns:
        The reaper's PID, or ``None`` when there is nothing to watch for.

    Raises:
        LocalServerError: no server recorded in ``home`` runs on ``port``.
    """
    cache = Cache(home or default_home())
    pid = read_pid(cache.pid_file(port))
    if pid is None or not serves_port(pid, port):
        raise LocalServerError(f"no local server of {cache.home} runs on port {port}")
    old = _reaper_pid(cache, port)
    if old is not None:
        terminate(old, grace=2.0)
    cache.reaper_pid_file(port).unlink(missing_ok=True)
    started_by, _, kept_owner = _read_sidecar(cache.sidecar(port))
    owner = owner if owner is not None else kept_owner
    _write_sidecar(cache.sidecar(port), started_by, idle if idle > 0 else None, owner)
    if idle <= 0 and owner is None:
        return None
    argv = [
        sys.executable,
        "-m",
        "steadyloop.local",
        "reap",
        "--port",
        str(port),
        "--idle",
        repr(float(max(idle, 0.0))),
        *(("--owner", str(owner)) if owner is not None else ()),
    ]
    reaper = spawn([*argv, "--home", str(cache.home)], cache.reaper_log(port))
    write_pid(cache.reaper_pid_file(port), reaper)
    return reaper


# ---------------------------------------------------------------------------------------------------- API


def start(
    cfg: LocalServerConfig | None = None,
    port: int | None = None,
    *,
    wait: float = 180.0,
    progress: Progress = no_progress,
    idle_stop: float | None = None,
    started_by: str = "steadyloop.local",
    stop_with: int | None = None,
) -> LocalServer:
    """Install what ``cfg`` needs (once; cached after) and start a server on loopback.

    Args:
        cfg: what to run; ``LocalServerConfig()`` by default.
        port: the port to listen on; ``None`` picks a free one.
        wait: seconds to wait for the model to load.
        progress: told about downloads, build steps and startup (see :data:`Progress`).
        idle_stop: stop the server after this many seconds without a request (see :func:`start_reaper`);
            ``None`` or ``0`` keeps it running until :func:`stop`.
        started_by: recorded next to its pid file; ``down`` without arguments stops only servers started by
            :data:`~steadyloop.local.config.CLI_STARTED_BY`.
        stop_with: a process the server must not outlive (``os.getpid()`` for the caller): its reaper stops
            the server when that process exits, however it exits, SIGKILL included.

    Returns:
        The running server. It keeps running after this process exits, until :func:`stop`, its idle stop,
        or the exit of ``stop_with``.

    Raises:
        LocalServerError: the port is taken, installing failed, or the server did not become healthy.
    """
    cfg = with_engine(cfg or LocalServerConfig())
    cache = Cache(cfg.home)
    cache.make_dirs()
    if port is not None:
        _check_port(port, cache)  # before an install that may take minutes
    if cfg.engine == "llama-server":
        ensure_binary(cfg, progress)
    else:
        ensure_xllamacpp(cfg, progress)
    ensure_model(cfg, progress)
    # A free port can be taken by someone else before the server binds it; then try another.
    for attempt in range(1 if port is not None else 3):
        chosen = port if port is not None else _free_port()
        _check_port(chosen, cache)
        try:
            return _launch(cfg, cache, chosen, wait, progress, idle_stop, started_by, stop_with)
        except LocalServerError as e:
            if port is not None or attempt == 2 or "couldn't bind" not in e.log_tail:
                raise
    raise AssertionError("unreachable")


def _launch(
    cfg: LocalServerConfig,
    cache: Cache,
    port: int,
    wait: float,
    progress: Progress,
    idle_stop: float | None,
    started_by: str,
    stop_with: int | None = None,
) -> LocalServer:
    argv = server_command(cfg, port)
    log_path = cache.log_file(port)
    pid_file = cache.pid_file(port)
    key_file = cache.key_file(port)
    key = new_key() if cfg.require_key else None
    if key is not None:
        write_key(key_file, key)
    else:
        key_file.unlink(missing_ok=True)
    t0 = time.monotonic()
    try:
        pid = spawn(argv, log_path)
    except BaseException:
        key_file.unlink(missing_ok=True)
        raise
    write_pid(pid_file, pid)
    _write_sidecar(cache.sidecar(port), started_by, None, stop_with)
    progress(f"start {cfg.engine} on {HOST}:{port} (pid {pid}, log {log_path})", None, None)
    try:
        wait_healthy(port, pid, timeout=wait, log_path=log_path, progress=progress)
        # Armed only once healthy: loading the model is not idleness, and a failed start needs no reaper.
        watch = bool(idle_stop) or stop_with is not None
        reaper = start_reaper(port, idle_stop or 0.0, cache.home, owner=stop_with) if watch else None
    except BaseException:  # includes Ctrl-C: never leave a half-started server behind
        terminate(pid, grace=2.0)
        pid_file.unlink(missing_ok=True)
        cache.sidecar(port).unlink(missing_ok=True)
        key_file.unlink(missing_ok=True)
        raise
    elapsed = time.monotonic() - t0
    progress(f"ready in {elapsed:.2f} s", None, None)
    return LocalServer(
        port=port,
        pid=pid,
        base_url=f"http://{HOST}:{port}/v1",
        log_path=log_path,
        model=MODELS[cfg.model].alias,
        home=cfg.home,
        startup_seconds=elapsed,
        started_by=started_by,
        idle_stop=idle_stop if reaper is not None and idle_stop else None,
        reaper_pid=reaper,
        owner=stop_with,
        engine=engine_of(argv),
        api_key=key,
    )


def engine_of(argv: Sequence[str] | None) -> Engine | None:
    """Which engine a server's command line runs: the prebuilt one is a Python script of ours."""
    if not argv:
        return None
    # The script's path is the interpreter's first argument, or its second when the interpreter is itself a
    # script whose own interpreter the kernel put first.
    return "xllamacpp" if any(Path(a).name == "_xllamacpp_main.py" for a in argv[:3]) else "llama-server"


def stop(port: int, home: Path | None = None, *, grace: float = 5.0) -> bool:
    """Stop the server recorded for ``port``: SIGTERM, up to ``grace`` seconds, then SIGKILL.

    Returns once the process is gone. The pid file and sidecar are then removed; the server's reaper sees it
    go and exits by itself. A recorded PID that no longer serves that port (the server died and the PID was
    reused) is not signalled, and its records are removed.

    Returns:
        Whether a running server was stopped.

    Raises:
        LocalServerError: the process was still there a minute after SIGKILL (its records are kept).
    """
    cache = Cache(home or default_home())
    pid_file = cache.pid_file(port)
    pid = read_pid(pid_file)
    stopped = False
    if pid is not None and serves_port(pid, port):
        gone = terminate(pid, grace)
        stopped = True
        if not gone:  # records kept: they are how a later stop or status finds the process
            raise LocalServerError(
                f"the local server on port {port} (pid {pid}) was sent SIGKILL but had not exited "
                f"{KILL_WAIT:.0f} s later; it may be stuck in the kernel (see /proc/{pid}/status)"
            )
    pid_file.unlink(missing_ok=True)
    cache.sidecar(port).unlink(missing_ok=True)
    cache.key_file(port).unlink(missing_ok=True)
    return stopped


def status(home: Path | None = None) -> list[LocalServer]:
    """The servers running from ``home``'s pid files, by port, with their reapers; stale files are removed."""
    cache = Cache(home or default_home())
    found: list[LocalServer] = []
    for pid_file in sorted(cache.run.glob("llama-server-*.pid")):
        try:
            port = int(pid_file.stem.removeprefix("llama-server-"))
        except ValueError:
            continue
        pid = read_pid(pid_file)
        if pid is None or not serves_port(pid, port):
            pid_file.unlink(missing_ok=True)
            cache.sidecar(port).unlink(missing_ok=True)
            cache.key_file(port).unlink(missing_ok=True)
            continue
        argv = cmdline(pid) or []
        alias = next((b for a, b in itertools.pairwise(argv) if a == "--alias"), "")
        started_by, idle, owner = _read_sidecar(cache.sidecar(port))
        reaper = _reaper_pid(cache, port)
        found.append(
            LocalServer(
                port,
                pid,
                f"http://{HOST}:{port}/v1",
                cache.log_file(port),
                alias,
                cache.home,
                started_by=started_by,
                idle_stop=idle if reaper is not None else None,
                reaper_pid=reaper,
                owner=owner if reaper is not None else None,
                engine=engine_of(argv),
                # Only a server whose command line names its key file asks for one: a key file left by
                # an earlier server on the same port is not this one's.
                api_key=read_key(cache.key_file(port)) if "--api-key-file" in argv else None,
            )
        )
    return sorted(found, key=lambda s: s.port)


def ports_to_stop(
    running: Sequence[LocalServer], port: int | None = None, *, every: bool = False
) -> list[int]:
    """What ``down`` stops: ``port`` alone, every one of ``running``, or else those the CLI started.

    ``python -m steadyloop.local down`` and ``steadyloop local down`` both ask this, so they mean the same.
    """
    if port is not None:
        return [port]
    return [s.port for s in running if every or s.started_by == CLI_STARTED_BY]


def matches(server: LocalServer, cfg: LocalServerConfig) -> bool:
    """Whether ``server`` runs what ``cfg`` asks for (its command line is the one ``cfg`` gives)."""
    argv = cmdline(server.pid)
    return argv is not None and _same_command(argv, server_command(cfg, server.port))


@contextmanager
def running_server(
    cfg: LocalServerConfig | None = None,
    port: int | None = None,
    *,
    wait: float = 180.0,
    progress: Progress = no_progress,
) -> Iterator[LocalServer]:
    """A healthy server for ``cfg``: one already running with the same command line, or a new one.

    A server found running is left running on exit; one started here is stopped.

    Args:
        port: require this port; ``None`` accepts any running match, or starts on a free port.
    """
    cfg = cfg or LocalServerConfig()
    for server in status(cfg.home):
        if (port is None or server.port == port) and matches(server, cfg) and health(server.port) == 200:
            yield server
            return
    with start(cfg, port, wait=wait, progress=progress) as server:
        yield server
