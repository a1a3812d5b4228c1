"""The event record: a run's events kept per session, and followed live by whoever attaches.

``EventRecorder.record`` stores every event of a run except the streaming deltas as it comes, numbered
after the record's last seq by the store, so the seq runs on across runs and restarts. Text and thinking
deltas are held and written as one ``MessageUpdate`` of each kind just before the event that follows them
(the message's ``MessageEnd``, or whatever cut it off), in the same write: a record grows with the
transcript, not with the token count, and keeps the order the events were emitted in. Deltas held for
``flush_after_s`` (a second by default) are written then, whether or not more come, so a process killed
mid-message leaves what it streamed in the record, short of that last stretch. Each recorded event keeps
the ``seq`` it had in its run (a coalesced update, its first delta's), so an export carries both.

Writes never overlap: ``record`` waits for a timed write under way, so whoever hears an event after
``record`` returns hears it after every write that holds it, and none that does not.

``follow`` replays a session's record after any seq and then waits for more. Recorders wake followers of
the same store in this process, on this event loop; a host that appends events to the store directly calls
``notify_followers`` itself. A store that is an ``AppendFeed`` (PostgreSQL) also wakes followers for the
appends of other processes, on any machine.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator
from typing import Literal

from ..events import AgentEnd, Event, MessageUpdate
from .store import AppendFeed, SessionInfo, SessionStore, check_id

__all__ = ["DEFAULT_FLUSH_AFTER_S", "EventRecorder", "follow", "last_run", "notify_followers"]

log = logging.getLogger("steadyloop.sessions")

#: Seconds held deltas wait before they are written without an event to carry them.
DEFAULT_FLUSH_AFTER_S = 1.0


class _Feed:
    """The followers of one session waiting for its next write."""

    __slots__ = ("followers", "waiters")

    def __init__(self) -> None:
        self.waiters: set[asyncio.Future[None]] = set()
        self.followers = 0


# Keyed weakly by store so a closed, dropped store takes its followers' bookkeeping with it.
_FEEDS: weakref.WeakKeyDictionary[object, dict[str, _Feed]] = weakref.WeakKeyDictionary()


# How far back from a session's last event the end of its last run is looked for.
_LOOK_BACK = 32


async def last_run(store: SessionStore, info: SessionInfo) -> AgentEnd | None:
    """How the session's last recorded run ended (its ``AgentEnd``: ``outcome`` and ``error``), or ``None``
    when the record holds no run end near its end."""
    if info.last_event_seq <= 0:
        return None
    after = max(info.last_event_seq - _LOOK_BACK, 0)
    recorded = await store.load_events(info.session_id, agent_id=info.agent_id, after_seq=after)
    for _, event in reversed(recorded):
        if isinstance(event, AgentEnd):
            return event
    return None


def notify_followers(store: SessionStore, session_id: str | None) -> None:
    """Wake every ``follow`` of this session on this store (``None``: of every session), so each reads
    what was just appended."""
    feeds = _FEEDS.get(store, {})
    for feed in feeds.values() if session_id is None else filter(None, [feeds.get(session_id)]):
        for waiter in feed.waiters:
            if not waiter.done():
                waiter.set_result(None)


class EventRecorder:
    """Records one session's events into its store, deltas coalesced per turn.

    Args:
        store: where the record goes.
        session_id: the session; it must belong to ``agent_id``.
        agent_id: the calling agent.
        record_usage: at ``AgentEnd``, add the run's usage and steps to the session's total. Every run ends
            in exactly one ``AgentEnd``, failed and aborted ones too, so their spend is counted; turn it off
            when the host records usage itself.
        flush_after_s: seconds held deltas wait for an event to carry them before they are written on
            their own; ``None`` holds them until that event comes.
    """

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        agent_id: str,
        *,
        record_usage: bool = True,
        flush_after_s: float | None = DEFAULT_FLUSH_AFTER_S,
    ) -> None:
        self._store = store
        self._session_id = check_id(session_id, "session_id")
        self._agent_id = check_id(agent_id, "agent_id")
        self._record_usage = record_usage
        self._flush_after_s = flush_after_s
        self._pending: dict[Literal["thinking", "text"], list[str]] = {"thinking": [], "text": []}
        # Each kind's first held delta: its coalesced event takes that one's step, run id and seq.
        self._first: dict[Literal["thinking", "text"], MessageUpdate] = {}
        self._writing = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._timed: asyncio.Task[None] | None = None
        self.last_seq = 0
        """The seq of the last event this recorder wrote; 0 until it writes one."""

    async def record(self, event: Event) -> int | None:
        """Record one event; returns the seq it was given, or ``None`` for a delta held for the turn's end."""
        async with self._writing:
            return await self._record(event)

    async def _record(self, event: Event) -> int | None:
        if isinstance(event, MessageUpdate):
            if event.delta:
                self._pending[event.kind].append(event.delta)
                self._first.setdefault(event.kind, event)
                if self._timer is None and self._flush_after_s is not None:
                    self._timer = asyncio.get_running_loop().call_later(self._flush_after_s, self._due)
            return None
        batch: list[Event] = [*self._coalesced(), event]
        if not isinstance(event, AgentEnd):
            return await self._write(batch)
        try:
            return await self._write(batch)
        finally:
            # Even when the record could not be written, the run's spend is still owed to the session.
            if self._record_usage:
                await self._store.record_usage(
                    self._session_id, event.usage, agent_id=self._agent_id, turns=event.steps
                )

    async def flush(self) -> int:
        """Write the deltas held so far as coalesced events; returns the last seq written."""
        async with self._writing:
            batch = self._coalesced()
            if batch:
                await self._write(batch)
            return self.last_seq

    def _due(self) -> None:
        self._timer = None
        if self._timed is None or self._timed.done():
            self._timed = asyncio.get_running_loop().create_task(self._flush_held())

    async def _flush_held(self) -> None:
        try:
            await self.flush()
        except Exception as exc:  # the next event's write carries nothing of these; say so and go on
            log.warning("session %s: streamed text could not be recorded: %s", self._session_id, exc)

    def _coalesced(self) -> list[Event]:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        firsts, self._first = self._first, {}
        out: list[Event] = []
        for kind in ("thinking", "text"):
            pieces, first = self._pending[kind], firsts.get(kind)
            if pieces and first is not None:
                out.append(
                    MessageUpdate(
                        kind=kind, delta="".join(pieces), step=first.step, run_id=first.run_id, seq=first.seq
                    )
                )
            pieces.clear()
        return out

    async def _write(self, batch: list[Event]) -> int:
        self.last_seq = await self._store.append_events(self._session_id, batch, agent_id=self._agent_id)
        notify_followers(self._store, self._session_id)
        return self.last_seq


