"""The in-memory ``SessionStore``: for tests, and for hosts that want nothing on disk.

Entries are kept in position order, each with its parent, like the SQLite store's rows.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ..context.branches import BranchFiles, Entry
from ..errors import InvalidInput
from ..events import Event
from ..messages import Message
from ..usage import Usage
from ._common import StoreShortcuts, check_ids, not_found, path_depth, position_of, read_import
from ._jsonl import SessionSnapshot, dump_snapshot
from .store import ROOT, SessionConfig, SessionInfo, SessionUsage, check_id, new_session_id

__all__ = ["InMemorySessionStore"]


@dataclass(slots=True)
class _Session:
    info: SessionInfo
    entries: dict[int, Entry] = field(default_factory=dict)  # by position, in insertion (= position) order
    events: list[tuple[int, Event]] = field(default_factory=list)
    state: dict[str, str] = field(default_factory=dict)
    leaf: int | None = None  # None: the newest entry
    last: int = 0  # the highest position ever given

    def leaf_position(self) -> int:
        if self.leaf is not None:
            return self.leaf
        return next(reversed(self.entries)) if self.entries else ROOT

    def path(self) -> list[Message]:
        out: list[Message] = []
        at = self.leaf_position()
        while at != ROOT and at in self.entries:
            entry = self.entries[at]
            out.append(entry.message)
            parent = int(entry.parent_id) if entry.parent_id is not None else ROOT
            at = parent if parent < at else ROOT
        out.reverse()
        return out

    def add(self, message: Message, parent: int, files: BranchFiles | None = None) -> int:
        self.last += 1
        self.entries[self.last] = Entry(str(self.last), str(parent) if parent else None, message, files)
        self.leaf = self.last
        return self.last


class InMemorySessionStore(StoreShortcuts):
    """A ``SessionStore`` in a dict: for tests, and for hosts that want nothing on disk.

    Args:
        config: lifecycle limits.
        clock: seconds since the epoch; injectable so tests can move time.
    """

    def __init__(
        self, config: SessionConfig | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._config = config or SessionConfig()
        self._clock = clock
        self._sessions: dict[str, _Session] = {}

    def _info(self, session: _Session) -> SessionInfo:
        last = session.events[-1][0] if session.events else 0
        leaf = session.leaf_position()
        return replace(
            session.info,
            message_count=len(session.entries),
            last_event_seq=last,
            leaf=str(leaf) if leaf else None,
        )

    def _trim(self, session: _Session) -> None:
        cap = self._config.max_history_entries
        while cap is not None and len(session.entries) > cap:
            del session.entries[next(iter(session.entries))]

    def _find(self, session_id: str, agent_id: str) -> _Session | None:
        check_ids(session_id, agent_id)
        session = self._sessions.get(session_id)
        if session is None or session.info.agent_id != agent_id:
            return None
        if self._config.expired(session.info.created_at, session.info.updated_at, self._clock()):
            del self._sessions[session_id]
            return None
        return session

    def _owned(self, session_id: str, agent_id: str) -> _Session:
        session = self._find(session_id, agent_id)
        if session is None:
            raise not_found(session_id, agent_id)
        return session

    def _touch(self, session: _Session) -> None:
        session.info = replace(session.info, updated_at=self._clock())

    async def create(
        self, agent_id: str, *, title: str | None = None, session_id: str | None = None
    ) -> SessionInfo:
        check_id(agent_id, "agent_id")
        sid = check_id(session_id, "session_id") if session_id is not None else new_session_id()
        if sid in self._sessions:
            raise InvalidInput(f"session id {sid!r} is already in use")
        now = self._clock()
        session = _Session(
            SessionInfo(session_id=sid, agent_id=agent_id, title=title, created_at=now, updated_at=now)
        )
        self._sessions[sid] = session
        return self._info(session)

    async def get(self, session_id: str, *, agent_id: str) -> SessionInfo | None:
        session = self._find(session_id, agent_id)
        return None if session is None else self._info(session)

    async def list(self, agent_id: str) -> builtins.list[SessionInfo]:
        check_id(agent_id, "agent_id")
        mine = [s for s in list(self._sessions.values()) if s.info.agent_id == agent_id]
        live = [s for s in mine if self._find(s.info.session_id, agent_id) is not None]
        infos = [self._info(s) for s in live]
        return sorted(infos, key=lambda i: (i.updated_at, i.created_at), reverse=True)

    async def set_title(self, session_id: str, title: str | None, *, agent_id: str) -> None:
        session = self._owned(session_id, agent_id)
        session.info = replace(session.info, title=title)

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        session = self._owned(session_id, agent_id)
        parent = session.leaf_position()
        for message in messages:
            parent = session.add(message, parent)
        self._trim(session)
        self._touch(session)

    async def load_messages(
        self, session_id: str, *, agent_id: str, limit: int | None = None
    ) -> builtins.list[Message]:
        path = self._owned(session_id, agent_id).path()
        depth = path_depth(limit)
        return path[-depth:] if depth else []

    async def append_entry(
        self,
        session_id: str,
        message: Message,
        *,
        agent_id: str,
        parent: str | None,
        files: BranchFiles | None = None,
    ) -> str:
        session = self._owned(session_id, agent_id)
        at = self._existing(session, parent)
        position = session.add(message, at, files)
        self._trim(session)
        self._touch(session)
        return str(position)

    async def load_entries(self, session_id: str, *, agent_id: str) -> builtins.list[Entry]:
        return list(self._owned(session_id, agent_id).entries.values())

    async def set_leaf(self, session_id: str, entry_id: str | None, *, agent_id: str) -> None:
        session = self._owned(session_id, agent_id)
        session.leaf = self._existing(session, entry_id)
        self._touch(session)

    def _existing(self, session: _Session, entry_id: str | None) -> int:
        at = position_of(entry_id)
        if at != ROOT and at not in session.entries:
            raise InvalidInput(f"session {session.info.session_id!r} has no entry {at}")
        return at

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        session = self._owned(session_id, agent_id)
        seq = session.events[-1][0] if session.events else 0
        for event in events:
            seq += 1
            session.events.append((seq, event))
        if events:
            self._touch(session)
        return seq

    async def load_events(
        self, session_id: str, *, agent_id: str, after_seq: int = 0
    ) -> builtins.list[tuple[int, Event]]:
        session = self._owned(session_id, agent_id)
        return [(seq, event) for seq, event in session.events if seq > after_seq]

    async def record_usage(
        self, session_id: str, usage: Usage, *, agent_id: str, turns: int = 0
    ) -> SessionUsage:
        session = self._owned(session_id, agent_id)
        total = session.info.usage.add(usage, turns=turns)
        session.info = replace(session.info, usage=total, updated_at=self._clock())
        return total

    async def save_state(self, session_id: str, name: str, value: str, *, agent_id: str) -> None:
        session = self._owned(session_id, agent_id)
        session.state[name] = value
        self._touch(session)

    async def load_state(self, session_id: str, name: str, *, agent_id: str) -> str | None:
        return self._owned(session_id, agent_id).state.get(name)

    async def delete(self, session_id: str, *, agent_id: str) -> bool:
        if self._find(session_id, agent_id) is None:
            return False
        del self._sessions[session_id]
        return True

    async def export_jsonl(self, session_id: str, *, agent_id: str) -> str:
        session = self._owned(session_id, agent_id)
        return dump_snapshot(
            SessionSnapshot(
                self._info(session),
                list(session.entries.values()),
                list(session.events),
                dict(session.state),
            )
        )

    async def import_jsonl(self, text: str, *, agent_id: str, session_id: str | None = None) -> SessionInfo:
        sid, snapshot = read_import(text, agent_id, session_id)
        if sid in self._sessions:
            raise InvalidInput(f"session id {sid!r} is already in use")
        info = replace(snapshot.info, session_id=sid, agent_id=agent_id)
        session = _Session(info, events=list(snapshot.events), state=dict(snapshot.state))
        for entry in snapshot.entries:
            session.entries[int(entry.id)] = entry
        session.last = int(snapshot.entries[-1].id) if snapshot.entries else 0
        session.leaf = position_of(info.leaf)
        self._trim(session)
        self._sessions[sid] = session
        return self._info(session)

    async def close(self) -> None:
        self._sessions.clear()
