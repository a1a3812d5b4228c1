"""The in-process event bus: each run's events in order, for whoever watches while it happens (public).

``emit`` stamps an event with its run and ``seq``, a per-run counter from 1 that clients order and
de-duplicate on, keeps it in the run's history and hands it to every watcher. ``watch`` replays that history,
then follows the run live until it is done: an ``AgentEnd`` was emitted or ``end_run`` was called.

A watcher that stops keeping up is capped rather than left to grow. Its backlog keeps the most recent
``max_events``; it may run over by the slack before it is cut back, so trimming is paid per batch rather than
per event. The oldest events go, released where they are dropped, and the gap is reported once: a single
``Notice(name="gap")`` yielded just before the event that follows the gap. Its ``seq`` and ``after_seq`` are
both that event's seq less one, which is the number of the last dropped event: no event this watcher yields
carries it, so a client de-duplicating on seq keeps the notice and the event both.

There is one bus per process. A run is kept after it ends so a late watcher can still replay it; ``sweep``
reaps ended runs after ``retain_ended_s`` and abandoned ones (no event for ``retain_unended_s``), never one a
watcher is on. ``emit`` and ``watch`` run it themselves at most every few seconds, so no background task is
needed. The bus belongs to the event loop's thread: emit from it, never from a worker thread. ``blocks_of`` turns
a token stream into blocks for display.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeAlias

from .events import (
    AgentEnd,
    Event,
    MessageUpdate,
    Notice,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from .messages import text_of

__all__ = [
    "Block",
    "BlockKind",
    "EventSettings",
    "Watcher",
    "blocks_of",
    "configure_events",
    "emit",
    "end_run",
    "history",
    "reset_events",
    "sweep",
    "watch",
    "watcher_count",
]


@dataclass(frozen=True, slots=True)
class EventSettings:
    """The bus's settings in force.

    Attributes:
        max_events: events a watcher's backlog keeps when it falls behind.
        slack: how far over ``max_events`` a backlog may run before it is cut back, as a fraction of it.
        retain_ended_s: seconds an ended run is kept for late watchers before the sweep reaps it.
        retain_unended_s: seconds without an event after which a run that never ended counts as abandoned.
    """

    max_events: int = 1000
    slack: float = 0.1
    retain_ended_s: float = 300.0
    # Long enough for a tool call that takes an hour; a host whose calls take minutes lowers it.
    retain_unended_s: float = 7200.0


_DEFAULTS = EventSettings()
_SWEEP_EVERY_S = 5.0


def _high_water(settings: EventSettings) -> int:
    return settings.max_events + max(1, math.ceil(settings.max_events * settings.slack))


_settings = _DEFAULTS
_limit = _high_water(_DEFAULTS)
# Monotonic so a wall-clock jump neither reaps live runs nor keeps dead ones; tests replace it.
_clock = time.monotonic
_last_sweep = -math.inf


class _Listener:
    """What the bus holds for one watcher; the watcher itself is held only by its consumer."""

    __slots__ = ("dropped", "queue", "wake")

    def __init__(self) -> None:
        self.queue: deque[Event] = deque()
        self.dropped = 0
        self.wake = asyncio.Event()


class _Run:
    __slots__ = ("done", "ended_at", "events", "last_active", "listeners")

    def __init__(self, now: float) -> None:
        self.events: list[Event] = []
        self.listeners: set[_Listener] = set()
        self.done = False
        self.ended_at = now
        self.last_active = now

    def finish(self, now: float) -> None:
        if not self.done:
            self.done = True
            self.ended_at = now
        for listener in self.listeners:
            listener.wake.set()


_runs: dict[str, _Run] = {}


def _open(run_id: str, now: float) -> _Run:
    if now - _last_sweep >= _SWEEP_EVERY_S:
        sweep()
    run = _runs.get(run_id)
    if run is None:
        run = _runs[run_id] = _Run(now)
    return run


def emit(run_id: str, event: Event) -> Event:
    """Stamp an event with its run and next seq, keep it in the run's history and hand it to every watcher.

    An ``AgentEnd`` marks the run done. An event emitted after that is stamped and kept in the history, so
    nothing is lost, but no watcher sees it: they have all finished.

    Returns:
        The stamped event.
    """
    now = _clock()
    run = _open(run_id, now)
    # The history is never trimmed while the run is kept, so its length is the last seq handed out.
    stamped: Event = replace(event, seq=len(run.events) + 1, run_id=run_id)
    run.events.append(stamped)
    run.last_active = now
    if run.done:
        return stamped
    cap, limit = _settings.max_events, _limit
    for listener in run.listeners:
        queue = listener.queue
        queue.append(stamped)
        if len(queue) > limit:
            dropped = len(queue) - cap
            for _ in range(dropped):
                queue.popleft()
            listener.dropped += dropped
        listener.wake.set()
    if isinstance(stamped, AgentEnd):
        run.finish(now)
    return stamped


def watch(run_id: str, cancel: asyncio.Event | None = None) -> Watcher:
    """Follow a run: what it has emitted so far, then what follows, until it is done.

    A watcher may start before the run's first event. It finishes after yielding the run's ``AgentEnd``, or
    once ``end_run`` was called and its backlog is empty. Pass ``cancel`` for anything that can go away
    before the run ends (a disconnected client): setting it ends the iteration promptly, also while the
    watcher is waiting for the next event.

    Args:
        run_id: the run to follow.
        cancel: set to leave early.
    """
    return Watcher(run_id, _open(run_id, _clock()), cancel)


class Watcher:
    """An async iterator over one run's events, from ``watch``.

    Leaving the ``async for`` early releases it at once (when the iterator is dropped), and so do
    ``aclose()`` and the ``cancel`` event, even while another task is waiting on it for the next event.
    Cancelling a task that waits on it does not end it: ``asyncio.wait_for`` around each step, for a
    keep-alive, loses nothing.
    """

    __slots__ = (
        "_cancel",
        "_end",
        "_finished",
        "_held",
        "_history",
        "_listener",
        "_next",
        "_relay",
        "_run",
        "_run_id",
    )

    def __init__(self, run_id: str, run: _Run, cancel: asyncio.Event | None) -> None:
        self._run_id = run_id
        self._run = run
        # The replay reads the history in place; the backlog holds only what arrives after this point.
        self._history = run.events
        self._end = len(run.events)
        self._next = 0
        self._held: Event | None = None
        self._cancel = cancel
        self._relay: asyncio.Task[None] | None = None
        self._finished = False
        self._listener: _Listener | None = None
        if not run.done:
            self._listener = _Listener()
            run.listeners.add(self._listener)

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._finished or (self._cancel is not None and self._cancel.is_set()):
                self._close()
                raise StopAsyncIteration
            event = self._take()
            if event is not None:
                if isinstance(event, AgentEnd):
                    self._finished = True
                return event
            listener = self._listener
            if listener is None or self._run.done:
                self._close()
                raise StopAsyncIteration
            if self._cancel is not None and self._relay is None:
                self._relay = asyncio.get_running_loop().create_task(_relay_cancel(self._cancel, listener))
            # Nothing can arrive between the empty check above and this clear: no await lies between them.
            listener.wake.clear()
            await listener.wake.wait()

    async def aclose(self) -> None:
        """Stop watching and release the backlog."""
        self._close()

    def __del__(self) -> None:
        self._close()

    def _take(self) -> Event | None:
        if self._next < self._end:
            event = self._history[self._next]
            self._next += 1
            return event
        if self._held is not None:
            event, self._held = self._held, None
            return event
        listener = self._listener
        if listener is None or not listener.queue:
            return None
        event = listener.queue.popleft()
        if not listener.dropped:
            return event
        # Held back so no later trim can drop it: the notice promised it comes next.
        self._held = event
        count, listener.dropped = listener.dropped, 0
        return Notice(
            text=f"{count} events were dropped: this watcher fell behind. The next is seq {event.seq}.",
            name="gap",
            after_seq=event.seq - 1,
            step=getattr(event, "step", 0),
            run_id=self._run_id,
            seq=event.seq - 1,
        )

    def _close(self) -> None:
        self._finished = True
        listener, self._listener = self._listener, None
        if listener is not None:
            self._run.listeners.discard(listener)
            listener.queue.clear()
            # Another task may be waiting on this watcher; it must see the close now, not at the next event.
            listener.wake.set()
        relay, self._relay = self._relay, None
        if relay is not None and not relay.done():
            # From __del__ the loop may already be closed; the task then died with it.
            with contextlib.suppress(RuntimeError):
                relay.cancel()


async def _relay_cancel(cancel: asyncio.Event, listener: _Listener) -> None:
    # One task per watcher turns the caller's cancel into a wake-up, so each wait is a single await rather
    # than a race of two new tasks per event. It holds the listener, never the Watcher, so dropping the
    # Watcher still releases it.
    await cancel.wait()
    listener.wake.set()


def history(run_id: str) -> list[Event]:
    """What a run has emitted so far, in seq order, without watching it (empty for an unknown run)."""
    run = _runs.get(run_id)
    return list(run.events) if run is not None else []


def watcher_count(run_id: str) -> int:
    """How many watchers follow a run now."""
    run = _runs.get(run_id)
    return len(run.listeners) if run is not None else 0


def end_run(run_id: str) -> None:
    """Mark a run done: its watchers finish once their backlog is read, and the sweep may reap it later.

    The history stays for ``retain_ended_s`` so a client that reconnects can still replay the run.
    """
    run = _runs.get(run_id)
    if run is not None:
        run.finish(_clock())


def sweep() -> int:
    """Drop runs that ended ``retain_ended_s`` ago or saw no event for ``retain_unended_s``.

    A run with a watcher on it is kept whatever its age. ``emit`` and ``watch`` call this every few seconds.

    Returns:
        How many runs were dropped.
    """
    global _last_sweep
    now = _last_sweep = _clock()
    ended, unended = _settings.retain_ended_s, _settings.retain_unended_s
    gone = [
        run_id
        for run_id, run in _runs.items()
        if not run.listeners
        and (now - run.ended_at >= ended if run.done else now - run.last_active >= unended)
    ]
    for run_id in gone:
        del _runs[run_id]
    return len(gone)


def configure_events(
    *,
    max_events: int | None = None,
    slack: float | None = None,
    retain_ended_s: float | None = None,
    retain_unended_s: float | None = None,
) -> EventSettings:
    """Move the bus's defaults for this process; returns every setting in force.

    A value left out, or one that is not a number above zero, keeps what was there: nothing here has a
    meaningful zero, and a 0 passed for "no opinion" must not turn the backlog cap off. ``max_events`` must be
    a whole number; the two retention times may be ``math.inf`` (never reap).
    """
    global _settings, _limit
    changes: dict[str, Any] = {}
    count = _positive(max_events)
    if count is not None and math.isfinite(count) and count.is_integer():
        changes["max_events"] = int(count)
    fraction = _positive(slack)
    if fraction is not None and math.isfinite(fraction):
        changes["slack"] = fraction
    for name, value in (("retain_ended_s", retain_ended_s), ("retain_unended_s", retain_unended_s)):
        seconds = _positive(value)
        if seconds is not None:
            changes[name] = seconds
    if changes:
        _settings = replace(_settings, **changes)
        _limit = _high_water(_settings)
    return _settings


def _positive(value: object) -> float | None:
    # NaN fails the comparison, so it is ignored like any other non-number.
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def reset_events() -> None:
    """Put the defaults back and drop every run; anyone still watching finishes."""
    global _settings, _limit, _last_sweep
    for run in _runs.values():
        run.finish(_clock())
    _runs.clear()
    _settings = _DEFAULTS
    _limit = _high_water(_DEFAULTS)
    _last_sweep = -math.inf


# -- display blocks --------------------------------------------------------------------------------

BlockKind: TypeAlias = Literal["text", "thinking", "tool", "notice"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """One thing a transcript view shows: a stretch of text or thinking, a tool call, or a notice.

    Attributes:
        kind: what the block is.
        step: the step it belongs to; two steps never share a block.
        text: the text, the thinking, a tool's result (its progress while it runs), or the notice.
        seq: the seq of the block's first event, a stable key for a view.
        call_id: a tool block's call id.
        name: a tool block's tool, or a notice's name.
        arguments: a tool block's arguments, where its start was seen.
        status: a tool block's ``"running"`` until it ends, then its disposition (``"completed"``, ...).
        is_error: a tool block whose result is an error.
    """

    kind: BlockKind
    step: int
    text: str = ""
    seq: int = 0
    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    status: str | None = None
    is_error: bool = False


def blocks_of(events: Iterable[Event]) -> list[Block]:
    """Collapse a run's events into blocks for display, in the order they began.

    Consecutive text (or thinking) deltas of one step become one block; any other block between them starts
    a new one. A tool call's start, progress and end become one block, matched on step and call id, since
    some servers number calls afresh every step. Notices become notice blocks; events a view does not show
    (turn and usage bookkeeping) are skipped and break nothing.
    """
    blocks: list[Block] = []
    # Each block's text pieces, joined once at the end: joining per delta would be quadratic in a long reply.
    pieces: list[list[str]] = []
    tools: dict[tuple[int, str], int] = {}
    for event in events:
        if isinstance(event, MessageUpdate):
            if not blocks or blocks[-1].kind != event.kind or blocks[-1].step != event.step:
                blocks.append(Block(kind=event.kind, step=event.step, seq=event.seq))
                pieces.append([])
            pieces[-1].append(event.delta)
        elif isinstance(event, ToolExecutionStart | ToolExecutionUpdate | ToolExecutionEnd):
            key = (event.step, event.call_id)
            at = tools.get(key)
            if at is None:
                # An end without its start: a call that never ran, or one whose start a gap dropped.
                at = tools[key] = len(blocks)
                blocks.append(
                    Block(
                        kind="tool", step=event.step, seq=event.seq, call_id=event.call_id, status="running"
                    )
                )
                pieces.append([])
            if isinstance(event, ToolExecutionStart):
                blocks[at] = replace(blocks[at], name=event.name, arguments=event.arguments)
            elif isinstance(event, ToolExecutionUpdate):
                blocks[at] = replace(blocks[at], name=event.name)
                pieces[at].append(event.text)
            else:
                failed = event.result.is_error or event.disposition != "completed"
                blocks[at] = replace(blocks[at], name=event.name, status=event.disposition, is_error=failed)
                # The result replaces the progress shown while the call ran.
                pieces[at] = [text_of(event.result.content)]
        elif isinstance(event, Notice):
            blocks.append(Block(kind="notice", step=event.step, seq=event.seq, name=event.name))
            pieces.append([event.text])
    return [
        replace(block, text=("\n" if block.kind == "tool" else "").join(texts))
        for block, texts in zip(blocks, pieces, strict=True)
    ]
