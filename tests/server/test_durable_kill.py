"""Durable runs: two durable server nodes on one PostgreSQL store and the scripted model server run 50
sessions with tool calls; one node is killed (SIGKILL) in the middle of its runs. Every run completes on the
other node; every watcher (attached to either node, and moving to the live node when its own dies) sees
every recorded event once, in seq order; a tool that is not idempotent never ran twice; no model request
whose answer was kept was sent again; every transcript is balanced."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from collections import Counter
from pathlib import Path

import httpx2 as httpx
import pytest

from steadyloop.messages import messages_from_json
from steadyloop.server.cutoff import HANDOVER
from steadyloop.sessions import is_balanced
from steadyloop.testing.chunks import text_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest

from ._two_nodes import (
    Seen,
    asked,
    assert_each_once_in_order,
    assert_messages_closed,
    durable_nodes,
    follow,
    post,
    until,
    watch,
)

pytest.importorskip("dbos")

SESSIONS = int(os.environ.get("STEADYLOOP_DURABLE_SESSIONS", "50"))


async def test_a_node_killed_mid_run_has_every_run_completed_by_the_other_without_repeats(
    tmp_path: Path, postgres_url: str
) -> None:
    # Each tool call says when it starts: node a is killed once three stamps are in flight on it.
    in_flight: list[str] = []
    stamps_on_a = asyncio.Event()

    def heard(line: list[str]) -> None:
        if line[1:] == ["node-a", "stamp_visit"] and not stamps_on_a.is_set():
            in_flight.append(line[0])
            if len(in_flight) == 3:
                stamps_on_a.set()

    limits = httpx.Limits(max_connections=SESSIONS * 4, max_keepalive_connections=SESSIONS)
    async with durable_nodes(tmp_path, postgres_url, heard=heard, limits=limits) as nodes:
        clients = nodes.clients
        sids = [
            (await clients[i % 2].post("/sessions", json={"title": f"case {i}"})).json()["id"]
            for i in range(SESSIONS)
        ]
        watchers = [asyncio.create_task(watch(clients, first, sid)) for sid in sids for first in (0, 1)]
        posts = [asyncio.create_task(post(clients[i % 2], sid, i)) for i, sid in enumerate(sids)]
        # Node a dies with its runs under way, three stamps among them in flight.
        await stamps_on_a.wait()
        await nodes.kill()
        killed_at = len(nodes.model.chat_requests)
        seen = await asyncio.wait_for(asyncio.gather(*watchers), 300)
        await asyncio.gather(*posts)
        details = [(await clients[1].get(f"/sessions/{sid}")).json() for sid in sids]
    requests = list(nodes.model.chat_requests)

    # Every watcher saw each recorded event once, in seq order, the same events from either node.
    for index in range(SESSIONS):
        from_a, from_b = seen[2 * index], seen[2 * index + 1]
        for events in (from_a, from_b):
            ids = [seq for seq, _, _ in events]
            assert ids == sorted(set(ids)), "no event twice, none out of order"
            assert ids == list(range(ids[0], ids[0] + len(ids))), "no gap"
        assert from_a == from_b
        assert_messages_closed(from_a)
    # Every run completed with the whole exchange, balanced.
    kept_answers: set[str] = set()
    for detail in details:
        messages = detail["messages"]
        assert is_balanced(messages_from_json(json.dumps(messages)))
        assert messages[0]["role"] == "user" and messages[-1]["role"] == "assistant"
        results = {m["name"]: m for m in messages if m["role"] == "tool"}
        assert set(results) == {"look_up", "stamp_visit"}
        for message in messages:
            if message["role"] == "assistant":
                kept_answers.update(call["id"] for call in message.get("tool_calls") or [])
                kept_answers.update(re.findall(r"\[(r\d+)\]", message.get("content") or ""))
    # A call of a tool that is not idempotent ran at most once; its closing result says so when it was lost.
    stamps = Counter(call for call, _, _ in nodes.ran("stamp_visit"))
    kept_calls = {m["call_id"] for d in details for m in d["messages"] if m["role"] == "tool"}
    assert set(stamps) <= kept_calls, "every call that ran is answered in its transcript"
    assert max(stamps.values()) == 1, stamps
    for detail in details:
        for message in detail["messages"]:
            if message["role"] == "tool" and message["call_id"] in in_flight:
                assert "interrupted" in str(message["content"]) and message["is_error"], message
    # No request whose answer was kept was sent again: every request with the same messages as another
    # one came before the kill (it was in flight then), and only one of them has its answer kept.
    by_prefix: dict[str, list[int]] = {}
    for number, request in enumerate(requests, 1):
        by_prefix.setdefault(json.dumps(request.json["messages"], sort_keys=True), []).append(number)
    repeated = 0
    for numbers in by_prefix.values():
        kept = [n for n in numbers if f"call_r{n}" in kept_answers or f"r{n}" in kept_answers]
        assert len(kept) == 1, numbers
        for earlier in numbers[:-1]:
            assert earlier <= killed_at and earlier not in kept, (
                "a request sent again was in flight at the kill"
            )
            repeated += 1
    assert repeated < SESSIONS
    resumed = sum(1 for events in seen[::2] if sum(kind == "agent_start" for _, kind, _ in events) > 1)
    interrupted = sum(
        1
        for d in details
        for m in d["messages"]
        if m["role"] == "tool" and "interrupted" in str(m["content"])
    )
    print(  # for the log of a run with -s: how much of the kill's work there was
        f"killed at request {killed_at}; {resumed} runs resumed; {repeated} requests sent again; "
        f"{interrupted} calls closed as interrupted; look_up ran {len(nodes.ran('look_up'))} times"
    )
    assert resumed > 0, "the kill landed in the middle of runs"


async def test_an_approval_waiting_when_its_node_died_waits_again_on_the_node_that_resumes_the_run(
    tmp_path: Path, postgres_url: str
) -> None:
    async with durable_nodes(tmp_path, postgres_url, gate="gate") as nodes:
        on_a, on_b = nodes.clients
        sid = (await on_a.post("/sessions", json={"title": "case 7"})).json()["id"]
        news = asyncio.Event()
        seen: Seen = []
        watcher = asyncio.create_task(follow(on_b, sid, seen, news))
        posted = asyncio.create_task(post(on_a, sid, 7))
        await until(lambda: bool(asked(seen)), news, 60)  # the stamp waits for its decision on node a
        await nodes.kill()
        # Node b resumes the run: the stamp never ran, so it asks again and waits, on node b.
        await until(lambda: len(asked(seen)) == 2, news, 120)
        assert not (nodes.ledger / "stamp_visit.log").exists()
        again = asked(seen)[1]
        pending = (await on_b.get(f"/sessions/{sid}/approvals")).json()
        assert [a["approval_id"] for a in pending["approvals"]] == [again]
        decided = await on_b.post(f"/sessions/{sid}/approvals/{again}", json={"decision": "allow"})
        assert decided.status_code == 200, decided.text
        await asyncio.wait_for(watcher, 120)
        await posted
        detail = (await on_b.get(f"/sessions/{sid}")).json()
    assert json.loads(seen[-1][2])["outcome"] == "completed"
    assert_each_once_in_order(seen)
    assert len(nodes.ran("stamp_visit")) == 1, "stamped once, after the decision"
    messages = detail["messages"]
    assert is_balanced(messages_from_json(json.dumps(messages)))
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["case-7 is on file", "stamped v7"]


async def test_an_idempotent_call_in_flight_when_its_node_died_runs_again_on_the_node_that_resumes(
    tmp_path: Path, postgres_url: str
) -> None:
    looking = asyncio.Event()

    def heard(line: list[str]) -> None:
        if line[1:] == ["node-a", "look_up"]:
            looking.set()

    async with durable_nodes(tmp_path, postgres_url, heard=heard) as nodes:
        clients = nodes.clients
        sid = (await clients[0].post("/sessions", json={"title": "case 3"})).json()["id"]
        watcher = asyncio.create_task(watch(clients, 1, sid))
        posted = asyncio.create_task(post(clients[0], sid, 3))
        await looking.wait()  # the lookup is in flight on node a
        await nodes.kill()
        seen = await asyncio.wait_for(watcher, 120)
        await posted
        detail = (await clients[1].get(f"/sessions/{sid}")).json()
    assert_each_once_in_order(seen)
    assert_messages_closed(seen)
    looked = nodes.ran("look_up")
    assert [(node, name) for _, node, name in looked] == [("node-a", "look_up"), ("node-b", "look_up")]
    assert looked[0][0] == looked[1][0], "the same call, run again"
    messages = detail["messages"]
    assert is_balanced(messages_from_json(json.dumps(messages)))
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["case-3 is on file", "stamped v3"]
    assert len(nodes.model.chat_requests) == 3, "the lookup's request was answered and kept: not sent again"


async def test_an_answer_cut_off_by_its_nodes_death_is_closed_in_the_record_but_not_kept(
    tmp_path: Path, postgres_url: str
) -> None:
    answers = itertools.count(1)

    def answer(request: RecordedRequest) -> ScriptedReply:
        if next(answers) == 1:  # streams for ten seconds: node a dies in the middle of it
            words = [f"part{i} " for i in range(200)]
            return Reply.stream([*text_chunks(words), usage_chunk(20, 200)], delay=0.05)
        return Reply.stream([*text_chunks(["The whole ", "answer."]), usage_chunk(20, 3)])

    async with durable_nodes(tmp_path, postgres_url, answer) as nodes:
        on_a, on_b = nodes.clients
        sid = (await on_a.post("/sessions", json={"title": "case 1"})).json()["id"]
        news = asyncio.Event()
        seen: Seen = []
        watcher = asyncio.create_task(follow(on_b, sid, seen, news))
        posted = asyncio.create_task(post(on_a, sid, 1))
        # The record holds part of node a's answer.
        await until(lambda: any(kind == "message_update" for _, kind, _ in seen), news, 60)
        await nodes.kill()
        await asyncio.wait_for(watcher, 120)
        await posted
        detail = (await on_b.get(f"/sessions/{sid}")).json()
    assert_each_once_in_order(seen)
    assert_messages_closed(seen)
    run_ends = [json.loads(data) for _, kind, data in seen if kind == "agent_end"]
    assert [end["outcome"] for end in run_ends] == ["cancelled", "completed"], "node a's run, then node b's"
    assert str(run_ends[0]["error"]).startswith(HANDOVER)
    closed = [json.loads(data)["message"] for _, kind, data in seen if kind == "message_end"]
    answers = [m["content"] for m in closed if m["role"] == "assistant"]
    assert len(answers) == 2 and answers[0].startswith("part0 part1 "), answers
    assert answers[1] == "The whole answer."
    # The cut-off answer is only in the record: the transcript holds the whole answer asked for again.
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("user", "please handle case 1"),
        ("assistant", "The whole answer."),
    ]
    assert len(nodes.model.chat_requests) == 2


async def test_a_run_recovered_onto_a_node_at_its_run_limit_is_not_refused(
    tmp_path: Path, postgres_url: str
) -> None:
    """Both nodes allow one run per token; node b already has one going when it takes over node a's."""
    async with durable_nodes(tmp_path, postgres_url, gate="gate", max_runs=1) as nodes:
        on_a, on_b = nodes.clients
        first = (await on_a.post("/sessions", json={"title": "case 1"})).json()["id"]
        second = (await on_b.post("/sessions", json={"title": "case 2"})).json()["id"]
        news = asyncio.Event()
        seen: tuple[Seen, ...] = ([], [])
        watchers = [
            asyncio.create_task(follow(on_b, sid, seen[i], news)) for i, sid in enumerate((first, second))
        ]
        posts = [asyncio.create_task(post(on_a, first, 1))]
        await until(lambda: len(asked(seen[0])) == 1, news, 60)  # the stamp waits on node a
        posts.append(asyncio.create_task(post(on_b, second, 2)))
        await until(lambda: len(asked(seen[1])) == 1, news, 60)  # node b has its one run going
        await nodes.kill()
        # Node b takes the first run over (its stamp asks again) though its token is at the limit.
        await until(lambda: len(asked(seen[0])) == 2, news, 60)
        for sid, approval in ((first, asked(seen[0])[1]), (second, asked(seen[1])[0])):
            decided = await on_b.post(f"/sessions/{sid}/approvals/{approval}", json={"decision": "allow"})
            assert decided.status_code == 200, decided.text
        await asyncio.wait_for(asyncio.gather(*watchers), 120)
        await asyncio.gather(*posts)
    for events in seen:
        assert_messages_closed(events)
        assert json.loads(events[-1][2])["outcome"] == "completed"
    stamps = sorted(line[1:] for line in nodes.ran("stamp_visit"))
    assert stamps == [["node-b", "stamp_visit"], ["node-b", "stamp_visit"]], "each stamped once, on node b"


