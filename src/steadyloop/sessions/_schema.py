"""The SQLite schema of the session store and the mapping of its rows (internal).

``MIGRATIONS`` is the schema as numbered steps; ``PRAGMA user_version`` says how many have run on a file,
and each step runs in the same transaction as the bump to its number, so a file is never half-migrated.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from ..context.branches import BranchFiles
from ..errors import InvalidInput
from .store import SessionInfo, SessionUsage

__all__ = [
    "INFO_QUERY",
    "LEAF_QUERY",
    "MIGRATIONS",
    "PATH_QUERY",
    "Row",
    "decode",
    "delete_session",
    "files_from_json",
    "files_to_json",
    "info_of",
    "migrate",
    "transaction",
    "usage_of",
    "usage_values",
]

log = logging.getLogger("steadyloop.sessions.sqlite")
_T = TypeVar("_T")


class Row(Protocol):
    """A row read by column name: SQLite's ``sqlite3.Row`` or PostgreSQL's dict rows."""

    def __getitem__(self, key: str, /) -> Any: ...


#: The schema, one migration per entry, in order; never edit one that shipped, append a new one.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        title TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens INTEGER NOT NULL DEFAULT 0,
        turns INTEGER NOT NULL DEFAULT 0,
        runs INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_at);
    CREATE TABLE messages (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        pos INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, pos)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    """,
    """
    CREATE TABLE state (
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, name)
    ) WITHOUT ROWID;
    """,
    # Sessions become trees: each message row an entry with a parent (NULL for a root) and, on a branch
    # summary, the files it carries; the session's leaf is the entry it continues from (NULL: the newest,
    # 0: before any). Rows written before this read as one straight line, each under the one before it.
    """
    ALTER TABLE messages ADD COLUMN parent INTEGER;
    ALTER TABLE messages ADD COLUMN files TEXT;
    UPDATE messages SET parent = (
        SELECT MAX(m.pos) FROM messages AS m WHERE m.session_id = messages.session_id AND m.pos < messages.pos
    );
    ALTER TABLE sessions ADD COLUMN leaf INTEGER;
    """,
]

#: A session row with its message count, last event seq and leaf position; append a WHERE clause.
INFO_QUERY = """
    SELECT s.*,
        (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) AS message_count,
        (SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.session_id = s.id) AS last_event_seq,
        COALESCE(s.leaf, (SELECT MAX(pos) FROM messages m WHERE m.session_id = s.id), 0) AS leaf_pos
    FROM sessions s
"""

#: The leaf's position of one session (bind the session id twice).
LEAF_QUERY = """
    SELECT COALESCE(s.leaf, (SELECT MAX(pos) FROM messages m WHERE m.session_id = s.id), 0)
    FROM sessions s WHERE s.id = ?
"""

#: The path from the root to a leaf, leaf first (bind session id, leaf position, session id, depth limit).
PATH_QUERY = """
    WITH RECURSIVE path (pos, parent, body, depth) AS (
        SELECT pos, parent, body, 1 FROM messages WHERE session_id = ? AND pos = ?
        UNION ALL
        SELECT m.pos, m.parent, m.body, path.depth + 1
        FROM messages m JOIN path ON m.pos = path.parent
        WHERE m.session_id = ? AND m.pos < path.pos AND path.depth < ?
    )
    SELECT body FROM path ORDER BY depth DESC
"""


def migrate(conn: sqlite3.Connection) -> None:
    """Run the migrations the file has not had yet.

    Raises:
        InvalidInput: the file was written by a newer steadyloop with migrations this one does not know.
    """
    with transaction(conn):
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > len(MIGRATIONS):
        raise InvalidInput(
            f"session database schema {version} is newer than this steadyloop ({len(MIGRATIONS)})"
        )
    for number in range(version + 1, len(MIGRATIONS) + 1):
        # A migration and its version bump land together or not at all. BEGIN IMMEDIATE and a re-read of
        # the version keep two processes opening a fresh file from both running it.
        try:
            conn.execute("BEGIN IMMEDIATE")
            (current,) = conn.execute("PRAGMA user_version").fetchone()
            if current >= number:
                conn.execute("COMMIT")
                continue
            for statement in _statements(MIGRATIONS[number - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _statements(script: str) -> Iterator[str]:
    # executescript would commit first; splitting on complete statements keeps the migration in our
    # transaction. sqlite3.complete_statement knows where a statement really ends (quotes, triggers).
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction, committed on success and rolled back on any error."""
    # IMMEDIATE takes the write lock up front, so a read that turns into an expiry delete, or a seq read
    # followed by its insert, is never overtaken by another process between the two.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # some errors end the transaction inside SQLite already
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def delete_session(conn: sqlite3.Connection, session_id: str) -> None:
    """Delete a session with its messages, events and state."""
    conn.execute("DELETE FROM state WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
    conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))


def usage_of(row: Row) -> SessionUsage:
    """The cumulative usage in a ``sessions`` row."""
    return SessionUsage(
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cached_tokens=row["cached_tokens"],
        reasoning_tokens=row["reasoning_tokens"],
        turns=row["turns"],
        runs=row["runs"],
    )


def usage_values(u: SessionUsage) -> tuple[int, int, int, int, int, int]:
    """The usage columns' values, in table order."""
    return (u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.reasoning_tokens, u.turns, u.runs)


def info_of(row: Row) -> SessionInfo:
    """The info of an ``INFO_QUERY`` row."""
    return SessionInfo(
        session_id=row["id"],
        agent_id=row["agent_id"],
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        usage=usage_of(row),
        message_count=row["message_count"],
        last_event_seq=row["last_event_seq"],
        leaf=str(row["leaf_pos"]) if row["leaf_pos"] else None,
    )


def decode(body: str, parse: Callable[[str], _T]) -> _T | None:
    """A stored value parsed, or ``None`` (logged) when this version cannot read it."""
    # A row a newer steadyloop wrote (an event type this version does not know) is skipped, not fatal:
    # the rest of the session stays readable.
    try:
        return parse(body)
    except (ValidationError, InvalidInput) as exc:
        log.warning("skipping a stored session value this steadyloop cannot read: %s", exc)
        return None


def files_to_json(files: BranchFiles | None) -> str | None:
    """The files a branch summary carries as stored (``None`` when it carries none)."""
    if files is None:
        return None
    return json.dumps({"read_files": list(files.read_files), "modified_files": list(files.modified_files)})


def files_from_json(text: str | None) -> BranchFiles | None:
    """Stored files read back; ``None`` when there are none or this version cannot read them."""
    if not text:
        return None
    try:
        data = json.loads(text)
        read = tuple(str(p) for p in data.get("read_files", ()))
        modified = tuple(str(p) for p in data.get("modified_files", ()))
    except (ValueError, AttributeError, TypeError):
        return None  # a files column this version cannot read: the entry is kept without it
    return BranchFiles(read, modified)
