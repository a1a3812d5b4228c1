"""The PostgreSQL schema of the session store, as numbered migrations (internal).

The tables mirror the SQLite store's after its migrations (``_schema``), in a schema of their own
(``steadyloop``) so they never meet another application's tables in a shared database. The table
``steadyloop.migrations`` says how many steps have run; each step runs in the same transaction as the
bump to its number, under an advisory lock, so two nodes starting on a fresh database run it once.
"""

from __future__ import annotations

from typing import LiteralString

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from ..errors import InvalidInput

__all__ = ["INFO_QUERY", "LEAF_QUERY", "MIGRATIONS", "PATH_QUERY", "migrate"]

#: Any 64-bit number the application keeps to itself: the advisory lock that serialises migrations.
_MIGRATION_LOCK = 0x5EAD_1007

#: The schema, one migration per entry, in order; never edit one that shipped, append a new one.
MIGRATIONS: list[LiteralString] = [
    """
    CREATE TABLE steadyloop.sessions (
        id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        title TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        prompt_tokens BIGINT NOT NULL DEFAULT 0,
        completion_tokens BIGINT NOT NULL DEFAULT 0,
        cached_tokens BIGINT NOT NULL DEFAULT 0,
        reasoning_tokens BIGINT NOT NULL DEFAULT 0,
        turns BIGINT NOT NULL DEFAULT 0,
        runs BIGINT NOT NULL DEFAULT 0,
        leaf BIGINT
    );
    CREATE INDEX sessions_by_agent ON steadyloop.sessions (agent_id, updated_at);
    CREATE TABLE steadyloop.messages (
        session_id TEXT NOT NULL REFERENCES steadyloop.sessions (id) ON DELETE CASCADE,
        pos BIGINT NOT NULL,
        body TEXT NOT NULL,
        parent BIGINT,
        files TEXT,
        PRIMARY KEY (session_id, pos)
    );
    CREATE TABLE steadyloop.events (
        session_id TEXT NOT NULL REFERENCES steadyloop.sessions (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE steadyloop.state (
        session_id TEXT NOT NULL REFERENCES steadyloop.sessions (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, name)
    );
    """,
    # The server's nodes and the orders they pass each other (``server/nodes.py``, ``server/orders.py``).
    # ``IF NOT EXISTS``: servers before this migration made the first two tables themselves, unlocked.
    """
    CREATE TABLE IF NOT EXISTS steadyloop.durable_nodes (
        node TEXT PRIMARY KEY,
        beat TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    ALTER TABLE steadyloop.durable_nodes ADD COLUMN IF NOT EXISTS instance TEXT NOT NULL DEFAULT '';
    CREATE TABLE IF NOT EXISTS steadyloop.durable_orders (
        id BIGSERIAL PRIMARY KEY,
        session_id TEXT NOT NULL,
        principal TEXT NOT NULL,
        body TEXT NOT NULL,
        answer TEXT,
        made TIMESTAMPTZ NOT NULL DEFAULT now()
    );
    """,
]

#: A session row with its message count, last event seq and leaf position; append a WHERE clause.
INFO_QUERY = """
    SELECT s.*,
        (SELECT COUNT(*) FROM steadyloop.messages m WHERE m.session_id = s.id) AS message_count,
        (SELECT COALESCE(MAX(seq), 0) FROM steadyloop.events e WHERE e.session_id = s.id) AS last_event_seq,
        COALESCE(s.leaf, (SELECT MAX(pos) FROM steadyloop.messages m WHERE m.session_id = s.id), 0)
            AS leaf_pos
    FROM steadyloop.sessions s
"""

#: The leaf's position of one session.
LEAF_QUERY = """
    SELECT COALESCE(s.leaf, (SELECT MAX(pos) FROM steadyloop.messages m WHERE m.session_id = s.id), 0)
        AS leaf
    FROM steadyloop.sessions s WHERE s.id = %(sid)s
"""

#: The path from the root to a leaf, oldest first, at most ``depth`` entries.
PATH_QUERY = """
    WITH RECURSIVE path (pos, parent, body, depth) AS (
        SELECT pos, parent, body, 1 FROM steadyloop.messages WHERE session_id = %(sid)s AND pos = %(leaf)s
        UNION ALL
        SELECT m.pos, m.parent, m.body, path.depth + 1
        FROM steadyloop.messages m JOIN path ON m.pos = path.parent
        WHERE m.session_id = %(sid)s AND m.pos < path.pos AND path.depth < %(depth)s
    )
    SELECT body FROM path ORDER BY depth DESC
"""


async def migrate(conn: AsyncConnection[DictRow]) -> None:
    """Run the migrations the database has not had yet (``conn`` in autocommit mode).

    Raises:
        InvalidInput: the database was written by a newer steadyloop with migrations this one does not know.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute("CREATE SCHEMA IF NOT EXISTS steadyloop")
        await conn.execute("CREATE TABLE IF NOT EXISTS steadyloop.migrations (version INTEGER NOT NULL)")
        row = await (
            await conn.execute("SELECT MAX(version) AS version FROM steadyloop.migrations")
        ).fetchone()
        version = int(row["version"] or 0) if row is not None else 0
        if version > len(MIGRATIONS):
            raise InvalidInput(
                f"session database schema {version} is newer than this steadyloop ({len(MIGRATIONS)})"
            )
        for number in range(version + 1, len(MIGRATIONS) + 1):
            # One transaction for all the steps still to run: a failure leaves the database as it was.
            await conn.execute(MIGRATIONS[number - 1])
            await conn.execute("INSERT INTO steadyloop.migrations (version) VALUES (%s)", (number,))
