"""200 concurrent sessions streaming through the HTTP API, some watched from the middle: every watcher gets
every recorded event exactly once, in seq order, and the whole answer. (``bench/server_load.py`` measures
wall time and memory; nothing here is timed.)"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx2 as httpx

from steadyloop.server import ServerLimits, ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer, Sse, read_sse

SESSIONS = 200
WORDS = " ".join(f"w{i}" for i in range(12))


def shown_text(events: list[Sse]) -> str:
    committed, preview = "", ""
    for event in events:
        if event.event == "delta" and event.data["kind"] == "text":
            preview += event.data["delta"]
        elif event.event == "message_update" and event.data["kind"] == "text":
            committed, preview = committed + event.data["delta"], ""
    return committed + preview


async def one_session(http: httpx.AsyncClient, index: int) -> tuple[list[Sse], list[list[Sse]]]:
    sid = (await http.post("/sessions", json={"title": f"load {index}"})).json()["id"]
    attached: list[asyncio.Task[list[Sse]]] = []

    async def watch(last: int) -> list[Sse]:
        async with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": str(last)}
        ) as response:
            assert response.status_code == 200
            return [e async for e in read_sse(response)]

    streamed: list[Sse] = []
    async with http.stream(
        "POST", f"/sessions/{sid}/messages", json={"text": "go"}, headers={"Accept": "text/event-stream"}
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for event in read_sse(response):
            streamed.append(event)
            # Every third session gets watchers attaching from the middle of its stream.
            if index % 3 == 0 and event.id is not None and event.id in (2, 5):
                attached.append(asyncio.create_task(watch(event.id)))
    return streamed, list(await asyncio.gather(*attached))


async def test_200_concurrent_sessions_every_watcher_sees_every_event_once_in_order(
    settings_for: Callable[..., ServerSettings],
) -> None:
    async with ScriptedServer(default_reply=Reply.stream(stream_of(WORDS), delay=0.002)) as model:
        settings = settings_for(model.base_url, limits=ServerLimits(max_runs_per_token=SESSIONS))
        limits = httpx.Limits(max_connections=SESSIONS * 3, max_keepalive_connections=SESSIONS)
        async with LiveServer(settings) as server, server.client(limits=limits, timeout=120) as http:
            results = await asyncio.gather(*(one_session(http, i) for i in range(SESSIONS)))
    watchers = 0
    for streamed, attached in results:
        ids = [e.id for e in streamed if e.id is not None]
        assert ids == list(range(1, len(ids) + 1)), "the run's own stream: each seq once, in order, from 1"
        assert streamed[-1].event == "agent_end" and streamed[-1].data["outcome"] == "completed"
        assert shown_text(streamed) == WORDS
        for events in attached:
            watchers += 1
            seen: list[Any] = [e.id for e in events if e.id is not None]
            assert seen == list(range(seen[0], ids[-1] + 1)), "a watcher from the middle: no gap, no repeat"
            assert seen[0] in (3, 6)
            assert events[-1].event == "agent_end"
    assert watchers == 2 * len(range(0, SESSIONS, 3))
    assert len(model.chat_requests) == SESSIONS
