"""Two ``steadyloop serve`` nodes on one PostgreSQL store and the scripted model server: sessions with tool
calls run on either node, and watchers attached to either node (the one running the run, or the other)
see every recorded event exactly once, in seq order, from wherever they attached."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx

from steadyloop.messages import messages_from_json
from steadyloop.server import ServerSettings
from steadyloop.sessions import is_balanced
from steadyloop.testing import stream_of
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

from .conftest import LiveServer, Sse, free_port, read_sse, until_started

SESSIONS = int(os.environ.get("STEADYLOOP_MULTINODE_SESSIONS", "50"))


def respond(request: RecordedRequest) -> ScriptedReply:
    """The model: lists the folder first, then answers with what the listing held."""
    messages = request.json["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return Reply.stream(
            [*text_chunks(["I see ", "the files: ", last["content"][:40]]), usage_chunk(40, 6)]
        )
    question = next(m["content"] for m in messages if m["role"] == "user")
    call = {"id": f"call_{abs(hash(str(question))) % 10**8}", "name": "list_dir", "arguments": {"path": "."}}
    return Reply.stream([*tool_call_chunks([call], split_arguments_every=3), usage_chunk(30, 9)], delay=0.01)


DRAINS: list[asyncio.Task[None]] = []


async def drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def start_node(
    model_url: str, store: str, workdir: Path, port: int, node: str
) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "steadyloop.cli", "serve", "--base-url", model_url, "-m", "scripted",
        "--store", store, "--node", node, "--workdir", str(workdir), "--port", str(port), "--max-runs", "100",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
    )  # fmt: skip
    await until_started(process)
    assert process.stderr is not None
    # Read on, so the node never blocks writing its log into a full pipe.
    DRAINS.append(asyncio.create_task(drain(process.stderr)))
    return process


async def watch(http: httpx.AsyncClient, sid: str, after: int, follow: str) -> list[Sse]:
    """The session's events from ``after`` until the run's ``agent_end``."""
    events: list[Sse] = []
    async with http.stream("GET", f"/sessions/{sid}/events", params={"after": after, "follow": follow}) as r:
        assert r.status_code == 200, await r.aread()
        async for event in read_sse(r):
            events.append(event)
            if event.event == "agent_end":
                break
    return events


def recorded(events: list[Sse]) -> list[tuple[int, str, str]]:
    return [(e.id, e.event, json.dumps(e.data, sort_keys=True)) for e in events if e.id is not None]


async def one_session(
    index: int, nodes: list[httpx.AsyncClient]
) -> tuple[list[Sse], list[tuple[int, list[Sse]]], str]:
    here, other = nodes[index % 2], nodes[(index + 1) % 2]
    sid = (await here.post("/sessions", json={"title": f"multi {index}"})).json()["id"]
    # Attached before the run starts, to the other node and to this one, following the session.
    watchers = [
        (0, asyncio.create_task(watch(other, sid, 0, "session"))),
        (0, asyncio.create_task(watch(here, sid, 0, "session"))),
    ]
    streamed: list[Sse] = []
    async with here.stream(
        "POST", f"/sessions/{sid}/messages", json={"text": f"what is here? ({index})"},
        headers={"Accept": "text/event-stream"},
    ) as response:  # fmt: skip
        assert response.status_code == 200, await response.aread()
        async for event in read_sse(response):
            streamed.append(event)
            # And one attaching to the other node mid-run, following the run another node is running.
            if event.id == 3:
                watchers.append((3, asyncio.create_task(watch(other, sid, 3, "run"))))
    return streamed, [(after, await task) for after, task in watchers], sid


async def test_watchers_on_either_node_see_every_event_of_runs_on_both_nodes_once_in_order(
    tmp_path: Path, postgres_url: str
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("hello\n")
    async with ScriptedServer(respond=respond) as model:
        ports = [free_port(), free_port()]
        processes = [
            await start_node(model.base_url, postgres_url, workdir, port, node)
            for port, node in zip(ports, ["node-a", "node-b"], strict=True)
        ]
        try:
            # Watchers hold their connections open: room for all of them and the posts besides.
            limits = httpx.Limits(max_connections=SESSIONS * 4, max_keepalive_connections=SESSIONS)
            clients = [
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{p}", timeout=60, limits=limits) for p in ports
            ]
            try:
                results = await asyncio.gather(*(one_session(i, clients) for i in range(SESSIONS)))
                # Every node lists every session, balanced, whichever node ran it.
                for http in clients:
                    listed = (await http.get("/sessions")).json()["sessions"]
                    assert len(listed) == SESSIONS
                    for session in listed:
                        detail = (await http.get(f"/sessions/{session['id']}")).json()
                        assert is_balanced(messages_from_json(json.dumps(detail["messages"])))
                        assert [m["role"] for m in detail["messages"]] == [
                            "user",
                            "assistant",
                            "tool",
                            "assistant",
                        ]
            finally:
                for http in clients:
                    await http.aclose()
        finally:
            for process in processes:
                process.send_signal(signal.SIGINT)
            for process in processes:
                await process.wait()

    watchers = 0
    for streamed, attached, _sid in results:
        run = recorded(streamed)
        ids = [seq for seq, _, _ in run]
        assert ids == list(range(1, len(ids) + 1)), "the run's own stream: each seq once, in order"
        assert streamed[-1].event == "agent_end" and streamed[-1].data["outcome"] == "completed"
        assert any(e.event == "tool_execution_end" for e in streamed)
        for after, events in attached:
            watchers += 1
            seen = recorded(events)
            assert seen == [item for item in run if item[0] > after], "no gap, no repeat, the same events"
    assert watchers == 3 * SESSIONS
    assert len(model.chat_requests) == 2 * SESSIONS, "each request sent once"


async def test_a_session_runs_on_one_node_at_a_time_and_the_other_continues_it_with_its_history(
    postgres_url: str, settings_for: Callable[..., ServerSettings]
) -> None:
    held = Reply.stream(stream_of("Half an answer", finish=None), stall_after=2, stall_seconds=None)
    async with ScriptedServer(Reply.stream(stream_of("First answer.")), held) as model:
        a = settings_for(model.base_url, store=postgres_url, node="node-a")
        b = settings_for(model.base_url, store=postgres_url, node="node-b")
        async with (
            LiveServer(a) as node_a,
            LiveServer(b) as node_b,
            node_a.client() as on_a,
            node_b.client() as on_b,
        ):
            sid = (await on_a.post("/sessions", json={})).json()["id"]
            # Node b loads the session while it is empty, then node a runs it.
            assert (await on_b.get(f"/sessions/{sid}")).status_code == 200
            first = await on_b.post(f"/sessions/{sid}/messages", json={"text": "one"})
            assert first.json()["answer"] == "First answer."
            going = asyncio.create_task(on_a.post(f"/sessions/{sid}/messages", json={"text": "two"}))
            await model.wait_for_requests(2)  # node a's run is under way: its request is at the model
            refused = await on_b.post(f"/sessions/{sid}/messages", json={"text": "three"})
            assert refused.status_code == 409
            assert "another node" in refused.json()["error"]["message"]
            assert (await on_a.post(f"/sessions/{sid}/abort")).status_code < 300
            await going
            model.enqueue(Reply.stream(stream_of("Third answer.")))
            third = await on_b.post(f"/sessions/{sid}/messages", json={"text": "three"})
            assert third.json()["answer"] == "Third answer."
    sent = [m["content"] for m in model.chat_requests[-1].json["messages"] if m["role"] == "user"]
    assert sent[0] == "one" and sent[-1] == "three", "node b sent what node a's run added to the history"
    assert "two" in sent