async def test_a_node_restarted_under_its_own_name_resumes_its_runs(
    tmp_path: Path, postgres_url: str
) -> None:
    """One node, killed with a stamp in flight and started again under its name: it resumes the run."""
    stamping = asyncio.Event()

    def heard(line: list[str]) -> None:
        if line[1:] == ["node-a", "stamp_visit"]:
            stamping.set()

    async with durable_nodes(tmp_path, postgres_url, names=["node-a"], heard=heard) as nodes:
        before = nodes.clients[0]
        sid = (await before.post("/sessions", json={"title": "case 4"})).json()["id"]
        posted = asyncio.create_task(post(before, sid, 4))
        await asyncio.wait_for(stamping.wait(), 60)
        await nodes.kill()
        await posted
        after = await nodes.start("node-a")
        seen: Seen = []
        await asyncio.wait_for(follow(after, sid, seen, asyncio.Event()), 120)
        detail = (await after.get(f"/sessions/{sid}")).json()
    assert_each_once_in_order(seen)
    assert_messages_closed(seen)
    assert json.loads(seen[-1][2])["outcome"] == "completed"
    assert [kind for _, kind, _ in seen].count("agent_start") == 2, "the run, then its resumption"
    assert len(nodes.ran("look_up")) == 1, "the finished lookup is not run again"
    assert len(nodes.ran("stamp_visit")) == 1, "the stamp in flight is not run again"
    messages = detail["messages"]
    assert is_balanced(messages_from_json(json.dumps(messages)))
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["name"] for m in results] == ["look_up", "stamp_visit"]
    assert "interrupted" in results[1]["content"] and results[1]["is_error"]
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"].startswith("Done with case 4")


