"""A node's connection that hears orders (LISTEN) is cut by PostgreSQL while its run waits for an approval;
the decision posted to the other node meanwhile still reaches the run: the node listens again and takes
the orders posted while it was away."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2 as httpx
import psycopg
import pytest

from steadyloop.testing.server import ScriptedServer

from .conftest import free_port
from .test_durable_kill import asked, follow, post, quiet_signals, respond, start_node, stop, until

pytest.importorskip("dbos")

from steadyloop.server.durable import listener_name


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
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    signals = await quiet_signals()
    signal_port = signals.sockets[0].getsockname()[1]
    async with (
        signals,
        ScriptedServer(respond=respond) as model,
        await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin,
    ):
        ports = [free_port(), free_port()]
        nodes = [
            await start_node(model.base_url, postgres_url, ledger, port, name, signal_port, gate="gate")
            for port, name in zip(ports, ["node-a", "node-b"], strict=True)
        ]
        on_a, on_b = (httpx.AsyncClient(base_url=f"http://127.0.0.1:{p}", timeout=120) for p in ports)
        try:
            sid = (await on_a.post("/sessions", json={"title": "a case"})).json()["id"]
            news = asyncio.Event()
            seen: list[tuple[int, str, str]] = []
            watcher = asyncio.create_task(follow(on_b, sid, seen, news))
            posted = asyncio.create_task(post(on_a, sid, 7))
            await until(lambda: bool(asked(seen)), news, 60)  # the stamp waits on node a
            cut = await listener(admin, "node-a")
            assert cut is not None
            await admin.execute("SELECT pg_terminate_backend(%s)", (cut,))
            # Posted at once: node a waits a beat before it listens again.
            allowed = await on_b.post(
                f"/sessions/{sid}/approvals/{asked(seen)[0]}", json={"decision": "allow"}
            )
            assert allowed.status_code == 200, allowed.text
            await asyncio.wait_for(watcher, 120)
            await posted
            again = await listener(admin, "node-a")
        finally:
            await on_a.aclose()
            await on_b.aclose()
            await stop(nodes)
    assert again is not None and again != cut, "node a listens again, on a new connection"
    assert json.loads(seen[-1][2])["outcome"] == "completed"
    stamps = [line.split()[1:] for line in (ledger / "stamp_visit.log").read_text().splitlines()]
    assert stamps == [["node-a", "stamp_visit"]], "the allowed stamp ran on node a, where the run is"
