"""A node's connection that hears orders (LISTEN) is cut by PostgreSQL while its run waits for an approval;
the decision posted to the other node meanwhile still reaches the run: the node listens again and takes
the orders posted while it was away."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg
import pytest

from ._two_nodes import Seen, asked, durable_nodes, follow, post, until

pytest.importorskip("dbos")

from steadyloop.server.orders import listener_name


async def listener(conn: psycopg.AsyncConnection[tuple[int]], node: str) -> int | None:
    """The pid of the node's order listener's backend, if it is connected."""
    cursor = await conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (listener_name(node),)
    )
    row = await cursor.fetchone()
    return None if row is None else int(row[0])


async def test_a_decision_posted_while_the_running_nodes_listener_was_cut_off_reaches_the_run(
    tmp_path: Path, postgres_url: str
) -> None:
    async with (
        durable_nodes(tmp_path, postgres_url, gate="gate") as nodes,
        await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin,
    ):
        on_a, on_b = nodes.clients
        sid = (await on_a.post("/sessions", json={"title": "a case"})).json()["id"]
        news = asyncio.Event()
        seen: Seen = []
        watcher = asyncio.create_task(follow(on_b, sid, seen, news))
        posted = asyncio.create_task(post(on_a, sid, 7))
        await until(lambda: bool(asked(seen)), news, 60)  # the stamp waits on node a
        cut = await listener(admin, "node-a")
        assert cut is not None
        await admin.execute("SELECT pg_terminate_backend(%s)", (cut,))
        # Posted at once: node a waits a beat before it listens again.
        allowed = await on_b.post(f"/sessions/{sid}/approvals/{asked(seen)[0]}", json={"decision": "allow"})
        assert allowed.status_code == 200, allowed.text
        await asyncio.wait_for(watcher, 120)
        await posted
        again = await listener(admin, "node-a")
    assert again is not None and again != cut, "node a listens again, on a new connection"
    assert json.loads(seen[-1][2])["outcome"] == "completed"
    stamps = [line[1:] for line in nodes.ran("stamp_visit")]
    assert stamps == [["node-a", "stamp_visit"]], "the allowed stamp ran on node a, where the run is"
