"""Attach from any seq (replay, then live, no gap, no repeat) and approvals decided over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steadyloop import ApprovalPolicy, tool
from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer, Sse, read_sse, wait_for_event


async def collect(http: Any, url: str, **kwargs: Any) -> list[Sse]:
    async with http.stream("GET", url, **kwargs) as response:
        assert response.status_code == 200, await response.aread()
        return [e async for e in read_sse(response)]


def text_of(events: list[Sse]) -> str:
    """The answer as a watcher shows it: recorded updates replace the deltas previewed before them."""
    committed, preview = "", ""
    for event in events:
        if event.event == "delta" and event.data["kind"] == "text":
            preview += event.data["delta"]
        elif event.event == "message_update" and event.data["kind"] == "text":
            committed, preview = committed + event.data["delta"], ""
    return committed + preview


async def test_watchers_attached_at_any_point_see_each_event_once_in_order(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    words = " ".join(f"w{i}" for i in range(40))
    model.enqueue(Reply.stream(stream_of(words), delay=0.01))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        watchers: list[asyncio.Task[list[Sse]]] = []
        runner = asyncio.create_task(
            collect(http, f"/sessions/{sid}/events?follow=session", timeout=5)
        )  # a watcher following the session; cancelled below
        async with http.stream(
            "POST",
            f"/sessions/{sid}/messages",
            json={"text": "count"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            streamed: list[Sse] = []
            async for event in read_sse(response):
                streamed.append(event)
                if len(streamed) in (3, 10, 25):  # attach from the start and from the last seq seen so far
                    last = max((e.id for e in streamed if e.id is not None), default=0)
                    watchers.append(asyncio.create_task(collect(http, f"/sessions/{sid}/events?after=0")))
                    watchers.append(
                        asyncio.create_task(
                            collect(http, f"/sessions/{sid}/events", headers={"Last-Event-ID": str(last)})
                        )
                    )
        results = await asyncio.gather(*watchers)
        runner.cancel()
        full = [e.id for e in streamed if e.id is not None]
        assert full == list(range(1, len(full) + 1))
        assert text_of(streamed) == words
        for index, events in enumerate(results):
            ids = [e.id for e in events if e.id is not None]
            assert ids == sorted(set(ids)), "each recorded event once, in seq order"
            assert ids[-1] == full[-1] and events[-1].event == "agent_end"
            if index % 2 == 0:
                assert ids == full, "a watcher from 0 sees the whole record"
                assert text_of(events) == words, "and the whole answer, however it joined"
            else:
                assert ids == list(range(ids[0], full[-1] + 1)), "a resumed watcher continues without a gap"
        # A finished run replays in full and the stream ends.
        again = await collect(http, f"/sessions/{sid}/events")
        assert [e.id for e in again] == full
        assert text_of(again) == words
        past = await http.get(f"/sessions/{sid}/events?after=999")
        assert past.status_code == 400 and past.json()["error"]["code"] == "invalid_request"


def gated_tools(written: list[str]) -> list[Any]:
    @tool(effect="mutate-reversible")
    def write_note(text: str) -> str:
        """Write a note."""
        written.append(text)
        return "written"

    return [write_note]


def write_call(text: str = "hello") -> Any:
    return Reply.stream(
        stream_of(tool_calls=[{"id": "c1", "name": "write_note", "arguments": {"text": text}}])
    )


async def test_a_gated_call_waits_for_a_remote_decision_that_every_watcher_sees(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    written: list[str] = []
    model.enqueue(write_call(), Reply.stream(stream_of("Done.")))
    async with (
        LiveServer(settings_for(model.base_url, tools=gated_tools(written))) as server,
        server.client() as http,
    ):
        sid = (await http.post("/sessions", json={})).json()["id"]
        run = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "note it"}))
        required = await wait_for_event(http, sid, "approval_required")
        pending = (await http.get(f"/sessions/{sid}/approvals")).json()["approvals"]
        approval = pending[0]
        assert approval["approval_id"] == required.data["approval_id"]
        assert approval["name"] == "write_note" and approval["arguments"] == {"text": "hello"}
        assert written == [], "nothing runs before the decision"
        watchers = [asyncio.create_task(collect(http, f"/sessions/{sid}/events?after=0")) for _ in range(2)]
        decided = await http.post(
            f"/sessions/{sid}/approvals/{approval['approval_id']}",
            json={"decision": "allow", "reason": "fine"},
        )
        assert decided.status_code == 200, decided.text
        again = await http.post(
            f"/sessions/{sid}/approvals/{approval['approval_id']}", json={"decision": "deny"}
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "already_decided"
        unknown = await http.post(f"/sessions/{sid}/approvals/approval_nope", json={"decision": "deny"})
        assert unknown.status_code == 404
        assert (await run).json()["answer"] == "Done."
        assert written == ["hello"]
        for events in await asyncio.gather(*watchers):
            decisions = [e.data for e in events if e.event == "approval_decided"]
            assert decisions == [
                {**decisions[0], "decision": "allow", "reason": "fine", "decided_by": "local"}
            ]


async def test_silence_past_the_timeout_denies(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], tmp_path: Path
) -> None:
    written: list[str] = []
    model.enqueue(write_call(), Reply.stream(stream_of("Not written.")))
    settings = settings_for(
        model.base_url,
        tools=gated_tools(written),
        approval_policy=ApprovalPolicy(require_for=frozenset({"mutate-reversible"}), timeout_s=0.3),
    )
    async with LiveServer(settings) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        async with http.stream(
            "POST", f"/sessions/{sid}/messages", json={"text": "go"}, headers={"Accept": "text/event-stream"}
        ) as response:
            events = [e async for e in read_sse(response)]
        decided = [e.data for e in events if e.event == "approval_decided"]
        assert [(d["decision"], d["reason"]) for d in decided] == [("deny", "timeout")]
        assert written == []
        results = [e.data for e in events if e.event == "tool_execution_end"]
        assert results == [] or results[0]["disposition"] != "completed"


async def test_a_session_can_gate_more_and_wait_less_than_the_server(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    written: list[str] = []
    model.enqueue(write_call("gated"), Reply.stream(stream_of("Not written.")))
    settings = settings_for(
        model.base_url,
        tools=gated_tools(written),
        approval_policy=ApprovalPolicy(require_for=frozenset({"destructive"}), timeout_s=300),
    )
    async with LiveServer(settings) as server, server.client() as http:
        tighter = {"require_for": ["mutate-reversible", "destructive"], "timeout_s": 0.3}
        created = await http.post("/sessions", json={"approvals": tighter})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        async with http.stream(
            "POST", f"/sessions/{sid}/messages", json={"text": "go"}, headers={"Accept": "text/event-stream"}
        ) as response:
            events = [e async for e in read_sse(response)]
        decided = [e.data for e in events if e.event == "approval_decided"]
        assert [(d["decision"], d["reason"]) for d in decided] == [("deny", "timeout")]
        assert written == [], "the session's own gate held the write, and its shorter timeout denied it"
