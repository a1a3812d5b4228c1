"""The default ``SessionStore``: one SQLite file, written from one worker thread.

Durability: the database runs in WAL mode with ``synchronous=NORMAL`` by default. A committed write is in
the WAL before the call returns, so killing the process (SIGKILL, OOM, a crash) loses nothing committed
and the file always opens consistent; ``tests/sessions/test_crash.py`` kills a writer many times to hold
that. What NORMAL gives up is the last few commits on power loss or an OS crash, because the WAL is
synced only at checkpoints; the file still opens consistent and the event seq continues after what
survived. Pass ``synchronous="FULL"`` to sync every commit when that matters more than write speed.

Every method's work is one transaction, run on the store's single worker thread, which owns the only
connection; the event loop never waits on disk. The seq of a new event is read from the record's tail in
the same transaction that inserts it, so after any crash the next event follows the last one actually
written, and two processes sharing the file cannot hand out the same seq. The schema and its numbered
migrations live in ``_schema``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar

from ..context.branches import BranchFiles, Entry
from ..errors import InvalidInput
from ..events import Event, event_to_json
from ..messages import Message, message_to_json
from ..usage import Usage
from ._common import (
    StoreShortcuts,
    chain,
    check_ids,
    entries_of,
    events_of,
    export_session,
    import_rows,
    messages_of,
    not_found,
    path_depth,
    position_of,
)
from ._schema import (
    INFO_QUERY,
    LEAF_QUERY,
    PATH_QUERY,
    delete_session,
    files_to_json,
    info_of,
    migrate,
    transaction,
    usage_of,
    usage_values,
)
from .store import (
    ROOT,
    SessionConfig,
    SessionInfo,
    SessionUsage,
    StoreUnavailable,
    check_id,
    new_session_id,
)

__all__ = ["SQLiteSessionStore", "default_session_path"]

_T = TypeVar("_T")


def default_session_path() -> Path:
    """Where the store lives unless told otherwise.

    ``$STEADYLOOP_HOME/sessions.db`` when that is set, else ``sessions.db`` in steadyloop's folder of the
    platform's data directory (``$XDG_DATA_HOME`` or ``~/.local/share`` on Linux, ``~/Library/Application
    Support`` on macOS, ``%LOCALAPPDATA%`` on Windows).
    """
    home = os.environ.get("STEADYLOOP_HOME")
    if home:
        return Path(home).expanduser() / "sessions.db"
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        # The XDG spec says a relative value is invalid and to be ignored.
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "steadyloop" / "sessions.db"


class SQLiteSessionStore(StoreShortcuts):
    """A ``SessionStore`` in one SQLite file (WAL).

    The file (and SQLite's -wal and -shm beside it) is 0600, and any folder the store creates for it is
    0700; a folder that already existed is left as its owner set it. Nothing touches the disk until the
    first call. Close the store (or use ``async with``) to stop its thread.

    Args:
        path: the database file; ``default_session_path()`` when omitted.
        config: lifecycle limits.
        clock: seconds since the epoch; injectable so tests can move time.
        synchronous: ``"NORMAL"`` (survives any process death) or ``"FULL"`` (also survives power loss).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        config: SessionConfig | None = None,
        clock: Callable[[], float] = time.time,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise InvalidInput(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = Path(path) if path is not None else default_session_path()
        self._config = config or SessionConfig()
        self._clock = clock
        self._synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="steadyloop-sessions")

    async def __aenter__(self) -> SQLiteSessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the worker thread -------------------------------------------------------------------------

    async def _call(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._closed:
            raise InvalidInput("the session store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._worker, self._run, job)

    def _run(self, job: Callable[[sqlite3.Connection], _T]) -> _T:
        if self._conn is None:
            try:
                self._conn = self._open()
            except (OSError, UnicodeError) as exc:
                # A directory, a path the OS cannot name (a lone surrogate), no permission. A file that is no
                # database, or a failing migration, is SQLite's error and says so itself.
                raise StoreUnavailable(
                    f"the session file {str(self.path)!r} cannot be opened: {type(exc).__name__}: {exc}"
                ) from None
        return job(self._conn)

    def _open(self) -> sqlite3.Connection:
        folder = self.path.parent
        missing = [p for p in (folder, *folder.parents) if not p.exists()]
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for created in missing:
            os.chmod(created, 0o700)  # mkdir's mode passes through the umask; ours is meant exactly
        # SQLite gives its -wal and -shm files the mode of the database file, so creating that one 0600
        # before SQLite sees it covers all three without touching the process-wide umask.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(self.path, 0o600)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(f"{self.path}{suffix}", 0o600)
        return conn

    # -- inside a transaction, on the worker -------------------------------------------------------

    def _find(
        self, conn: sqlite3.Connection, session_id: str, agent_id: str, now: float
    ) -> sqlite3.Row | None:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None or row["agent_id"] != agent_id:
            return None
        if self._config.expired(row["created_at"], row["updated_at"], now):
            delete_session(conn, session_id)
            return None
        return row

    def _owned(self, conn: sqlite3.Connection, session_id: str, agent_id: str, now: float) -> sqlite3.Row:
        row = self._find(conn, session_id, agent_id, now)
        if row is None:
            raise not_found(session_id, agent_id)
        return row

    def _trim(self, conn: sqlite3.Connection, session_id: str) -> None:
        cap = self._config.max_history_entries
        if cap is not None:
            conn.execute(
                "DELETE FROM messages WHERE session_id = ? AND pos <= "
                "(SELECT MAX(pos) FROM messages WHERE session_id = ?) - ?",
                (session_id, session_id, cap),
            )

    # -- the protocol ------------------------------------------------------------------------------

    async def create(
        self, agent_id: str, *, title: str | None = None, session_id: str | None = None
    ) -> SessionInfo:
        check_id(agent_id, "agent_id")
        sid = check_id(session_id, "session_id") if session_id is not None else new_session_id()
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionInfo:
            with transaction(conn):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
                    raise InvalidInput(f"session id {sid!r} is already in use")
                conn.execute(
                    "INSERT INTO sessions (id, agent_id, title, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (sid, agent_id, title, now, now),
                )
                return _info(conn, sid)

        return await self._call(job)

    async def get(self, session_id: str, *, agent_id: str) -> SessionInfo | None:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionInfo | None:
            with transaction(conn):
                row = self._find(conn, session_id, agent_id, now)
                return None if row is None else _info(conn, session_id)

        return await self._call(job)

    async def list(self, agent_id: str) -> builtins.list[SessionInfo]:
        check_id(agent_id, "agent_id")
        now = self._clock()

        def job(conn: sqlite3.Connection) -> builtins.list[SessionInfo]:
            with transaction(conn):
                rows = conn.execute(
                    INFO_QUERY + " WHERE s.agent_id = ? ORDER BY s.updated_at DESC, s.created_at DESC",
                    (agent_id,),
                ).fetchall()
                live = []
                for row in rows:
                    if self._config.expired(row["created_at"], row["updated_at"], now):
                        delete_session(conn, row["id"])
                    else:
                        live.append(info_of(row))
                return live

        return await self._call(job)

    async def set_title(self, session_id: str, title: str | None, *, agent_id: str) -> None:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

        await self._call(job)

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        check_ids(session_id, agent_id)
        bodies = [
            message_to_json(m) for m in messages
        ]  # serialised here, so a bad value fails before any write
        now = self._clock()

        def job(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                self._insert(conn, session_id, [(body, None) for body in bodies], _leaf(conn, session_id))
                conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))

        await self._call(job)

    def _insert(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        rows: Sequence[tuple[str, str | None]],
        parent: int,
    ) -> int:
        """Insert (body, files) rows as a chain under ``parent`` (``ROOT``: none), the leaf moved to the
        last, then trim; returns the last position."""
        (last,) = conn.execute(
            "SELECT COALESCE(MAX(pos), 0) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        chained = chain(rows, last, parent)
        conn.executemany(
            "INSERT INTO messages (session_id, pos, body, parent, files) VALUES (?, ?, ?, ?, ?)",
            [(session_id, pos, body, up, files) for pos, up, (body, files) in chained],
        )
        if chained:
            parent = chained[-1][0]
            conn.execute("UPDATE sessions SET leaf = ? WHERE id = ?", (parent, session_id))
        self._trim(conn, session_id)
        return parent

    async def load_messages(
        self, session_id: str, *, agent_id: str, limit: int | None = None
    ) -> builtins.list[Message]:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> builtins.list[str]:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                leaf = _leaf(conn, session_id)
                depth = path_depth(limit)
                if depth == 0 or leaf == ROOT:
                    return []
                rows = conn.execute(PATH_QUERY, (session_id, leaf, session_id, depth)).fetchall()
                return [row["body"] for row in rows]

        return messages_of(await self._call(job))

    async def append_entry(
        self,
        session_id: str,
        message: Message,
        *,
        agent_id: str,
        parent: str | None,
        files: BranchFiles | None = None,
    ) -> str:
        check_ids(session_id, agent_id)
        at = position_of(parent)
        body = message_to_json(message)
        extra = files_to_json(files)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                _existing(conn, session_id, at)
                position = self._insert(conn, session_id, [(body, extra)], at)
                conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
                return position

        return str(await self._call(job))

    async def load_entries(self, session_id: str, *, agent_id: str) -> builtins.list[Entry]:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> builtins.list[sqlite3.Row]:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                return conn.execute(
                    "SELECT pos, parent, body, files FROM messages WHERE session_id = ? ORDER BY pos",
                    (session_id,),
                ).fetchall()

        return entries_of(await self._call(job))

    async def set_leaf(self, session_id: str, entry_id: str | None, *, agent_id: str) -> None:
        check_ids(session_id, agent_id)
        at = position_of(entry_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                _existing(conn, session_id, at)
                conn.execute(
                    "UPDATE sessions SET leaf = ?, updated_at = ? WHERE id = ?", (at, now, session_id)
                )

        await self._call(job)

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        check_ids(session_id, agent_id)
        bodies = [event_to_json(e) for e in events]
        now = self._clock()

        def job(conn: sqlite3.Connection) -> int:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                (last,) = conn.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,)
                ).fetchone()
                if not bodies:
                    return int(last)
                conn.executemany(
                    "INSERT INTO events (session_id, seq, body) VALUES (?, ?, ?)",
                    [(session_id, last + i, body) for i, body in enumerate(bodies, 1)],
                )
                conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
                return int(last) + len(bodies)

        return await self._call(job)

    async def load_events(
        self, session_id: str, *, agent_id: str, after_seq: int = 0
    ) -> builtins.list[tuple[int, Event]]:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> builtins.list[tuple[int, str]]:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                rows = conn.execute(
                    "SELECT seq, body FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
                    (session_id, after_seq),
                ).fetchall()
                return [(row["seq"], row["body"]) for row in rows]

        return events_of(await self._call(job))

    async def record_usage(
        self, session_id: str, usage: Usage, *, agent_id: str, turns: int = 0
    ) -> SessionUsage:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> SessionUsage:
            with transaction(conn):
                total = usage_of(self._owned(conn, session_id, agent_id, now)).add(usage, turns=turns)
                conn.execute(
                    "UPDATE sessions SET prompt_tokens = ?, completion_tokens = ?, cached_tokens = ?, "
                    "reasoning_tokens = ?, turns = ?, runs = ?, updated_at = ? WHERE id = ?",
                    (*usage_values(total), now, session_id),
                )
                return total

        return await self._call(job)

    async def save_state(self, session_id: str, name: str, value: str, *, agent_id: str) -> None:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> None:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                conn.execute(
                    "INSERT INTO state (session_id, name, body) VALUES (?, ?, ?) "
                    "ON CONFLICT (session_id, name) DO UPDATE SET body = excluded.body",
                    (session_id, name, value),
                )

        await self._call(job)

    async def load_state(self, session_id: str, name: str, *, agent_id: str) -> str | None:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> str | None:
            with transaction(conn):
                self._owned(conn, session_id, agent_id, now)
                row = conn.execute(
                    "SELECT body FROM state WHERE session_id = ? AND name = ?", (session_id, name)
                ).fetchone()
                return None if row is None else str(row["body"])

        return await self._call(job)

    async def _all_state(self, session_id: str) -> dict[str, str]:
        def job(conn: sqlite3.Connection) -> dict[str, str]:
            rows = conn.execute("SELECT name, body FROM state WHERE session_id = ?", (session_id,))
            return {str(row["name"]): str(row["body"]) for row in rows.fetchall()}

        return await self._call(job)

    async def delete(self, session_id: str, *, agent_id: str) -> bool:
        check_ids(session_id, agent_id)
        now = self._clock()

        def job(conn: sqlite3.Connection) -> bool:
            with transaction(conn):
                if self._find(conn, session_id, agent_id, now) is None:
                    return False
                delete_session(conn, session_id)
                return True

        return await self._call(job)

    async def export_jsonl(self, session_id: str, *, agent_id: str) -> str:
        return await export_session(self, session_id, agent_id=agent_id, all_state=self._all_state)

    async def import_jsonl(self, text: str, *, agent_id: str, session_id: str | None = None) -> SessionInfo:
        rows = import_rows(
            text, agent_id=agent_id, session_id=session_id, cap=self._config.max_history_entries
        )
        sid = rows.session_id

        def job(conn: sqlite3.Connection) -> SessionInfo:
            with transaction(conn):
                if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
                    raise InvalidInput(f"session id {sid!r} is already in use")
                conn.execute(
                    "INSERT INTO sessions (id, agent_id, title, created_at, updated_at, prompt_tokens, "
                    "completion_tokens, cached_tokens, reasoning_tokens, turns, runs, leaf) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows.session,
                )
                conn.executemany(
                    "INSERT INTO messages (session_id, pos, body, parent, files) VALUES (?, ?, ?, ?, ?)",
                    rows.messages,
                )
                conn.executemany("INSERT INTO events (session_id, seq, body) VALUES (?, ?, ?)", rows.events)
                conn.executemany("INSERT INTO state (session_id, name, body) VALUES (?, ?, ?)", rows.state)
                return _info(conn, sid)

        return await self._call(job)

    async def close(self) -> None:
        """Close the connection and stop the worker thread; calls after this raise ``InvalidInput``."""
        if self._closed:
            return
        self._closed = True

        def job() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, job)
        finally:
            self._worker.shutdown(wait=False)


def _leaf(conn: sqlite3.Connection, session_id: str) -> int:
    """The position the session continues from (``ROOT`` before any entry)."""
    (leaf,) = conn.execute(LEAF_QUERY, (session_id,)).fetchone()
    return int(leaf)


def _existing(conn: sqlite3.Connection, session_id: str, position: int) -> None:
    if position == ROOT:
        return
    found = conn.execute(
        "SELECT 1 FROM messages WHERE session_id = ? AND pos = ?", (session_id, position)
    ).fetchone()
    if found is None:
        raise InvalidInput(f"session {session_id!r} has no entry {position}")


def _info(conn: sqlite3.Connection, session_id: str) -> SessionInfo:
    # Counting messages and reading the event tail costs a scan, so only the calls that return an info pay it.
    return info_of(conn.execute(INFO_QUERY + " WHERE s.id = ?", (session_id,)).fetchone())
