"""Internal: the server process seen from outside: spawn it, watch it, probe its /health, stop it.

Servers are not our children for long (the CLI exits right after starting one), so everything here works
from a PID: ``/proc`` for liveness and command lines, pidfds to wake up the moment a process exits.
"""

from __future__ import annotations

import http.client
import itertools
import os
import re
import select
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from ._proc import tail
from .config import HOST, LocalServerError, Progress, no_progress

__all__ = [
    "alive",
    "child_environment",
    "cmdline",
    "exit_status",
    "exit_waiter",
    "health",
    "read_pid",
    "serves_port",
    "spawn",
    "terminate",
    "wait_healthy",
    "write_pid",
]

_POLL = 0.05  # seconds between /health probes; startup takes about 0.8 s with qwen

# What a server (or its reaper) is given of our environment. A child outlives us and serves anyone on the
# machine, so it gets what finds programs, libraries, locale and temporary files, and llama.cpp's and
# OpenMP's own settings; never the API keys of whoever started it.
_KEPT = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "DYLD_LIBRARY_PATH",
        "DYLD_FALLBACK_LIBRARY_PATH",
        "PYTHONPATH",  # the reaper is ``python -m steadyloop.local``, from a source tree too
        "XDG_CACHE_HOME",
        "STEADYLOOP_LLM_HOME",
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
    }
)
_KEPT_PREFIXES = ("LC_", "LLAMA_", "GGML_", "OMP_", "GOMP_", "KMP_")
# Even among those: a name that says it holds a credential (llama-server reads LLAMA_API_KEY and would then
# refuse the keyless requests we send it).
_CREDENTIAL = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a spawned server is given of ``environ`` (default: ours): see ``_KEPT``."""
    source = os.environ if environ is None else environ
    return {
        name: value
        for name, value in source.items()
        if (name in _KEPT or name.startswith(_KEPT_PREFIXES)) and not _CREDENTIAL.search(name)
    }


def spawn(argv: Sequence[str], log_path: Path) -> int:
    # posix_spawn rather than subprocess.Popen: the server must outlive any Popen object, and a Popen that is
    # garbage-collected while its child runs raises ResourceWarning (an error under our test settings).
    # setsid=True is Popen's start_new_session: the server gets its own session, immune to terminal signals.
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    try:
        return os.posix_spawn(argv[0], list(argv), child_environment(), file_actions=actions, setsid=True)
    except OSError as e:
        raise LocalServerError(f"cannot run {argv[0]}: {e}") from e


def exit_status(pid: int) -> str | None:
    """How ``pid`` ended (reaping it if it is our child), or ``None`` while it runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: someone else reaps it
        return None if alive(pid) else "exited"
    if done == 0:
        return None
    code = os.waitstatus_to_exitcode(status)
    return f"exit code {code}" if code >= 0 else f"killed by {signal.Signals(-code).name}"


def alive(pid: int) -> bool:
    with suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0); its parent just has not reaped it yet
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state not in ("Z", "X"):
        return True
    with suppress(ChildProcessError):  # it may have died since the first waitpid: reap it if it is ours
        os.waitpid(pid, os.WNOHANG)
    return False


_EXEC_WAIT = 1.0  # seconds a just-spawned process may read an empty command line before it is "unknown"


def cmdline(pid: int) -> list[str] | None:
    """``pid``'s arguments, or ``None`` when they cannot be known (no /proc, gone, a kernel thread)."""
    deadline = time.monotonic() + _EXEC_WAIT
    while True:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read()
        except OSError:
            return None
        if raw:
            return [arg.decode(errors="replace") for arg in raw.split(b"\0")[:-1]]
        # Read empty for a moment while a process just spawned is still inside exec (seen right after
        # posix_spawn returns). Answering "unknown" then would make a reused PID look like our server and
        # a new reaper look like a reused PID, so wait for exec to finish; only a kernel thread or a zombie
        # stays empty.
        if time.monotonic() >= deadline or not alive(pid):
            return None
        time.sleep(0.01)


def serves_port(pid: int, port: int) -> bool:
    # A PID from an old pid file may have been reused by an unrelated process: never signal one of those.
    if not alive(pid):
        return False
    argv = cmdline(pid)
    if argv is None:
        return True  # no /proc to ask; trust the pid file as down.sh does
    return any(a == "--port" and b == str(port) for a, b in itertools.pairwise(argv))


