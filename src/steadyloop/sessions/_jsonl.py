"""A session as JSONL, shared by every store (internal).

One line per value, each the JSON of a steadyloop type with a ``kind`` saying which: a ``session`` header
first, then ``message`` lines oldest first, then ``event`` lines with their seq (the record's seq; each
event also carries the seq it had in its run), then ``state`` lines (format 2). From format 3 a message
line is an entry of the session's tree (its ``id``, its ``parent``, the ``files`` of a branch summary) and
the header names the ``leaf``; message lines without them (format 2 and before) read as one straight
line. The owning agent is not written: whoever imports a session owns the copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from ..context.branches import BranchFiles, Entry
from ..errors import InvalidInput
from ..events import Event
from ..messages import Message
from .store import SessionInfo, SessionUsage, entry_position

__all__ = ["FORMAT", "SessionSnapshot", "dump_snapshot", "load_snapshot"]

#: The version of the line format, written in the header (2 added the ``state`` lines, 3 the tree).
FORMAT = 3


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """Everything a store holds about one session; ``info.leaf`` is the entry it continues from."""

    info: SessionInfo
    entries: list[Entry]
    events: list[tuple[int, Event]]
    state: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Header:
    session_id: str
    title: str | None
    created_at: float
    updated_at: float
    usage: SessionUsage
    format: int = FORMAT
    leaf: str | None = None
    kind: Literal["session"] = "session"


@dataclass(frozen=True, slots=True, kw_only=True)
class _MessageLine:
    message: Message
    id: str | None = None
    parent: str | None = None
    files: BranchFiles | None = None
    kind: Literal["message"] = "message"


@dataclass(frozen=True, slots=True, kw_only=True)
class _EventLine:
    seq: int
    event: Event
    kind: Literal["event"] = "event"


@dataclass(frozen=True, slots=True, kw_only=True)
class _StateLine:
    name: str
    value: str
    kind: Literal["state"] = "state"


_LINE = TypeAdapter[Any](
    Annotated[_Header | _MessageLine | _EventLine | _StateLine, Field(discriminator="kind")]
)


def dump_snapshot(snapshot: SessionSnapshot) -> str:
    """The session as JSONL text, one value a line, ending in a newline."""
    info = snapshot.info
    header = _Header(
        session_id=info.session_id,
        title=info.title,
        created_at=info.created_at,
        updated_at=info.updated_at,
        usage=info.usage,
        leaf=info.leaf,
    )
    lines = [_LINE.dump_json(header).decode()]
    lines.extend(
        _LINE.dump_json(_MessageLine(message=e.message, id=e.id, parent=e.parent_id, files=e.files)).decode()
        for e in snapshot.entries
    )
    lines.extend(_LINE.dump_json(_EventLine(seq=s, event=e)).decode() for s, e in snapshot.events)
    lines.extend(
        _LINE.dump_json(_StateLine(name=n, value=v)).decode() for n, v in sorted(snapshot.state.items())
    )
    return "\n".join(lines) + "\n"


def load_snapshot(text: str) -> SessionSnapshot:
    """A session back from ``dump_snapshot``'s text; the agent id is left empty for the importer to fill.

    Raises:
        InvalidInput: a line is not a session value, the header is missing or repeated, event seqs do
            not increase, or an entry's id does not increase or names a parent that is not before it.
            Import fails whole rather than keep part of a session.
    """
    header: _Header | None = None
    entries: list[Entry] = []
    events: list[tuple[int, Event]] = []
    state: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = _LINE.validate_json(line)
        except ValidationError as exc:
            raise InvalidInput(f"session JSONL line {number} is not a session value: {exc}") from None
        if isinstance(value, _Header):
            if header is not None or number != 1:
                raise InvalidInput(
                    f"session JSONL line {number}: the session header must be the first line only"
                )
            if value.format > FORMAT:
                raise InvalidInput(f"session JSONL format {value.format} is newer than this steadyloop reads")
            header = value
        elif header is None:
            raise InvalidInput("session JSONL must start with its session header")
        elif isinstance(value, _MessageLine):
            entries.append(_entry(value, entries, number))
        elif isinstance(value, _StateLine):
            state[value.name] = value.value
        else:
            if value.seq <= (events[-1][0] if events else 0):
                raise InvalidInput(f"session JSONL line {number}: event seq {value.seq} does not increase")
            events.append((value.seq, value.event))
    if header is None:
        raise InvalidInput("session JSONL is empty")
    info = SessionInfo(
        session_id=header.session_id,
        agent_id="",
        title=header.title,
        created_at=header.created_at,
        updated_at=header.updated_at,
        usage=header.usage,
        leaf=_leaf(header, entries),
    )
    return SessionSnapshot(info, entries, events, state)


def _entry(line: _MessageLine, before: list[Entry], number: int) -> Entry:
    last = entry_position(before[-1].id) if before else 0
    if line.id is None:  # format 2: one straight line
        return Entry(str(last + 1), before[-1].id if before else None, line.message, line.files)
    try:
        position = entry_position(line.id)
        parent = entry_position(line.parent) if line.parent is not None else None
    except InvalidInput as exc:
        raise InvalidInput(f"session JSONL line {number}: {exc}") from None
    if position <= last or (parent is not None and parent >= position):
        raise InvalidInput(f"session JSONL line {number}: entry {line.id} is out of order")
    return Entry(str(position), str(parent) if parent is not None else None, line.message, line.files)


def _leaf(header: _Header, entries: list[Entry]) -> str | None:
    if header.format < 3:
        return entries[-1].id if entries else None
    if header.leaf is not None and not any(e.id == header.leaf for e in entries):
        return entries[-1].id if entries else None  # trimmed away, or never there: the newest
    return header.leaf
