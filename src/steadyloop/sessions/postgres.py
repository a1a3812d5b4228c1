"""A ``SessionStore`` on PostgreSQL, shared by every node that points at the same database (public).

Install with ``pip install 'steadyloop[postgres]'`` (psycopg 3 and its pool). The store behaves as the
SQLite one does, call for call; what it adds is that many processes on many machines can write the same
sessions at once, and learn of each other's writes.

Concurrent writers: every write that numbers something (an event's seq, an entry's position) first locks
its session's row (``SELECT ... FOR UPDATE``), then reads the tail and inserts after it in the same
transaction. Two nodes appending to one session therefore take turns: seqs come out strictly increasing
and unique, and one write's messages are never interleaved with another's. A transaction that still loses
a race (a deadlock, a serialization failure, two creates of one id) is retried from the start, a few
times, before ``StoreUnavailable`` is raised; the caller never sees the race itself.

The live feed: each ``append_events`` sends ``NOTIFY`` on the store's channel with ``"<session> <seq>"``
(the last seq it wrote) in the same transaction, so the notice goes out when, and only if, the events are
committed. ``subscribe`` listens on one connection of its own and calls back with (session, seq); a reader
then takes the events from the table, after the last seq it has, so a notice lost or merged never loses an
event. After the listening connection drops, it reconnects and calls back with ``(None, 0)``: anything may
have been missed, and every reader reads again from its last seq. ``follow`` uses this by itself. While
the database stays away or refuses, the pauses between attempts grow to ``LISTEN_MAX_PAUSE_S``, and the
log has one line per change (lost, refused and why, back), not one per attempt.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..context.branches import BranchFiles, Entry
from ..errors import InvalidInput
from ..events import Event, event_to_json
from ..messages import Message, message_to_json
from ..usage import Usage
from ._common import (
    chain,
    entries_of,
    events_of,
    export_session,
    import_rows,
    messages_of,
    not_found,
    path_depth,
    position_of,
)
from ._common import check_ids as _check
from ._schema import files_to_json, info_of, usage_of, usage_values
from .store import (
    ROOT,
    SessionConfig,
    SessionInfo,
    SessionUsage,
    StoreUnavailable,
    check_id,
    new_session_id,
)

try:
    import psycopg
    from psycopg import AsyncConnection, errors
    from psycopg.rows import DictRow
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the PostgreSQL session store needs psycopg: pip install 'steadyloop[postgres]'"
    ) from exc

from ._pg_conninfo import check_conninfo
from ._pg_listen import LISTEN_MAX_PAUSE_S as LISTEN_MAX_PAUSE_S
from ._pg_listen import Appended as Appended
from ._pg_listen import AppendListener
from ._pg_pool import PoolWatch, watched_pool
from ._pg_reach import first_connection, read_failure, refusal, shown_url
from ._pg_schema import INFO_QUERY, LEAF_QUERY, PATH_QUERY, migrate

__all__ = ["PostgresSessionStore", "read_failure"]
# LISTEN_MAX_PAUSE_S and Appended live in _pg_listen now; imported `X as X` so they stay importable here.

log = logging.getLogger("steadyloop.sessions.postgres")
_T = TypeVar("_T")
Conn = AsyncConnection[DictRow]
#: How many times a transaction that lost a race is run again before the store gives up.
RACE_RETRIES = 8
_CHANNEL = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_LOST_RACE = (errors.SerializationFailure, errors.DeadlockDetected, errors.UniqueViolation)


class PostgresSessionStore:
    """A ``SessionStore`` in a PostgreSQL database (schema ``steadyloop``, created on first use).

    Nothing reaches the server until the first call; close the store (or use ``async with``) to release
    its connections.

    Args:
        url: a libpq URL or conninfo, ``postgresql://user:password@host:5432/dbname``.
        config: lifecycle limits.
        clock: seconds since the epoch; injectable so tests can move time.
        pool_size: connections kept at most (the listener's own connection is extra).
        channel: the ``NOTIFY`` channel appends are announced on.
        connect_timeout: seconds to wait for a connection before ``StoreUnavailable``. A refusal no
            wait would change (a wrong password, a role or database that does not exist, SSL or
            ``pg_hba.conf`` rules) is an ``InvalidInput`` instead, with libpq's reason: at the first call,
            and at any later one as soon as the pool meets it (the password changed while the store is
            open, say).
    """

    def __init__(
        self,
        url: str,
        *,
        config: SessionConfig | None = None,
        clock: Callable[[], float] = time.time,
        pool_size: int = 10,
        channel: str = "steadyloop_events",
        connect_timeout: float = 30.0,
    ) -> None:
        if _CHANNEL.fullmatch(channel) is None:
            raise InvalidInput(f"channel must be a lower-case SQL identifier, got {channel!r}")
        if pool_size < 1:
            raise InvalidInput(f"pool_size must be at least 1, got {pool_size!r}")
        # Checked here, not first by the pool: it retries a URL it cannot use until the connect timeout.
        check_conninfo(url)
        self.url = url
        self._config = config or SessionConfig()
        self._clock = clock
        self._pool_size = pool_size
        self._channel = channel
        self._timeout = connect_timeout
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._watch = PoolWatch(url, connect_timeout)
        self._opening: asyncio.Lock | None = None
        self._closed = False
        self._listener = AppendListener(url, channel, connect_timeout)

    async def __aenter__(self) -> PostgresSessionStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- connections ---------------------------------------------------------------------------------

    async def _open(self) -> AsyncConnectionPool[Conn]:
        if self._closed:
            raise InvalidInput("the session store is closed")
        if self._pool is not None:
            return self._pool
        self._opening = self._opening or asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                # One connection first, by hand: the pool would retry a refusal no retry can change
                # (a wrong password) until the timeout, and drop libpq's reason.
                first = await first_connection(self.url, self._timeout)
                try:
                    async with first:
                        await migrate(first)
                except psycopg.Error as exc:
                    raise self._failed(exc) from None
                pool = watched_pool(self._watch, max_size=self._pool_size)
                try:
                    await self._watch.unless_refused(pool.open(wait=True, timeout=self._timeout))
                except (psycopg.Error, PoolTimeout) as exc:
                    await pool.close()
                    raise StoreUnavailable(
                        f"the session database at {shown_url(self.url)} is unavailable: {exc}"
                    ) from None
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
        return self._pool

    async def _tx(self, job: Callable[[Conn], Awaitable[_T]]) -> _T:
        """``job`` in one transaction, run again from the start when it loses a race."""
        pool = await self._open()
        for attempt in range(1, RACE_RETRIES + 1):
            try:
                async with self._watch.connection(pool) as conn, conn.transaction():
                    return await job(conn)
            except _LOST_RACE as exc:
                if attempt == RACE_RETRIES:
                    raise StoreUnavailable(
                        f"a session write kept losing races after {attempt} tries: {exc}"
                    ) from None
                await asyncio.sleep(random.uniform(0, 0.005 * attempt))  # let the winner finish
            except PoolTimeout as exc:
                raise StoreUnavailable(
                    f"the session database at {shown_url(self.url)} is unavailable: {exc}"
                ) from None
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError) or read_failure(exc, self.url).refused:
                    raise self._failed(exc) from None
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(self, exc: psycopg.Error) -> InvalidInput | StoreUnavailable:
        """The typed error for a failure talking to the database: a refusal no retry changes (by its
        SQLSTATE: the role may not use the store's schema, say) is ``InvalidInput``; the rest may pass."""
        failure = read_failure(exc, self.url)
        if failure.refused:
            return refusal(self.url, failure, "the store its tables")
        return StoreUnavailable(
            f"the session database at {shown_url(self.url)} is unavailable: {failure.reason}"
        )

    # -- inside a transaction ----------------------------------------------------------------------

    async def _find(
        self, conn: Conn, session_id: str, agent_id: str, now: float, *, lock: bool = False
    ) -> DictRow | None:
        query = "SELECT * FROM steadyloop.sessions WHERE id = %s" + (" FOR UPDATE" if lock else "")
        row = await (await conn.execute(query, (session_id,))).fetchone()
        if row is None or row["agent_id"] != agent_id:
            return None
        if self._config.expired(row["created_at"], row["updated_at"], now):
            await conn.execute("DELETE FROM steadyloop.sessions WHERE id = %s", (session_id,))
            return None
        return row

    async def _owned(
        self, conn: Conn, session_id: str, agent_id: str, now: float, *, lock: bool = False
    ) -> DictRow:
        row = await self._find(conn, session_id, agent_id, now, lock=lock)
        if row is None:
            raise not_found(session_id, agent_id)
        return row

    async def _insert(
        self, conn: Conn, session_id: str, rows: Sequence[tuple[str, str | None]], parent: int
    ) -> int:
        """Insert (body, files) rows as a chain under ``parent`` (``ROOT``: none), the leaf moved to the
        last, then trim; returns the last position. The caller holds the session's row lock."""
        last = await _scalar(
            conn,
            "SELECT COALESCE(MAX(pos), 0) AS n FROM steadyloop.messages WHERE session_id = %s",
            session_id,
        )
        chained = chain(rows, last, parent)
        if chained:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO steadyloop.messages (session_id, pos, body, parent, files) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [(session_id, pos, body, up, files) for pos, up, (body, files) in chained],
                )
            parent = chained[-1][0]
            await conn.execute("UPDATE steadyloop.sessions SET leaf = %s WHERE id = %s", (parent, session_id))
        cap = self._config.max_history_entries
        if cap is not None:
            await conn.execute(
                "DELETE FROM steadyloop.messages WHERE session_id = %s AND pos <= %s",
                (session_id, last + len(rows) - cap),
            )
        return parent

    # -- the protocol ------------------------------------------------------------------------------

    async def create(
        self, agent_id: str, *, title: str | None = None, session_id: str | None = None
    ) -> SessionInfo:
        check_id(agent_id, "agent_id")
        sid = check_id(session_id, "session_id") if session_id is not None else new_session_id()
        now = self._clock()

        async def job(conn: Conn) -> SessionInfo:
            if await (
                await conn.execute("SELECT 1 FROM steadyloop.sessions WHERE id = %s", (sid,))
            ).fetchone():
                raise InvalidInput(f"session id {sid!r} is already in use")
            await conn.execute(
                "INSERT INTO steadyloop.sessions (id, agent_id, title, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                (sid, agent_id, title, now, now),
            )
            return await _info(conn, sid)

        return await self._tx(job)

    async def get(self, session_id: str, *, agent_id: str) -> SessionInfo | None:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> SessionInfo | None:
            row = await self._find(conn, session_id, agent_id, now)
            return None if row is None else await _info(conn, session_id)

        return await self._tx(job)

    async def list(self, agent_id: str) -> builtins.list[SessionInfo]:
        check_id(agent_id, "agent_id")
        now = self._clock()

        async def job(conn: Conn) -> builtins.list[SessionInfo]:
            cursor = await conn.execute(
                INFO_QUERY + " WHERE s.agent_id = %s ORDER BY s.updated_at DESC, s.created_at DESC",
                (agent_id,),
            )
            live = []
            for row in await cursor.fetchall():
                if self._config.expired(row["created_at"], row["updated_at"], now):
                    await conn.execute("DELETE FROM steadyloop.sessions WHERE id = %s", (row["id"],))
                else:
                    live.append(info_of(row))
            return live

        return await self._tx(job)

    async def latest(self, agent_id: str) -> SessionInfo | None:
        infos = await self.list(agent_id)
        return infos[0] if infos else None

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        _check(session_id, agent_id)
        bodies = [message_to_json(m) for m in messages]  # serialised here: a bad value fails before any write
        now = self._clock()

        async def job(conn: Conn) -> None:
            await self._owned(conn, session_id, agent_id, now, lock=True)
            await self._insert(
                conn, session_id, [(body, None) for body in bodies], await _leaf(conn, session_id)
            )
            await conn.execute(
                "UPDATE steadyloop.sessions SET updated_at = %s WHERE id = %s", (now, session_id)
            )

        await self._tx(job)

    async def load_messages(
        self, session_id: str, *, agent_id: str, limit: int | None = None
    ) -> builtins.list[Message]:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> builtins.list[str]:
            await self._owned(conn, session_id, agent_id, now)
            leaf = await _leaf(conn, session_id)
            depth = path_depth(limit)
            if depth == 0 or leaf == ROOT:
                return []
            cursor = await conn.execute(PATH_QUERY, {"sid": session_id, "leaf": leaf, "depth": depth})
            return [row["body"] for row in await cursor.fetchall()]

        return messages_of(await self._tx(job))

    async def append_entry(
        self,
        session_id: str,
        message: Message,
        *,
        agent_id: str,
        parent: str | None,
        files: BranchFiles | None = None,
    ) -> str:
        _check(session_id, agent_id)
        at = position_of(parent)
        body = message_to_json(message)
        extra = files_to_json(files)
        now = self._clock()

        async def job(conn: Conn) -> int:
            await self._owned(conn, session_id, agent_id, now, lock=True)
            await _existing(conn, session_id, at)
            position = await self._insert(conn, session_id, [(body, extra)], at)
            await conn.execute(
                "UPDATE steadyloop.sessions SET updated_at = %s WHERE id = %s", (now, session_id)
            )
            return position

        return str(await self._tx(job))

    async def load_entries(self, session_id: str, *, agent_id: str) -> builtins.list[Entry]:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> builtins.list[DictRow]:
            await self._owned(conn, session_id, agent_id, now)
            cursor = await conn.execute(
                "SELECT pos, parent, body, files FROM steadyloop.messages WHERE session_id = %s ORDER BY pos",
                (session_id,),
            )
            return await cursor.fetchall()

        return entries_of(await self._tx(job))

    async def set_leaf(self, session_id: str, entry_id: str | None, *, agent_id: str) -> None:
        _check(session_id, agent_id)
        at = position_of(entry_id)
        now = self._clock()

        async def job(conn: Conn) -> None:
            await self._owned(conn, session_id, agent_id, now, lock=True)
            await _existing(conn, session_id, at)
            await conn.execute(
                "UPDATE steadyloop.sessions SET leaf = %s, updated_at = %s WHERE id = %s",
                (at, now, session_id),
            )

        await self._tx(job)

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        _check(session_id, agent_id)
        bodies = [event_to_json(e) for e in events]
        now = self._clock()

        async def job(conn: Conn) -> int:
            await self._owned(conn, session_id, agent_id, now, lock=True)
            last = await _scalar(
                conn,
                "SELECT COALESCE(MAX(seq), 0) AS n FROM steadyloop.events WHERE session_id = %s",
                session_id,
            )
            if not bodies:
                return last
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO steadyloop.events (session_id, seq, body) VALUES (%s, %s, %s)",
                    [(session_id, last + i, body) for i, body in enumerate(bodies, 1)],
                )
            await conn.execute(
                "UPDATE steadyloop.sessions SET updated_at = %s WHERE id = %s", (now, session_id)
            )
            # Delivered at commit, in commit order; a rolled-back write announces nothing.
            await conn.execute(
                "SELECT pg_notify(%s, %s)", (self._channel, f"{session_id} {last + len(bodies)}")
            )
            return last + len(bodies)

        return await self._tx(job)

    async def load_events(
        self, session_id: str, *, agent_id: str, after_seq: int = 0
    ) -> builtins.list[tuple[int, Event]]:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> builtins.list[tuple[int, str]]:
            await self._owned(conn, session_id, agent_id, now)
            cursor = await conn.execute(
                "SELECT seq, body FROM steadyloop.events WHERE session_id = %s AND seq > %s ORDER BY seq",
                (session_id, after_seq),
            )
            return [(int(row["seq"]), row["body"]) for row in await cursor.fetchall()]

        return events_of(await self._tx(job))

    async def record_usage(
        self, session_id: str, usage: Usage, *, agent_id: str, turns: int = 0
    ) -> SessionUsage:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> SessionUsage:
            row = await self._owned(conn, session_id, agent_id, now, lock=True)
            total = usage_of(row).add(usage, turns=turns)
            await conn.execute(
                "UPDATE steadyloop.sessions SET prompt_tokens = %s, completion_tokens = %s, cached_tokens = %s, "
                "reasoning_tokens = %s, turns = %s, runs = %s, updated_at = %s WHERE id = %s",
                (*usage_values(total), now, session_id),
            )
            return total

        return await self._tx(job)

    async def save_state(self, session_id: str, name: str, value: str, *, agent_id: str) -> None:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> None:
            await self._owned(conn, session_id, agent_id, now)
            await conn.execute(
                "INSERT INTO steadyloop.state (session_id, name, body) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id, name) DO UPDATE SET body = excluded.body",
                (session_id, name, value),
            )

        await self._tx(job)

    async def swap_state(
        self,
        session_id: str,
        name: str,
        value: str,
        *,
        agent_id: str,
        allow: Callable[[str | None], bool],
    ) -> tuple[bool, str | None]:
        """Write ``value`` if ``allow(current)`` says so, under the session row's lock: two processes
        swapping one session's state at once are served one after the other, the second seeing the
        first's value. Returns whether it wrote, and the value it found.

        Raises:
            SessionNotFound: no such session for ``agent_id``.
        """
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> tuple[bool, str | None]:
            await self._owned(conn, session_id, agent_id, now, lock=True)
            cursor = await conn.execute(
                "SELECT body FROM steadyloop.state WHERE session_id = %s AND name = %s", (session_id, name)
            )
            row = await cursor.fetchone()
            current = None if row is None else str(row["body"])
            if not allow(current):
                return False, current
            await conn.execute(
                "INSERT INTO steadyloop.state (session_id, name, body) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id, name) DO UPDATE SET body = excluded.body",
                (session_id, name, value),
            )
            return True, current

        return await self._tx(job)

    async def load_state(self, session_id: str, name: str, *, agent_id: str) -> str | None:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> str | None:
            await self._owned(conn, session_id, agent_id, now)
            cursor = await conn.execute(
                "SELECT body FROM steadyloop.state WHERE session_id = %s AND name = %s", (session_id, name)
            )
            row = await cursor.fetchone()
            return None if row is None else str(row["body"])

        return await self._tx(job)

    async def _all_state(self, session_id: str) -> dict[str, str]:
        async def job(conn: Conn) -> dict[str, str]:
            cursor = await conn.execute(
                "SELECT name, body FROM steadyloop.state WHERE session_id = %s", (session_id,)
            )
            return {str(row["name"]): str(row["body"]) for row in await cursor.fetchall()}

        return await self._tx(job)

    async def delete(self, session_id: str, *, agent_id: str) -> bool:
        _check(session_id, agent_id)
        now = self._clock()

        async def job(conn: Conn) -> bool:
            if await self._find(conn, session_id, agent_id, now, lock=True) is None:
                return False
            await conn.execute("DELETE FROM steadyloop.sessions WHERE id = %s", (session_id,))
            return True

        return await self._tx(job)

    async def export_jsonl(self, session_id: str, *, agent_id: str) -> str:
        return await export_session(self, session_id, agent_id=agent_id, all_state=self._all_state)

    async def import_jsonl(self, text: str, *, agent_id: str, session_id: str | None = None) -> SessionInfo:
        rows = import_rows(
            text, agent_id=agent_id, session_id=session_id, cap=self._config.max_history_entries
        )
        sid = rows.session_id

        async def job(conn: Conn) -> SessionInfo:
            if await (
                await conn.execute("SELECT 1 FROM steadyloop.sessions WHERE id = %s", (sid,))
            ).fetchone():
                raise InvalidInput(f"session id {sid!r} is already in use")
            await conn.execute(
                "INSERT INTO steadyloop.sessions (id, agent_id, title, created_at, updated_at, prompt_tokens, "
                "completion_tokens, cached_tokens, reasoning_tokens, turns, runs, leaf) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows.session,
            )
            async with conn.cursor() as cur:
                if rows.messages:
                    await cur.executemany(
                        "INSERT INTO steadyloop.messages (session_id, pos, body, parent, files) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        rows.messages,
                    )
                if rows.events:
                    await cur.executemany(
                        "INSERT INTO steadyloop.events (session_id, seq, body) VALUES (%s, %s, %s)",
                        rows.events,
                    )
                if rows.state:
                    await cur.executemany(
                        "INSERT INTO steadyloop.state (session_id, name, body) VALUES (%s, %s, %s)",
                        rows.state,
                    )
            return await _info(conn, sid)

        return await self._tx(job)

    # -- the live feed -------------------------------------------------------------------------------

    async def subscribe(self, on_appended: Appended) -> Callable[[], None]:
        """Call ``on_appended(session_id, last_seq)`` after each committed ``append_events``, from any
        process on this database; returns the function that stops it.

        Returns once the store is listening, so a reader that subscribes first and reads the record second
        misses nothing. ``on_appended(None, 0)`` means notices may have been missed (the listening
        connection was lost and is back): read again from the last seq you have.

        Raises:
            StoreUnavailable: the database could not be reached to listen.
        """
        await self._open()
        return await self._listener.subscribe(on_appended)

    async def close(self) -> None:
        """Stop listening and close every connection; calls after this raise ``InvalidInput``."""
        if self._closed:
            return
        self._closed = True
        await self._listener.close()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


async def _scalar(conn: Conn, query: Any, *params: object) -> int:
    row = await (await conn.execute(query, params)).fetchone()
    return int(row["n"]) if row is not None else 0


async def _leaf(conn: Conn, session_id: str) -> int:
    """The position the session continues from (``ROOT`` before any entry)."""
    row = await (await conn.execute(LEAF_QUERY, {"sid": session_id})).fetchone()
    return int(row["leaf"]) if row is not None else ROOT


async def _existing(conn: Conn, session_id: str, position: int) -> None:
    if position == ROOT:
        return
    cursor = await conn.execute(
        "SELECT 1 FROM steadyloop.messages WHERE session_id = %s AND pos = %s", (session_id, position)
    )
    if await cursor.fetchone() is None:
        raise InvalidInput(f"session {session_id!r} has no entry {position}")


async def _info(conn: Conn, session_id: str) -> SessionInfo:
    row = await (await conn.execute(INFO_QUERY + " WHERE s.id = %s", (session_id,))).fetchone()
    assert row is not None
    return info_of(row)
