"""A session store that tells the server each event it records, with the seq the store gave it.

The agent's session writes its record through this store; the server learns each recorded event's seq
from the write itself, in the order of the writes, without reading the record back.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

from steadyloop import Event, Message, Usage
from steadyloop.context import BranchFiles, Entry
from steadyloop.sessions import SessionInfo, SessionStore, SessionUsage

__all__ = ["RecordingStore"]

Recorded = Callable[[str, int, Event], None]


class RecordingStore:
    """``store`` as it is, except that ``append_events`` also calls ``on_recorded(session_id, seq, event)``
    for each event it wrote, in order."""

    def __init__(self, store: SessionStore, on_recorded: Recorded) -> None:
        self.inner = store
        self._on_recorded = on_recorded

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        last = await self.inner.append_events(session_id, events, agent_id=agent_id)
        first = last - len(events) + 1
        for offset, event in enumerate(events):
            self._on_recorded(session_id, first + offset, event)
        return last

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

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        await self.inner.append_messages(session_id, messages, agent_id=agent_id)

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
        return await self.inner.record_usage(session_id, usage, agent_id=agent_id, turns=turns)

    async def save_state(self, session_id: str, name: str, value: str, *, agent_id: str) -> None:
        await self.inner.save_state(session_id, name, value, agent_id=agent_id)

    async def load_state(self, session_id: str, name: str, *, agent_id: str) -> str | None:
        return await self.inner.load_state(session_id, name, agent_id=agent_id)

    async def delete(self, session_id: str, *, agent_id: str) -> bool:
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
        return await self.inner.append_entry(
            session_id, message, agent_id=agent_id, parent=parent, files=files
        )

    async def load_entries(self, session_id: str, *, agent_id: str) -> builtins.list[Entry]:
        return await self.inner.load_entries(session_id, agent_id=agent_id)

    async def set_leaf(self, session_id: str, entry_id: str | None, *, agent_id: str) -> None:
        await self.inner.set_leaf(session_id, entry_id, agent_id=agent_id)

    async def close(self) -> None:
        await self.inner.close()