def _pause(pidfd: int | None, seconds: float) -> None:
    # Waiting on a pidfd wakes the moment the process exits, so a crash is seen at once.
    if pidfd is None:
        time.sleep(seconds)
    else:
        select.select([pidfd], [], [], seconds)


# How long a pause lasts when a watched process was gone before the watch began.
_GONE_PAUSE = 0.1


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


@contextmanager
def exit_waiter(*pids: int) -> Iterator[Callable[[float], None]]:
    """A ``pause(seconds)`` that returns early the moment any of ``pids`` exits (a plain sleep without pidfds).

    A process already gone (and reaped) when the waiter is made has exited: the pause is then brief, not
    a full sleep, since the exit it would wait for has happened. The caller's next look sees it gone.
    """
    pidfds: list[int] = []
    gone = unwatched = False
    for pid in pids:
        try:
            pidfds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            gone = True
        except (AttributeError, OSError):
            unwatched = True

    def pause(seconds: float) -> None:
        if gone:
            time.sleep(min(seconds, _GONE_PAUSE))  # bounded, so a caller that misses the exit cannot spin
        elif unwatched:
            time.sleep(seconds)  # one of them could not be watched: poll
        else:
            select.select(pidfds, [], [], seconds)

    try:
        yield pause
    finally:
        for fd in pidfds:
            os.close(fd)


# How long to wait for a process to be gone after SIGKILL. It cannot refuse the signal, but tearing down a
# server with gigabytes of model mapped took over 5 s on a loaded two-core machine, and a stop that returns
# while the process still holds its port and memory is not a stop.
KILL_WAIT = 60.0


def terminate(pid: int, grace: float, *, kill_wait: float = KILL_WAIT) -> bool:
    """SIGTERM, up to ``grace`` seconds to exit, then SIGKILL and up to ``kill_wait`` seconds for it to go.

    Returns:
        Whether the process is gone.
    """
    pidfd = _open_pidfd(pid)
    try:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive(pid):
            if time.monotonic() >= deadline:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + kill_wait
                while alive(pid):
                    if time.monotonic() >= deadline:
                        return False
                    _pause(pidfd, 0.1)
                return True
            _pause(pidfd, 0.1)
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def write_pid(pid_file: Path, pid: int) -> None:
    tmp = pid_file.with_name(pid_file.name + ".tmp")
    tmp.write_text(f"{pid}\n")
    os.replace(tmp, pid_file)


def health(port: int, timeout: float = 2.0) -> int | None:
    """The status of ``GET /health`` on loopback ``port``: 200 ready, 503 loading, ``None`` for no answer."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def wait_healthy(
    port: int, pid: int, *, timeout: float, log_path: Path, progress: Progress = no_progress
) -> None:
    """Wait until ``/health`` answers 200, while watching that process ``pid`` stays alive.

    The port refuses connections for about 15 ms after spawn, then answers 503 "Loading model" until the
    model is loaded.

    Raises:
        LocalServerError: the process exited (noticed within a poll interval) or ``timeout`` passed; the
            message carries the log's tail. The process is not stopped here.
    """
    deadline = time.monotonic() + timeout
    pidfd = _open_pidfd(pid)
    loading = False
    try:
        while True:
            ended = exit_status(pid)
            if ended is not None:
                text = tail(log_path, 20)
                raise LocalServerError(
                    f"the server on port {port} stopped during startup ({ended}); log {log_path}:\n{text}",
                    log_path=log_path,
                    log_tail=text,
                )
            status = health(port)
            if status == 200:
                return
            if status is not None and not loading:
                loading = True
                progress("loading model", None, None)
            if time.monotonic() >= deadline:
                text = tail(log_path, 20)
                raise LocalServerError(
                    f"the server on port {port} was not healthy after {timeout:.0f} s (last /health: "
                    f"{status}); allow more time if this machine is slow. Log {log_path}:\n{text}",
                    log_path=log_path,
                    log_tail=text,
                )
            _pause(pidfd, _POLL)
    finally:
        if pidfd is not None:
            os.close(pidfd)
