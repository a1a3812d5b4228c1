"""A session store that tells the server each event it records, with the seq the store gave it.

The agent's session writes its record through this store; the server learns each recorded event's seq
from the write itself, in the order of the writes, without reading the record back. A durable node also
gates each write of a session on its hold of that session's run (``DurableRuns.gate``): a node whose hold
may have lapsed waits for its next beat, and one whose run another node took over writes no more of it.
A write of a run it holds that fails because the database is away is tried again (``DurableRuns.outage``)
until the database is back or the run was taken over, so an outage leaves no gap in the run's record. A
write whose commit went through but whose reply was lost on the way is not made twice: before events are
appended again, the record after the last seq this node wrote is read, and events already there count as
written. Messages, entries and usage, which say nothing back to compare, are written where retries are on
with the session's state read first: a leaf that moved since, or one more run in the usage, means the
failed try went through.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from steadyloop import Event, Message, Usage
from steadyloop.context import BranchFiles, Entry
from steadyloop.events import event_to_json
from steadyloop.sessions import SessionInfo, SessionStore, SessionUsage, StoreUnavailable

__all__ = ["RecordingStore"]

Recorded = Callable[[str, int, Event], None]
#: Awaited before each write of a session; raises to refuse it.
Gate = Callable[[str], Awaitable[None]]
#: Asked when a write of a session failed because the store is away: ``True`` (once it is time) to try
#: the write again, through the gate; ``False`` to let the failure go to the writer.
Outage = Callable[[str], Awaitable[bool]]

T = TypeVar("T")


async def _open(_: str) -> None:
    return None


async def _give_up(_: str) -> bool:
    return False


class RecordingStore:
    """``store`` as it is, except that ``append_events`` also calls ``on_recorded(session_id, seq, event)``
    for each event it wrote, in order."""

    def __init__(self, store: SessionStore, on_recorded: Recorded) -> None:
        self.inner = store
        self._on_recorded = on_recorded
        self.gate: Gate = _open
        self.outage: Outage = _give_up
        self._last_seq: dict[str, int] = {}  # per session, the last seq this node's writes were given

    async def _write(self, session_id: str, write: Callable[[], Awaitable[T]]) -> T:
        """``write``, once the gate lets it go; again, while the store is away, as long as ``outage`` says."""
        while True:
            await self.gate(session_id)
            try:
                return await write()
            except StoreUnavailable:
                if not await self.outage(session_id):
                    raise

    async def _write_once(
        self,
        session_id: str,
        agent_id: str,
        write: Callable[[], Awaitable[T]],
        landed: Callable[[SessionInfo, SessionInfo], bool],
        result: Callable[[SessionInfo], T],
    ) -> T:
        """A write that is not to be made twice, as ``_write``: where retries are on, the session is read
        before the first try, and again before another; ``landed(before, now)`` says a failed try went
        through, and ``result(now)`` is then what the write would have returned."""
        if self.outage is _give_up:
            return await self._write(session_id, write)  # a failure goes to the writer: nothing is retried
        before: SessionInfo | None = None
        tried = False

        async def once() -> T:
            nonlocal before, tried
            if before is None:
                before = await self.inner.get(session_id, agent_id=agent_id)
            if tried and before is not None:
                now = await self.inner.get(session_id, agent_id=agent_id)
                if now is not None and landed(before, now):
                    return result(now)
            tried = True
            return await write()

        return await self._write(session_id, once)

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        known = self._last_seq.get(session_id)
        tried = False

        async def append() -> int:
            nonlocal tried
            if tried and known is not None and events:
                landed = await self._landed(session_id, agent_id, known, events)
                if landed is not None:
                    return landed
            tried = True
            return await self.inner.append_events(session_id, events, agent_id=agent_id)

        last = await self._write(session_id, append)
        self._last_seq[session_id] = last
        first = last - len(events) + 1
        for offset, event in enumerate(events):
            self._on_recorded(session_id, first + offset, event)
        return last

    async def _landed(
        self, session_id: str, agent_id: str, known: int, events: Sequence[Event]
    ) -> int | None:
        """The last seq of ``events`` if a lost reply hid their write: exactly they follow ``known`` in the
        record. ``None``: not there (or something else is), so they are to be written."""
        after = await self.inner.load_events(session_id, agent_id=agent_id, after_seq=known)
        if [event_to_json(e) for _, e in after] != [event_to_json(e) for e in events]:
            return None
        return after[-1][0]

    async def create(
        self, agent_id: str, *, title: str | None = None, session_id: str | None = None
    ) -> SessionInfo:
        return await self.inner.create(agent_id, title=title, session_id=session_id)

    async def get(self, session_id: str, *, agent_id: str) -> SessionInfo | None:
        return await self.inner.get(session_id, agent_id=agent_id)

    async def list(self, agent_id: str) -> builtins.list[SessionInfo]:
        return await self.inner.list(agent_id)

    async def latest(self, agent_id: str) -> SessionInfo | None:
        return await self.inner.latest(agent_id)

    async def set_title(self, session_id: str, title: str | None, *, agent_id: str) -> None:
        await self.inner.set_title(session_id, title, agent_id=agent_id)

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        await self._write_once(
            session_id,
            agent_id,
            lambda: self.inner.append_messages(session_id, messages, agent_id=agent_id),
            lambda before, now: bool(messages) and now.leaf != before.leaf,
            lambda _now: None,
        )

    async def load_messages(
        self, session_id: str, *, agent_id: str, limit: int | None = None
    ) -> builtins.list[Message]:
        return await self.inner.load_messages(session_id, agent_id=agent_id, limit=limit)

    async def load_events(
        self, session_id: str, *, agent_id: str, after_seq: int = 0
    ) -> builtins.list[tuple[int, Event]]:
        return await self.inner.load_events(session_id, agent_id=agent_id, after_seq=after_seq)

    async def record_usage(
        self, session_id: str, usage: Usage, *, agent_id: str, turns: int = 0
    ) -> SessionUsage:
        return await self._write_once(
            session_id,
            agent_id,
            lambda: self.inner.record_usage(session_id, usage, agent_id=agent_id, turns=turns),
            lambda before, now: now.usage.runs > before.usage.runs,
            lambda now: now.usage,
        )

    async def save_state(self, session_id: str, name: str, value: str, *, agent_id: str) -> None:
        await self._write(
            session_id, lambda: self.inner.save_state(session_id, name, value, agent_id=agent_id)
        )

    async def load_state(self, session_id: str, name: str, *, agent_id: str) -> str | None:
        return await self.inner.load_state(session_id, name, agent_id=agent_id)

    async def delete(self, session_id: str, *, agent_id: str) -> bool:
        self._last_seq.pop(session_id, None)
        return await self.inner.delete(session_id, agent_id=agent_id)

    async def export_jsonl(self, session_id: str, *, agent_id: str) -> str:
        return await self.inner.export_jsonl(session_id, agent_id=agent_id)

    async def import_jsonl(self, text: str, *, agent_id: str, session_id: str | None = None) -> SessionInfo:
        return await self.inner.import_jsonl(text, agent_id=agent_id, session_id=session_id)

    async def append_entry(
        self,
        session_id: str,
        message: Message,
        *,
        agent_id: str,
        parent: str | None,
        files: BranchFiles | None = None,
    ) -> str:
        def landed(before: SessionInfo, now: SessionInfo) -> bool:
            return now.leaf is not None and now.leaf != before.leaf

        return await self._write_once(
            session_id,
            agent_id,
            lambda: self.inner.append_entry(
                session_id, message, agent_id=agent_id, parent=parent, files=files
            ),
            landed,
            lambda now: now.leaf or "",  # the entry made is the leaf
        )

    async def load_entries(self, session_id: str, *, agent_id: str) -> builtins.list[Entry]:
        return await self.inner.load_entries(session_id, agent_id=agent_id)

    async def set_leaf(self, session_id: str, entry_id: str | None, *, agent_id: str) -> None:
        await self._write(session_id, lambda: self.inner.set_leaf(session_id, entry_id, agent_id=agent_id))

    async def close(self) -> None:
        await self.inner.close()