async def follow(
    store: SessionStore,
    session_id: str,
    *,
    agent_id: str,
    after_seq: int = 0,
    cancel: asyncio.Event | None = None,
    until_end: bool = False,
) -> AsyncGenerator[tuple[int, Event], None]:
    """The session's recorded events after ``after_seq``, then each new one as it is recorded.

    Args:
        store: the store the session is in.
        session_id: the session.
        agent_id: the calling agent; another agent's session raises ``SessionNotFound``.
        after_seq: replay from the event after this seq (0: from the start).
        cancel: set it to leave, also while waiting for the next event.
        until_end: stop after yielding an ``AgentEnd``, i.e. follow one run rather than the session.

    Yields:
        ``(seq, event)`` in seq order, each once.
    """
    check_id(session_id, "session_id")
    check_id(agent_id, "agent_id")
    feeds = _FEEDS.setdefault(store, {})
    feed = feeds.setdefault(session_id, _Feed())
    feed.followers += 1
    loop = asyncio.get_running_loop()
    stop = loop.create_task(_until(cancel)) if cancel is not None else None
    last = after_seq
    unsubscribe = None
    try:
        if isinstance(store, AppendFeed):
            # Subscribed before the first read, so an append another process makes meanwhile still wakes us.
            unsubscribe = await store.subscribe(lambda sid, _seq: notify_followers(store, sid))
        while cancel is None or not cancel.is_set():
            # Registered before reading, so a write that lands between the read and the wait still wakes us.
            waiter: asyncio.Future[None] = loop.create_future()
            feed.waiters.add(waiter)
            try:
                batch = await store.load_events(session_id, agent_id=agent_id, after_seq=last)
                for seq, event in batch:
                    yield seq, event
                    last = seq
                    if until_end and isinstance(event, AgentEnd):
                        return
                if not batch:
                    await asyncio.wait(
                        [waiter] if stop is None else [waiter, stop], return_when=asyncio.FIRST_COMPLETED
                    )
            finally:
                feed.waiters.discard(waiter)
                waiter.cancel()
    finally:
        if unsubscribe is not None:
            unsubscribe()
        if stop is not None:
            stop.cancel()
        feed.followers -= 1
        if not feed.followers:
            feeds.pop(session_id, None)


async def _until(cancel: asyncio.Event) -> None:
    await cancel.wait()
