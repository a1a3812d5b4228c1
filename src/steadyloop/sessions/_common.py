"""What every session store does alike, written once (internal).

The stores differ in where rows live (a dict, a SQLite file, a PostgreSQL database) and in how they read
and write them; numbering a chain of entries, reading stored rows back into values, preparing an imported
session's rows and exporting a session are the same for all of them. The functions here take values and
return values; only ``export_session`` and ``StoreShortcuts`` call a store, and only through the protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..context.branches import Entry
from ..events import Event, event_from_json, event_to_json
from ..messages import Message, message_from_json, message_to_json
from ._jsonl import SessionSnapshot, dump_snapshot, load_snapshot
from ._schema import Row, decode, files_from_json, files_to_json, usage_values
from .bound import DEFAULT_HISTORY_LIMIT, AgentSession
from .store import ROOT, SessionInfo, SessionNotFound, SessionStore, check_id, entry_position

__all__ = [
    "ALL_THE_WAY",
    "ImportRows",
    "StoreShortcuts",
    "chain",
    "check_ids",
    "entries_of",
    "events_of",
    "export_session",
    "import_rows",
    "messages_of",
    "not_found",
    "path_depth",
    "position_of",
    "read_import",
]

_P = TypeVar("_P")

#: A depth no session reaches: the path from the leaf all the way to the root.
ALL_THE_WAY = 1 << 62


def check_ids(session_id: str, agent_id: str) -> None:
    """Check both ids before a store touches anything (``InvalidInput`` for a bad one)."""
    check_id(session_id, "session_id")
    check_id(agent_id, "agent_id")


def not_found(session_id: str, agent_id: str) -> SessionNotFound:
    """The error for a session the agent does not have."""
    return SessionNotFound(f"no session {session_id!r} for agent {agent_id!r}")


def position_of(entry_id: str | None) -> int:
    """The position an entry id names; ``ROOT`` for ``None`` (the start, before any entry)."""
    return entry_position(entry_id) if entry_id is not None else ROOT


def chain(items: Sequence[_P], last: int, parent: int) -> list[tuple[int, int | None, _P]]:
    """Positions for ``items`` appended as a chain under ``parent`` (``ROOT``: none), numbered after
    ``last``, the highest position ever given: (position, parent position or ``None``, item) each."""
    out: list[tuple[int, int | None, _P]] = []
    for position, item in enumerate(items, last + 1):
        out.append((position, parent or None, item))
        parent = position
    return out


def path_depth(limit: int | None) -> int:
    """How many entries up from the leaf a history read takes: ``limit``, all of them when ``None``, and
    none (0) for a limit that is not positive."""
    if limit is None:
        return ALL_THE_WAY
    return max(limit, 0)


def messages_of(bodies: Iterable[str]) -> list[Message]:
    """Stored message bodies read back, skipping the ones this version cannot read."""
    return [m for body in bodies if (m := decode(body, message_from_json)) is not None]


def entries_of(rows: Iterable[Row]) -> list[Entry]:
    """Stored ``pos, parent, body, files`` rows read back as entries, skipping unreadable bodies."""
    out: list[Entry] = []
    for row in rows:
        message = decode(row["body"], message_from_json)
        if message is None:
            continue
        parent = row["parent"]
        out.append(
            Entry(str(row["pos"]), str(parent) if parent else None, message, files_from_json(row["files"]))
        )
    return out


def events_of(rows: Iterable[tuple[int, str]]) -> list[tuple[int, Event]]:
    """Stored (seq, body) events read back, skipping the ones this version cannot read."""
    out: list[tuple[int, Event]] = []
    for seq, body in rows:
        event = decode(body, event_from_json)
        if event is not None:
            out.append((seq, event))
    return out


def read_import(text: str, agent_id: str, session_id: str | None) -> tuple[str, SessionSnapshot]:
    """The id an imported session takes (``session_id``, else its exported one) and the parsed export.

    Raises:
        InvalidInput: a bad id, or text that is not a session export.
    """
    check_id(agent_id, "agent_id")
    snapshot = load_snapshot(text)
    return check_id(session_id or snapshot.info.session_id, "session_id"), snapshot


@dataclass(frozen=True, slots=True)
class ImportRows:
    """An imported session as the rows a SQL store inserts, in its tables' column order."""

    session_id: str
    session: tuple[object, ...]
    messages: list[tuple[str, int, str, int | None, str | None]]
    events: list[tuple[str, int, str]]
    state: list[tuple[str, str, str]]


def import_rows(text: str, *, agent_id: str, session_id: str | None, cap: int | None) -> ImportRows:
    """The rows of ``export_jsonl`` text imported for ``agent_id``, keeping the last ``cap`` entries.

    Raises:
        InvalidInput: a bad id, or text that is not a session export.
    """
    sid, snapshot = read_import(text, agent_id, session_id)
    info = snapshot.info
    kept = snapshot.entries[-cap:] if cap is not None else snapshot.entries
    session = (
        sid,
        agent_id,
        info.title,
        info.created_at,
        info.updated_at,
        *usage_values(info.usage),
        position_of(info.leaf),
    )
    messages = [
        (
            sid,
            int(e.id),
            message_to_json(e.message),
            int(e.parent_id) if e.parent_id else None,
            files_to_json(e.files),
        )
        for e in kept
    ]
    events = [(sid, seq, event_to_json(e)) for seq, e in snapshot.events]
    state = [(sid, name, value) for name, value in snapshot.state.items()]
    return ImportRows(sid, session, messages, events, state)


async def export_session(
    store: SessionStore,
    session_id: str,
    *,
    agent_id: str,
    all_state: Callable[[str], Awaitable[dict[str, str]]],
) -> str:
    """The session as ``export_jsonl`` text, read through the store's protocol and ``all_state``.

    Raises:
        SessionNotFound: the agent has no session ``session_id``.
    """
    info = await store.get(session_id, agent_id=agent_id)
    if info is None:
        raise not_found(session_id, agent_id)
    entries = await store.load_entries(session_id, agent_id=agent_id)
    events = await store.load_events(session_id, agent_id=agent_id)
    return dump_snapshot(SessionSnapshot(info, entries, events, await all_state(session_id)))


class StoreShortcuts:
    """The store methods that follow from the protocol's others, for a store class to inherit."""

    async def latest(self: SessionStore, agent_id: str) -> SessionInfo | None:
        """The agent's most recently active session, if any."""
        infos = await self.list(agent_id)
        return infos[0] if infos else None

    async def session(
        self: SessionStore,
        session_id: str | None = None,
        *,
        agent_id: str,
        title: str | None = None,
        history_limit: int | None = DEFAULT_HISTORY_LIMIT,
        on_failure: Callable[[str], object] | None = None,
    ) -> AgentSession:
        """A session for an ``Agent`` to live in (``Agent(..., session=...)``), loaded; a new one when
        ``session_id`` is ``None``. See ``AgentSession``.

        Raises:
            SessionNotFound: the agent has no session ``session_id``.
        """
        return await AgentSession.open(
            self,
            agent_id=agent_id,
            session_id=session_id,
            title=title,
            history_limit=history_limit,
            on_failure=on_failure,
        )
