"""``steadyloop serve`` killed mid-run and started again: every session listed, balanced, the run closed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx2 as httpx

from steadyloop.messages import messages_from_json
from steadyloop.sessions import SQLiteSessionStore, is_balanced
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import free_port, read_sse, until_started, wait_for_event


async def start_server(model_url: str, store: Path, workdir: Path, port: int) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "steadyloop.cli",
        "serve",
        "--base-url",
        model_url,
        "-m",
        "scripted",
        "--store",
        str(store),
        "--workdir",
        str(workdir),
        "--port",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
    )
    await until_started(process)
    return process


async def test_a_server_killed_mid_run_lists_every_session_balanced_with_the_run_marked_interrupted(
    tmp_path: Path,
) -> None:
    store, workdir = tmp_path / "sessions.db", tmp_path / "work"
    workdir.mkdir()
    write = Reply.stream(
        stream_of(
            tool_calls=[{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]
        )
    )
    async with ScriptedServer(
        Reply.stream(stream_of("An answer that finished.")),
        Reply.stream(stream_of("Half an answer that never", finish=None), stall_after=3, stall_seconds=None),
        write,
        Reply.stream(stream_of("Back again.")),
    ) as model:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        process = await start_server(model.base_url, store, workdir, port)
        try:
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                done = (await http.post("/sessions", json={"title": "done"})).json()["id"]
                assert (await http.post(f"/sessions/{done}/messages", json={"text": "q"})).status_code == 200
                streaming = (await http.post("/sessions", json={"title": "streaming"})).json()["id"]
                waiting = (await http.post("/sessions", json={"title": "waiting"})).json()["id"]
                async with http.stream(
                    "POST",
                    f"/sessions/{streaming}/messages",
                    json={"text": "go"},
                    headers={"Accept": "text/event-stream"},
                ) as response:
                    async for event in read_sse(response):
                        if event.event == "delta":
                            break
                    posted = asyncio.create_task(
                        http.post(f"/sessions/{waiting}/messages", json={"text": "write"})
                    )
                    await wait_for_event(http, waiting, "approval_required")
                    # The streamed text reaches the record within a second of streaming, stalled or not.
                    partial = await wait_for_event(http, streaming, "message_update")
                    process.send_signal(signal.SIGKILL)
                    await process.wait()
                    posted.cancel()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()

        process = await start_server(model.base_url, store, workdir, port)
        try:
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                listed = {s["title"]: s for s in (await http.get("/sessions")).json()["sessions"]}
                assert {t: s["status"] for t, s in listed.items()} == {
                    "done": "idle",
                    "streaming": "interrupted",
                    "waiting": "interrupted",
                }
                async with SQLiteSessionStore(store) as raw:
                    for title, session in listed.items():
                        detail = (await http.get(f"/sessions/{session['id']}")).json()
                        assert detail["messages"][0]["role"] == "user"
                        stored = await raw.load_messages(session["id"], agent_id="local")
                        assert stored, title
                        async with http.stream("GET", f"/sessions/{session['id']}/events") as response:
                            events = [e async for e in read_sse(response)]
                        ends = [e.data for e in events if e.event == "agent_end"]
                        assert len(ends) == 1, title
                        if title != "done":
                            assert ends[0]["error"].startswith("interrupted")
                        ids = [e.id for e in events]
                        assert ids == list(range(1, len(ids) + 1))
                    waiting_messages = await raw.load_messages(listed["waiting"]["id"], agent_id="local")
                    assert not is_balanced(waiting_messages), (
                        "the call never answered is in the store as it was"
                    )
                for session in listed.values():
                    detail = (await http.get(f"/sessions/{session['id']}")).json()
                    assert is_balanced(messages_from_json(json.dumps(detail["messages"])))
                # The answer cut off mid-stream is kept as far as the record had it, as an abort keeps it.
                cut = (await http.get(f"/sessions/{listed['streaming']['id']}")).json()["messages"]
                assert [m["role"] for m in cut] == ["user", "assistant"]
                kept = cut[1]["content"]
                assert kept and kept.startswith(partial.data["delta"])
                assert "Half an answer that never".startswith(kept)
                async with http.stream("GET", f"/sessions/{listed['streaming']['id']}/events") as response:
                    tail = [e async for e in read_sse(response)][-2:]
                assert [e.event for e in tail] == ["message_end", "agent_end"]
                assert tail[0].data["message"]["content"] == kept
                again = await http.post(
                    f"/sessions/{listed['waiting']['id']}/messages", json={"text": "again"}
                )
                assert again.json()["answer"] == "Back again."
                sent = model.chat_requests[-1].json["messages"]
                assert [m["role"] for m in sent] == ["user", "user"], "the unanswered call is not replayed"
                assert (await http.get("/sessions")).json()["sessions"][0]["status"] == "idle"
                assert not (workdir / "a.txt").exists()
        finally:
            process.send_signal(signal.SIGINT)
            await process.wait()


def test_the_message_left_open_is_cut_where_its_record_ends() -> None:
    from steadyloop import AssistantMessage, UserMessage
    from steadyloop.events import AgentStart, MessageEnd, MessageStart, MessageUpdate
    from steadyloop.server.runtime import cut_off_message

    opened = MessageStart(message=AssistantMessage(), step=2)
    first = [
        AgentStart(),
        MessageStart(message=UserMessage(content="q")),
        MessageEnd(message=UserMessage(content="q")),
        MessageStart(message=AssistantMessage(), step=1),
        MessageUpdate(kind="text", delta="done", step=1),
        MessageEnd(message=AssistantMessage(content="done"), step=1),
    ]
    assert cut_off_message(first) is None, "every message closed"
    assert cut_off_message([*first, opened]) is None, "open, but nothing streamed yet"
    streamed = [
        *first,
        opened,
        MessageUpdate(kind="thinking", delta="hmm ", step=2),
        MessageUpdate(kind="text", delta="half ", step=2),
        MessageUpdate(kind="thinking", delta="more", step=2),
        MessageUpdate(kind="text", delta="an answer", step=2),
    ]
    assert cut_off_message(streamed) == (AssistantMessage(content="half an answer", reasoning="hmm more"), 2)
