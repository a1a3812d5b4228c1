"""Two durable nodes started together on a new database both start: every table a node uses (the sessions',
the nodes' beats, the orders') is made by numbered migrations under one advisory lock, where the durable
tables were made by each node unlocked and one node could fail on the other's half-made table. The
database says which schema version it has, and a node refuses a schema newer than it knows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from steadyloop.sessions._pg_schema import MIGRATIONS
from steadyloop.testing.server import ScriptedServer

from ._two_nodes import start_node, stop
from .conftest import free_port

pytest.importorskip("dbos")

ROUNDS = 3


async def test_two_durable_nodes_started_together_on_a_new_database_both_start(
    tmp_path: Path, new_postgres_database: Callable[[], str]
) -> None:
    async with ScriptedServer() as model:
        for round_ in range(ROUNDS):
            store = new_postgres_database()
            ledger = tmp_path / f"ledger{round_}"
            ledger.mkdir()
            both = await asyncio.gather(
                *(
                    start_node(model.base_url, store, ledger, free_port(), name, free_port())
                    for name in ("node-a", "node-b")
                ),
                return_exceptions=True,
            )
            await stop([node for node in both if not isinstance(node, BaseException)])
            failed = [str(node) for node in both if isinstance(node, BaseException)]
            assert not failed, failed[0][-3000:]
            with psycopg.connect(store) as conn:
                versions = [row[0] for row in conn.execute("SELECT version FROM steadyloop.migrations")]
            assert versions == list(range(1, len(MIGRATIONS) + 1))

        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute("INSERT INTO steadyloop.migrations (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
        with pytest.raises(AssertionError, match="newer than this steadyloop"):
            await start_node(model.base_url, store, tmp_path / "ledger0", free_port(), "node-c", free_port())
