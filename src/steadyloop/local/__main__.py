"""``python -m steadyloop.local up|down|status|build``: manage local servers from a shell.

``up`` prints only the base URL on stdout (``BASE=$(python -m steadyloop.local up)``); progress and errors go
to stderr. Errors are one line plus the log tail that explains them, and exit code 1. ``up --idle SECONDS``
has the server stopped after that long without a request; ``down`` alone stops the servers the
``steadyloop`` command started, ``--port`` one, ``--all`` every one. ``build`` compiles the native
``llama-server`` for this CPU (optional: the prebuilt engine serves until it exists) and prints its path.
``reap`` is that idle stop's own process, started by ``up`` and never by hand.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO, cast, get_args

from ..errors import SteadyloopError
from .build import BUILT_NOTE, ensure_binary
from .config import (
    DEFAULT_MODEL,
    MODEL_ENV,
    Cache,
    EngineChoice,
    LocalServerConfig,
    ModelName,
    TemplateName,
    default_home,
)
from .heartbeat import Heartbeat
from .keys import key_note
from .reaper import watch
from .server import LocalServer, ports_to_stop, start, status, stop

__all__ = ["main"]


class _StderrProgress:
    """Prints progress lines, at most about one a second per event, so a 208-step build stays readable."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last_event = ""
        self._last_time = 0.0

    def __call__(self, event: str, done: int | None, total: int | None) -> None:
        now = time.monotonic()
        finished = done is not None and total is not None and done >= total
        if event == self._last_event and not finished and now - self._last_time < 1.0:
            return
        self._last_event, self._last_time = event, now
        line = event
        if done is not None and event.startswith(("download", "assemble")):
            line += f": {done / 1e6:.1f}" + (f" / {total / 1e6:.1f} MB" if total else " MB")
        elif done is not None and total is not None:
            line += f": {done}/{total}"
        print(f"[steadyloop.local] {line}", file=self._stream, flush=True)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--home",
        type=Path,
        default=None,
        help="cache directory (default: $STEADYLOOP_LLM_HOME or ~/.cache/agent-llm-server)",
    )
    ap = argparse.ArgumentParser(prog="python -m steadyloop.local", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", parents=[common], help="install if needed, start a server, print its base URL")
    up.add_argument("--port", type=int, default=None, help="loopback port (default: a free one)")
    up.add_argument(
        "--engine",
        choices=get_args(EngineChoice),
        default="auto",
        help="auto (default): the native llama-server once `build` made one, else the prebuilt xllamacpp",
    )
    up.add_argument(
        "--model",
        choices=get_args(ModelName),
        default=None,
        help=f"the model (default: ${MODEL_ENV}, else {DEFAULT_MODEL})",
    )
    up.add_argument(
        "--template",
        choices=["jsonblock", "think", "stock"],
        default=None,
        help="chat template (default: the model's: jsonblock for the qwen models, stock for smollm)",
    )
    up.add_argument("--ctx", type=int, default=4096, help="context size in tokens (default: %(default)s)")
    up.add_argument("--threads", type=int, default=None, help="CPU threads (default: every core)")
    up.add_argument("--wait", type=float, default=180.0, help="seconds to wait for the model to load")
    up.add_argument(
        "--extra-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more llama-server argument (repeatable), e.g. --extra-arg=--metrics",
    )
    up.add_argument(
        "--no-key",
        action="store_true",
        help="serve requests without a key: anyone who reaches the port (other users, web pages) can use it",
    )
    up.add_argument(
        "--idle",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop the server after this long without a request (default: run until down)",
    )

    down = sub.add_parser(
        "down", parents=[common], help="stop the servers the steadyloop command started, or --port/--all"
    )
    which = down.add_mutually_exclusive_group()
    which.add_argument("--port", type=int, help="stop the server on this port")
    which.add_argument("--all", action="store_true", help="stop every server, whoever started it")

    sub.add_parser("status", parents=[common], help="list running servers")
    sub.add_parser(
        "build",
        parents=[common],
        help="build the native llama-server for this CPU (about 6 min on 2 cores, once); print its path",
    )

    reap = sub.add_parser(
        "reap", parents=[common], help="internal: stop the server on PORT when idle or when --owner exits"
    )
    reap.add_argument("--port", type=int, required=True)
    reap.add_argument("--idle", type=float, required=True, metavar="SECONDS")
    reap.add_argument("--owner", type=int, default=None, metavar="PID")
    return ap


def _up(args: argparse.Namespace, home: Path) -> int:
    extra: dict[str, Any] = {"threads": args.threads} if args.threads else {}
    if args.model is not None:
        extra["model"] = cast(ModelName, args.model)
    cfg = LocalServerConfig(
        home=home,
        engine=cast(EngineChoice, args.engine),
        template=cast(TemplateName | None, args.template),
        ctx=args.ctx,
        extra_args=tuple(args.extra_arg),
        require_key=not args.no_key,
        **extra,
    )
    with Heartbeat(_StderrProgress(sys.stderr)) as progress:
        server = start(cfg, args.port, wait=args.wait, progress=progress, idle_stop=args.idle)
    print(server.base_url, flush=True)
    if server.api_key is not None:
        print(
            f"[steadyloop.local] {key_note(Cache(home).key_file(server.port))}", file=sys.stderr, flush=True
        )
    return 0


def _build(home: Path) -> int:
    with Heartbeat(_StderrProgress(sys.stderr)) as progress:
        binary = ensure_binary(LocalServerConfig(home=home, engine="llama-server"), progress)
    print(binary, flush=True)
    print(f"[steadyloop.local] {BUILT_NOTE}", file=sys.stderr, flush=True)
    return 0


def _down(args: argparse.Namespace, home: Path) -> int:
    running = status(home)
    ports = ports_to_stop(running, args.port, every=args.all)
    for port in ports:
        what = "stopped" if stop(port, home=home) else "nothing running on"
        print(f"[steadyloop.local] {what} port {port}", file=sys.stderr)
    if not ports:
        left = f"; {len(running)} other server(s) left running, --all stops them" if running else ""
        print(f"[steadyloop.local] no server started by the steadyloop command{left}", file=sys.stderr)
    return 0


def _idle_text(server: LocalServer) -> str:
    stops = [f"after {server.idle_stop:g} s idle"] if server.idle_stop is not None else []
    stops += [f"when pid {server.owner} exits"] if server.owner is not None else []
    if server.reaper_pid is None or not stops:
        return "runs until down"
    return f"stops {' or '.join(stops)} (reaper pid {server.reaper_pid})"


def _status(home: Path) -> int:
    for s in status(home):
        by = s.started_by or "-"
        print(
            f"{s.port}\tpid {s.pid}\t{s.model}\t{s.engine or '-'}\t{s.base_url}\t{s.log_path}\t{by}"
            f"\t{_idle_text(s)}"
        )
    return 0


def _reap(args: argparse.Namespace, home: Path) -> int:
    # SIGTERM (a newer reaper replacing this one) becomes SystemExit, so watch() removes its pid file.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    watch(args.port, args.idle, home, owner=args.owner)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    home: Path = args.home or default_home()
    try:
        if args.command == "up":
            return _up(args, home)
        if args.command == "down":
            return _down(args, home)
        if args.command == "reap":
            return _reap(args, home)
        if args.command == "build":
            return _build(home)
        return _status(home)
    except SteadyloopError as e:
        print(f"[steadyloop.local] error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("[steadyloop.local] interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
