"""Durable runs keep each model request and each tool execution as a DBOS step: a node killed while the
third of three parallel calls is in flight leaves two calls that completed but whose results the history
does not hold yet (a batch's results enter it together, in call order). The node that resumes the run
gives them back from their steps: the first answer is not asked for again, neither lookup runs again,
the stamp in flight is closed as interrupted, and DBOS's own records hold each step once, in order."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx2 as httpx
import psycopg
import pytest

from steadyloop import ToolResultMessage, messages_from_json
from steadyloop.sessions import is_balanced
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

from .conftest import free_port
from .test_durable_kill import assert_messages_closed, post, start_node, stop, watch

pytest.importorskip("dbos")

CALLS = [
    {"id": "call_look_a", "name": "look_up", "arguments": {"key": "case-4-a"}},
    {"id": "call_look_b", "name": "look_up", "arguments": {"key": "case-4-b"}},
    {"id": "call_stamp", "name": "stamp_visit", "arguments": {"visitor": "v4"}},
]


def respond(request: RecordedRequest) -> ScriptedReply:
    """Three calls in one answer; once they are answered, the last word."""
    if not any(m["role"] == "tool" for m in request.json["messages"]):
        return Reply.stream([*tool_call_chunks(CALLS), usage_chunk(30, 9)])
    return Reply.stream([*text_chunks(["Done ", "with case 4"]), usage_chunk(50, 8)])


async def test_calls_that_completed_before_their_node_died_are_given_back_from_their_steps(
    tmp_path: Path, postgres_url: str
) -> None:
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    stamping = asyncio.Event()

    async def heard(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if (await reader.readline()).decode().split()[1:] == ["node-a", "stamp_visit"]:
            stamping.set()
        writer.close()

    signals = await asyncio.start_server(heard, "127.0.0.1", 0)
    signal_port = signals.sockets[0].getsockname()[1]
    async with signals, ScriptedServer(respond=respond) as model:
        ports = [free_port(), free_port()]
        nodes = [
            await start_node(model.base_url, postgres_url, ledger, port, name, signal_port)
            for port, name in zip(ports, ["node-a", "node-b"], strict=True)
        ]
        clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{p}", timeout=120) for p in ports]
        try:
            sid = (await clients[0].post("/sessions", json={"title": "case 4"})).json()["id"]
            watcher = asyncio.create_task(watch(clients, 1, sid))
            posted = asyncio.create_task(post(clients[0], sid, 4))
            # The stamp runs alone, after both lookups ended (and their steps were kept): kill it in flight.
            await stamping.wait()
            nodes[0][0].send_signal(signal.SIGKILL)
            await nodes[0][0].wait()
            seen = await asyncio.wait_for(watcher, 120)
            await posted
            detail = (await clients[1].get(f"/sessions/{sid}")).json()
        finally:
            for http in clients:
                await http.aclose()
            await stop(nodes)
    ids = [seq for seq, _, _ in seen]
    assert ids == list(range(1, len(ids) + 1)), "the watcher saw every event once, in order"
    assert_messages_closed(seen)

    looked = [line.split() for line in (ledger / "look_up.log").read_text().splitlines()]
    assert sorted(looked) == [["call_look_a", "node-a", "look_up"], ["call_look_b", "node-a", "look_up"]]
    stamped = [line.split() for line in (ledger / "stamp_visit.log").read_text().splitlines()]
    assert stamped == [["call_stamp", "node-a", "stamp_visit"]]
    assert len(model.chat_requests) == 2, "the answer with the calls was kept: not asked for again"
    read = [m for m in model.chat_requests[1].json["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in read[:2]] == ["case-4-a is on file", "case-4-b is on file"]
    assert read[2]["content"].startswith("interrupted:")

    kept = messages_from_json(json.dumps(detail["messages"]))
    assert is_balanced(kept)
    results = [m for m in kept if isinstance(m, ToolResultMessage)]
    assert [m.call_id for m in results] == ["call_look_a", "call_look_b", "call_stamp"]

    # DBOS's own record of the run: every step once, at the ID it took, the stamp's closure kept too.
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(
            "SELECT function_id, function_name FROM dbos.operation_outputs WHERE workflow_uuid LIKE %s "
            "ORDER BY function_id",
            (f"{sid}.%",),
        )
        steps = [(int(i), str(name)) for i, name in await cursor.fetchall()]
    assert steps == [
        (1, "history_length"),
        (2, "model_request"),
        (3, "tool call_look_a"),
        (4, "tool call_look_b"),
        (5, "tool call_stamp"),
        (6, "model_request"),
    ]
