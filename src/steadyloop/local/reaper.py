"""Stopping a local server nobody uses: the decision, sans I/O, and the loop of the ``reap`` process.

Every few seconds the reaper takes a :class:`Sample` of three cheap signs of use, and stops the server once
none of them has moved for the idle time:

- ``GET /slots``: a slot's task id and counters change with every request, and ``is_processing`` stays true
  while one runs, however long. llama-server answers it without writing to its log, so polling it is not
  itself seen as use;
- the mtime of the server's log, which gets lines for every request: the sign left when ``/slots`` does not
  answer (``--no-slots``, another engine, a server too busy to reply in time);
- the mtime of the server's sidecar, which the ``steadyloop`` command touches when it reuses a running
  server, so that a server is not stopped between being chosen and being asked.

:func:`observe` and :func:`should_stop` hold the whole decision and do no I/O; :func:`watch` is the loop.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from ._process import alive, exit_waiter, read_pid, serves_port
from .config import HOST, Cache
from .keys import read_key
from .server import stop

__all__ = ["IdleState", "Sample", "observe", "poll_interval", "probe", "should_stop", "slots_sign", "watch"]

_OWNER_POLL = 5.0  # seconds between looks when only an owner is watched (its exit wakes the watch at once)

Sign = Hashable | None
"""A value that changes when the server is used; ``None`` when it could not be read this time."""


@dataclass(frozen=True)
class Sample:
    """One look at a server.

    Attributes:
        at: when, in monotonic seconds.
        busy: a request was being processed.
        signs: one value per sign of use, always in the same order (see the module docstring).
    """

    at: float
    busy: bool = False
    signs: tuple[Sign, ...] = ()


@dataclass(frozen=True)
class IdleState:
    """What the reaper remembers between samples.

    Attributes:
        last_active: when use was last seen, in monotonic seconds.
        signs: the last value read of each sign; ``None`` for one never read.
    """

    last_active: float
    signs: tuple[Sign, ...]


def observe(state: IdleState | None, sample: Sample) -> IdleState:
    """Fold one sample into the state: use is a busy server or a sign whose value moved.

    A sign that could not be read is no evidence either way: its last known value is kept, and compared with
    the next value read, so use in between is still seen.

    Raises:
        ValueError: the sample has a different number of signs than the ones before.
    """
    if state is None:
        # The first look only sets the baseline: the server was just started or just armed, which is use.
        return IdleState(sample.at, sample.signs)
    if len(sample.signs) != len(state.signs):
        raise ValueError(f"a sample has {len(sample.signs)} signs, the ones before had {len(state.signs)}")
    pairs = list(zip(state.signs, sample.signs, strict=True))
    moved = any(old is not None and new is not None and old != new for old, new in pairs)
    known = tuple(old if new is None else new for old, new in pairs)
    active = sample.busy or moved
    return IdleState(max(state.last_active, sample.at) if active else state.last_active, known)


def should_stop(state: IdleState, now: float, idle: float) -> bool:
    """Whether ``idle`` seconds have passed without use; ``idle <= 0`` never stops."""
    return idle > 0 and now - state.last_active >= idle


def poll_interval(idle: float) -> float:
    """Seconds between samples: a stop comes at most about a quarter of ``idle`` late, and never polls faster
    than twice a second or slower than every five seconds."""
    return min(5.0, max(0.5, idle / 4))


def slots_sign(body: bytes) -> tuple[bool, Sign]:
    """``(busy, sign)`` from the body of llama-server's ``GET /slots``; ``(False, None)`` if it is not one.

    The sign is each slot's id, task id and token counters: a new request gets a new task id even when it
    lands on the same slot with the same prompt.
    """
    try:
        slots = json.loads(body)
    except ValueError:
        return False, None
    if not isinstance(slots, list) or not all(isinstance(slot, dict) for slot in slots):
        return False, None
    busy = any(slot.get("is_processing") is True for slot in slots)
    sign = tuple(
        json.dumps(
            [slot.get(key) for key in ("id", "id_task", "n_prompt_tokens_processed", "next_token")],
            sort_keys=True,
        )
        for slot in slots
    )
    return busy, sign


# ---------------------------------------------------------------------------------------------------- I/O


def _get_slots(port: int, timeout: float, key: str | None = None) -> bytes | None:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", "/slots", headers={"Authorization": f"Bearer {key}"} if key else {})
        response = conn.getresponse()
        body = response.read()
        return body if response.status == 200 else None
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _mtime(path: Path) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def probe(port: int, cache: Cache, now: float) -> Sample:
    """Look at the server on ``port`` once: ``/slots``, then its log's and sidecar's mtimes."""
    body = _get_slots(port, timeout=2.0, key=read_key(cache.key_file(port)))
    busy, slots = slots_sign(body) if body is not None else (False, None)
    return Sample(now, busy, (slots, _mtime(cache.log_file(port)), _mtime(cache.sidecar(port))))


def _say(text: str) -> None:
    # The reaper's stdout is its log file (logs/reaper-PORT.log).
    print(f"[steadyloop.local reap] {text}", file=sys.stdout, flush=True)


def watch(
    port: int,
    idle: float,
    home: Path,
    *,
    owner: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """Stop the server on ``port`` after ``idle`` seconds without use, or when ``owner`` exits.

    The server is the one ``home``'s pid file names when this starts: if that file comes to name another
    process, or the server exits however it does, the watch ends without stopping anything. ``idle <= 0``
    never stops it for idleness; ``owner`` is a process the server must not outlive (a test run, however it
    ends, even killed).

    Returns:
        Why it ended: ``"stopped"`` (idle, so this stopped it), ``"owner gone"`` (so this stopped it) or
        ``"gone"``.
    """
    cache = Cache(home)
    pid_file = cache.pid_file(port)
    pid = read_pid(pid_file)
    own_pid_file = cache.reaper_pid_file(port)
    try:
        if pid is None or not serves_port(pid, port):
            _say(f"no server on port {port}")
            return "gone"
        reasons = [f"after {idle:g} s without a request"] if idle > 0 else []
        reasons += [f"when pid {owner} exits"] if owner is not None else []
        _say(f"watching port {port} (pid {pid}): stop it {' or '.join(reasons) or 'never'}")
        state: IdleState | None = None
        watched = (pid,) if owner is None else (pid, owner)
        with exit_waiter(*watched) as pause:
            while read_pid(pid_file) == pid and serves_port(pid, port):
                if owner is not None and not alive(owner):
                    _say(f"pid {owner} exited: stopping port {port}")
                    stop(port, home)
                    return "owner gone"
                if idle > 0:
                    state = observe(state, probe(port, cache, clock()))
                    if should_stop(state, clock(), idle):
                        _say(f"no request for {clock() - state.last_active:.0f} s: stopping port {port}")
                        stop(port, home)
                        return "stopped"
                pause(poll_interval(idle) if idle > 0 else _OWNER_POLL)  # wakes at once if either exits
        _say(f"the server on port {port} is gone")
        return "gone"
    finally:
        # Only our own record: a newer reaper may already have replaced it.
        if read_pid(own_pid_file) == os.getpid():
            own_pid_file.unlink(missing_ok=True)
