"""Durable runs keep each model request and each tool execution as a DBOS step. A node is killed while the
last of an answer's calls is in flight: the calls before it completed, but the history does not hold their
results yet (a batch's results enter it together, in call order). The node that resumes the run gives them
back from their steps: the answer is not asked for again, no completed call runs again (idempotent or
not), the call in flight is closed as interrupted, and DBOS's own records hold each step once, in order."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from steadyloop import Message, ToolResultMessage
from steadyloop.messages import messages_from_json
from steadyloop.sessions import is_balanced
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest

from ._two_nodes import assert_each_once_in_order, assert_messages_closed, durable_nodes, post, watch

pytest.importorskip("dbos")


@dataclass
class Killed:
    """What a run whose node was killed mid-batch left: the tools' ledgers, what the model was sent, the
    kept transcript, and the steps DBOS recorded."""

    ledger: dict[str, list[list[str]]]
    requests: list[RecordedRequest]
    kept: list[Message]
    steps: list[tuple[int, str]]
    executions: Counter[tuple[str, str]]  # (event, call id): how often the record tells of it, but the
    # call in flight


async def kill_mid_batch(
    tmp_path: Path, postgres_url: str, calls: list[dict[str, Any]], kill_on: str
) -> Killed:
    """One run on node a answering ``calls`` in one answer; node a is killed when call ``kill_on`` starts
    there, and node b resumes the run."""
    started = asyncio.Event()

    def heard(line: list[str]) -> None:
        if line[:2] == [kill_on, "node-a"]:
            started.set()

    def respond(request: RecordedRequest) -> ScriptedReply:
        if not any(m["role"] == "tool" for m in request.json["messages"]):
            return Reply.stream([*tool_call_chunks(calls), usage_chunk(30, 9)])
        return Reply.stream([*text_chunks(["Done ", "with case 4"]), usage_chunk(50, 8)])

    async with durable_nodes(tmp_path, postgres_url, respond, heard=heard) as nodes:
        clients = nodes.clients
        sid = (await clients[0].post("/sessions", json={"title": "case 4"})).json()["id"]
        watcher = asyncio.create_task(watch(clients, 1, sid))
        posted = asyncio.create_task(post(clients[0], sid, 4))
        # A stamp runs alone, after every call before it ended (and its step was kept).
        await started.wait()
        await nodes.kill()
        seen = await asyncio.wait_for(watcher, 120)
        await posted
        detail = (await clients[1].get(f"/sessions/{sid}")).json()
    requests = list(nodes.model.chat_requests)
    assert_each_once_in_order(seen)
    assert_messages_closed(seen)
    kept = messages_from_json(json.dumps(detail["messages"]))
    assert is_balanced(kept)
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        cursor = await conn.execute(
            "SELECT function_id, function_name FROM dbos.operation_outputs WHERE workflow_uuid LIKE %s "
            "ORDER BY function_id",
            (f"{sid}.%",),
        )
        steps = [(int(i), str(name)) for i, name in await cursor.fetchall()]
    logs = {
        name: nodes.ran(name)
        for name in ("look_up", "stamp_visit")
        if (nodes.ledger / f"{name}.log").exists()
    }
    executions = Counter(
        (kind, json.loads(data)["call_id"]) for _, kind, data in seen if kind.startswith("tool_execution_")
    )
    # The call in flight: its start reached the record or not before the kill; it never ended there. A
    # start that reached the record is closed by the takeover as interrupted (an aborted end), nothing else.
    started_in_record = executions.pop(("tool_execution_start", kill_on), 0)
    assert started_in_record <= 1
    closings = [
        json.loads(data)
        for _, kind, data in seen
        if kind == "tool_execution_end" and json.loads(data)["call_id"] == kill_on
    ]
    assert len(closings) == executions.pop(("tool_execution_end", kill_on), 0) <= started_in_record
    assert all(
        c["disposition"] == "aborted" and c["result"]["content"].startswith("interrupted") for c in closings
    ), closings
    return Killed(logs, requests, kept, steps, executions)


def results(killed: Killed) -> list[tuple[str, str]]:
    """The kept transcript's results, as (call id, content)."""
    return [(m.call_id, str(m.content)) for m in killed.kept if isinstance(m, ToolResultMessage)]


async def test_lookups_that_completed_before_their_node_died_are_given_back_not_run_again(
    tmp_path: Path, postgres_url: str
) -> None:
    calls = [
        {"id": "call_look_a", "name": "look_up", "arguments": {"key": "case-4-a"}},  # these two run at once
        {"id": "call_look_b", "name": "look_up", "arguments": {"key": "case-4-b"}},
        {"id": "call_stamp", "name": "stamp_visit", "arguments": {"visitor": "v4"}},
    ]
    killed = await kill_mid_batch(tmp_path, postgres_url, calls, "call_stamp")
    assert sorted(killed.ledger["look_up"]) == [
        ["call_look_a", "node-a", "look_up"],
        ["call_look_b", "node-a", "look_up"],
    ], "neither lookup ran again, though both are idempotent"
    assert killed.ledger["stamp_visit"] == [["call_stamp", "node-a", "stamp_visit"]]
    assert len(killed.requests) == 2, "the answer with the calls was kept: not asked for again"
    read = [m["content"] for m in killed.requests[1].json["messages"] if m["role"] == "tool"]
    assert read[:2] == ["case-4-a is on file", "case-4-b is on file"]
    assert read[2].startswith("interrupted:")
    assert [call_id for call_id, _ in results(killed)] == ["call_look_a", "call_look_b", "call_stamp"]
    assert killed.executions == Counter(
        {
            ("tool_execution_start", "call_look_a"): 1,
            ("tool_execution_end", "call_look_a"): 1,
            ("tool_execution_start", "call_look_b"): 1,
            ("tool_execution_end", "call_look_b"): 1,
        }
    ), "the record tells of each execution once: one given back is not told again"
    assert killed.steps == [
        (1, "history_length"),
        (2, "model_request"),
        (3, "tool call_look_a"),
        (4, "tool call_look_b"),
        (5, "tool call_stamp"),  # its closure as interrupted: a second recovery closes it the same way
        (6, "model_request"),
    ]


async def test_a_stamp_that_completed_before_its_node_died_keeps_its_result_and_is_not_stamped_again(
    tmp_path: Path, postgres_url: str
) -> None:
    calls = [
        {"id": "call_stamp_1", "name": "stamp_visit", "arguments": {"visitor": "v1"}},
        {"id": "call_stamp_2", "name": "stamp_visit", "arguments": {"visitor": "v2"}},
    ]
    killed = await kill_mid_batch(tmp_path, postgres_url, calls, "call_stamp_2")
    assert "look_up" not in killed.ledger
    assert killed.ledger["stamp_visit"] == [
        ["call_stamp_1", "node-a", "stamp_visit"],
        ["call_stamp_2", "node-a", "stamp_visit"],
    ], "no stamp ran twice"
    assert len(killed.requests) == 2
    kept = results(killed)
    assert kept[0] == ("call_stamp_1", "stamped v1"), "the completed stamp's own result, not 'interrupted'"
    assert kept[1][0] == "call_stamp_2" and kept[1][1].startswith("interrupted:")
    assert killed.executions == Counter(
        {
            ("tool_execution_start", "call_stamp_1"): 1,
            ("tool_execution_end", "call_stamp_1"): 1,
        }
    )
    assert killed.steps == [
        (1, "history_length"),
        (2, "model_request"),
        (3, "tool call_stamp_1"),
        (4, "tool call_stamp_2"),
        (5, "model_request"),
    ]