async def test_decisions_steers_follow_ups_and_aborts_posted_to_another_node_reach_the_run(
    tmp_path: Path, postgres_url: str
) -> None:
    """Runs go on node a; every request about them goes to node b."""
    async with durable_nodes(tmp_path, postgres_url, gate="gate") as nodes:
        on_a, on_b = nodes.clients
        decided, aborted = [
            (await on_a.post("/sessions", json={"title": "a case"})).json()["id"] for _ in range(2)
        ]
        news = asyncio.Event()
        seen: tuple[Seen, ...] = ([], [])
        watchers = [
            asyncio.create_task(follow(on_b, sid, seen[i], news)) for i, sid in enumerate((decided, aborted))
        ]
        posts = [asyncio.create_task(post(on_a, sid, i)) for i, sid in enumerate((decided, aborted), 5)]
        await until(lambda: all(asked(events) for events in seen), news, 60)  # both stamps wait on node a
        # What node b knows of the approvals waiting on node a, and of the runs.
        pending = (await on_b.get(f"/sessions/{decided}/approvals")).json()["approvals"]
        assert [a["approval_id"] for a in pending] == asked(seen[0])
        assert pending[0]["name"] == "stamp_visit" and pending[0]["arguments"] == {"visitor": "v5"}
        # Node b's session list flags the session waiting on node a, as the page shows it.
        listed = {s["id"]: s for s in (await on_b.get("/sessions")).json()["sessions"]}
        assert (listed[decided]["status"], listed[decided]["waiting"]) == ("running", 1)
        unknown = await on_b.post(f"/sessions/{decided}/approvals/nope", json={"decision": "allow"})
        assert unknown.status_code == 404, unknown.text  # answered by node a, which holds the run
        approval = asked(seen[0])[0]
        allowed = await on_b.post(
            f"/sessions/{decided}/approvals/{approval}", json={"decision": "allow", "reason": "fine"}
        )
        assert allowed.status_code == 200, allowed.text
        again = await on_b.post(f"/sessions/{decided}/approvals/{approval}", json={"decision": "deny"})
        assert again.status_code == 409, again.text
        # While the stamp runs (three seconds), a steer and a follow-up for its run.
        stamping = ("tool_execution_start", "stamp_visit")
        await until(lambda: stamping in [(k, json.loads(d).get("name")) for _, k, d in seen[0]], news, 60)
        for which, text in (("steer", "the visitor is in a hurry"), ("follow_up", "and file the card")):
            queued = await on_b.post(f"/sessions/{decided}/{which}", json={"text": text})
            assert queued.status_code == 202, queued.text
        stopped = await on_b.post(f"/sessions/{aborted}/abort")
        assert stopped.status_code == 202, stopped.text
        await asyncio.wait_for(asyncio.gather(*watchers), 120)
        await asyncio.gather(*posts)
        detail = (await on_b.get(f"/sessions/{decided}")).json()
        idle = await on_b.post(f"/sessions/{decided}/steer", json={"text": "too late"})
    assert idle.status_code == 409 and idle.json()["error"]["code"] == "no_run_in_progress", idle.text
    assert [json.loads(events[-1][2])["outcome"] for events in seen] == ["completed", "cancelled"]
    decision = next(json.loads(data) for _, kind, data in seen[0] if kind == "approval_decided")
    assert (decision["decision"], decision["reason"]) == ("allow", "fine")
    stamps = [line[1:] for line in nodes.ran("stamp_visit")]
    assert stamps == [["node-a", "stamp_visit"]], "the allowed stamp ran on node a; the aborted one never ran"
    users = [m["content"] for m in detail["messages"] if m["role"] == "user"]
    assert users == ["please handle case 5", "the visitor is in a hurry", "and file the card"]
