"""Node names on one PostgreSQL store: a second ``steadyloop serve`` under a live node's ``--node`` is
refused at start and touches nothing (it used to close the first node's running run as interrupted);
nodes started with ``--port 0`` and no ``--node`` are each named after the port they got, and say so."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys

import httpx2 as httpx
import psycopg

from steadyloop.server.live import RUN_STATE
from steadyloop.server.settings import LOCAL_PRINCIPAL
from steadyloop.sessions.postgres import PostgresSessionStore
from steadyloop.testing import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

from .conftest import free_port

_NAMED = re.compile(r"steadyloop serve: node (\S+) on http://127\.0\.0\.1:(\d+)")


async def serve(model_url: str, store: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "steadyloop.cli", "serve", "--base-url", model_url, "-m", "scripted",
        "--store", store, "--no-tools", *args,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
    )  # fmt: skip


async def started(process: asyncio.subprocess.Process) -> list[str]:
    """The node's log until its app has started (it is then read on, so it never blocks)."""
    assert process.stderr is not None
    seen: list[str] = []
    while line := (await asyncio.wait_for(process.stderr.readline(), 120)).decode():
        seen.append(line)
        if "Application startup complete" in line:
            asyncio.get_running_loop().create_task(drain(process.stderr))
            return seen
    raise AssertionError("the node did not start:\n" + "".join(seen))


async def drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def stop(*processes: asyncio.subprocess.Process) -> None:
    for process in processes:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            await process.wait()


async def test_a_second_node_under_a_live_nodes_name_is_refused_and_touches_nothing(
    postgres_url: str,
) -> None:
    held = Reply.stream(stream_of("Half an answer", finish=None), stall_after=2, stall_seconds=None)
    async with ScriptedServer(held) as model:
        port = free_port()
        first = await serve(model.base_url, postgres_url, "--node", "node-a", "--port", str(port))
        second: asyncio.subprocess.Process | None = None
        try:
            await started(first)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
                sid = (await http.post("/sessions", json={})).json()["id"]
                running = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "go"}))
                await model.wait_for_requests(1)  # node a's run is going
                second = await serve(
                    model.base_url, postgres_url, "--node", "node-a", "--port", str(free_port())
                )
                _, said = await asyncio.wait_for(second.communicate(), 60)
                async with PostgresSessionStore(postgres_url) as store:
                    recorded = [e.type for _, e in await store.load_events(sid, agent_id=LOCAL_PRINCIPAL)]
                    state = json.loads(
                        await store.load_state(sid, RUN_STATE, agent_id=LOCAL_PRINCIPAL) or "{}"
                    )
                assert (await http.post(f"/sessions/{sid}/abort")).status_code == 202
                await running
        finally:
            await stop(first, *([second] if second is not None else []))
    assert second.returncode != 0
    assert "node name 'node-a' is in use" in said.decode(), said.decode()
    assert "agent_start" in recorded and "agent_end" not in recorded, "the refused node closed nothing"
    assert (state["status"], state["node"]) == ("running", "node-a")


async def test_nodes_on_port_0_without_a_name_are_each_named_after_their_port(postgres_url: str) -> None:
    async with ScriptedServer() as model:
        nodes = [await serve(model.base_url, postgres_url, "--port", "0") for _ in range(2)]
        try:
            logs = [await started(node) for node in nodes]
            named = [next(m for line in log if (m := _NAMED.search(line))) for log in logs]
            for match in named:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{match[2]}", timeout=30) as http:
                    assert (await http.get("/ready")).json()["node"] == match[1]
            with psycopg.connect(postgres_url) as conn:
                beating = {row[0] for row in conn.execute("SELECT node FROM steadyloop.durable_nodes")}
        finally:
            await stop(*nodes)
    names = [match[1] for match in named]
    assert len(set(names)) == 2, names
    assert all(
        name.endswith(f":{match[2]}") and match[2] != "0" for name, match in zip(names, named, strict=True)
    )
    assert set(names) <= beating
