"""One session's live events fanned out to its watchers, joined to the record without a gap or a repeat.

Every event a session's run makes reaches its ``EventHub`` in the order the agent delivered it. An event
the record keeps arrives with the seq the store gave it (``publish_recorded``, called right after the
write); a streaming delta, which the record only keeps coalesced, arrives without one (``publish_live``)
and carries ``base``: the seq of the last recorded event before it. The record writes a message's deltas
as one ``message_update`` just before the next recorded event, so the deltas with base ``b`` are exactly
what the recorded update after ``b`` will hold: a watcher shows them as a preview and replaces the
preview with that update when it comes.

``attach`` joins a replay of the record to the live feed. It subscribes first and reads the record
second, so whatever the read missed was written after the subscription and reaches the watcher live;
what both deliver is dropped by seq. A delta is delivered only to a watcher whose last recorded event is
the delta's base: one that has already seen the coalesced update skips it, and one that attached
mid-message gets the deltas streamed so far (the hub keeps them) before the next.

A watcher following a run stops at that run's ``agent_end`` (a durable run's end that hands it to another
node is not its end: it follows on to the resumed run's). Whether the run still goes is asked again after
each ``GOING_CHECK_S`` of quiet: a run whose end the record holds, on a session no node runs any longer,
ends its watchers even where they attached too late to see that end come (on another node, as it ended).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from steadyloop.events import AgentEnd, Event, MessageUpdate

from .cutoff import is_handover

__all__ = ["EventHub", "Item", "Watcher", "attach"]

#: Items a watcher may fall behind by before it is let go (it reattaches from its last seq).
WATCHER_BACKLOG = 20_000
#: Seconds of quiet after which a watcher following a run asks whether the run still goes.
GOING_CHECK_S = 5.0


@dataclass(frozen=True, slots=True)
class Item:
    """One event on its way to a watcher.

    Attributes:
        seq: the event's place in the session's record; ``None`` for a live delta (or an event the store
            could not record).
        base: the seq of the last recorded event before this one.
        event: the event.
    """

    seq: int | None
    base: int
    event: Event


class Watcher:
    """One subscriber's queue of items; ``None`` ends it (the hub closed, or it fell too far behind)."""

    __slots__ = ("base", "dropped", "queue", "running")

    def __init__(self, base: int, running: bool) -> None:
        self.queue: asyncio.Queue[Item | None] = asyncio.Queue()
        self.base = base
        self.running = running
        self.dropped = False

    def offer(self, item: Item | None) -> None:
        if self.dropped:
            return
        if item is not None and self.queue.qsize() >= WATCHER_BACKLOG:
            self.dropped = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(item)


class EventHub:
    """The live side of one session: its watchers, the deltas since the last recorded event, run or not.

    Args:
        last_seq: the record's last seq when the hub was made.
    """

    def __init__(self, last_seq: int = 0) -> None:
        self.last_seq = last_seq
        self.running = False
        self._preview: list[Item] = []
        self._watchers: set[Watcher] = set()

    @property
    def watchers(self) -> int:
        return len(self._watchers)

    def watch(self) -> Watcher:
        """A new watcher, holding the deltas already streamed since the last recorded event."""
        watcher = Watcher(self.last_seq, self.running)
        for item in self._preview:
            watcher.offer(item)
        self._watchers.add(watcher)
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def publish_recorded(self, seq: int, event: Event) -> None:
        """An event the store just recorded at ``seq``."""
        item = Item(seq, self.last_seq, event)
        if seq > self.last_seq:
            self.last_seq = seq
            self._preview.clear()
        self._fan_out(item)

    def publish_live(self, event: Event) -> None:
        """An event the record does not hold as it is: a delta, or one whose write failed."""
        item = Item(None, self.last_seq, event)
        if isinstance(event, MessageUpdate):
            self._preview.append(item)
        self._fan_out(item)

    def close(self) -> None:
        """End every watcher (the server is stopping, or the session was deleted)."""
        for watcher in self._watchers:
            watcher.offer(None)
        self._watchers.clear()

    def _fan_out(self, item: Item) -> None:
        for watcher in list(self._watchers):
            watcher.offer(item)
            if watcher.dropped:
                self._watchers.discard(watcher)


async def attach(
    hub: EventHub,
    watcher: Watcher,
    replay: Callable[[int], Awaitable[list[tuple[int, Event]]]],
    *,
    after: int,
    until_end_after: int | None,
    follow: bool,
    heartbeat_s: float | None = None,
    going: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[Item | None]:
    """The record after ``after``, then the live feed, each recorded event once and in seq order.

    Args:
        hub: the session's hub.
        watcher: subscribed (``hub.watch()``) before this is called, and before any run it should see.
        replay: reads the record after a seq.
        after: the last seq the caller has.
        until_end_after: stop after the first ``AgentEnd`` with a seq above this (the run the caller
            waits for); ``None`` not to stop at a run's end.
        follow: keep following when no run is under way (otherwise stop once the record is replayed).
        heartbeat_s: yield ``None`` after this long without an item, so the caller can keep the line open.
        going: whether the run the caller waits for still goes (anywhere), asked after each
            ``GOING_CHECK_S`` without an item; once it does not, what the record holds after the last
            item is replayed and the attach ends.
    """
    position = after
    try:
        for seq, event in await replay(after):
            yield Item(seq, position, event)
            position = seq
            if _ends(event, seq, until_end_after):
                return
        if until_end_after is None and not follow:
            return
        quiet_s = heartbeat_s
        if going is not None and until_end_after is not None:
            quiet_s = GOING_CHECK_S if heartbeat_s is None else min(heartbeat_s, GOING_CHECK_S)
        while True:
            try:
                async with asyncio.timeout(quiet_s):
                    item = await watcher.queue.get()
            except TimeoutError:
                if going is not None and until_end_after is not None and not await going():
                    for seq, event in await replay(position):  # what was written before it stopped
                        yield Item(seq, position, event)
                        position = seq
                        if _ends(event, seq, until_end_after):
                            return
                    return
                yield None
                continue
            if item is None:
                return
            if item.seq is None:
                if item.base == position:
                    yield item
                continue
            if item.seq <= position:
                continue
            yield item
            position = item.seq
            if _ends(item.event, item.seq, until_end_after):
                return
    finally:
        hub.unwatch(watcher)


def _ends(event: Event, seq: int, until_end_after: int | None) -> bool:
    return (
        until_end_after is not None
        and isinstance(event, AgentEnd)
        and seq > until_end_after
        and not is_handover(event)
    )
