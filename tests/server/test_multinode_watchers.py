"""Two nodes on one PostgreSQL store: a watcher that attaches to the other node just as a run ends there
(its ``agent_end`` recorded, the session not yet idle) replays the record, that end included, and ends;
so does one attaching after, and one attaching past the end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2 as httpx

from steadyloop.server import ServerSettings
from steadyloop.server.live import RUN_STATE
from steadyloop.testing import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

from .conftest import LiveServer, Sse, read_sse

#: Far longer than a watcher that ends needs; one that hangs sends keep-alives for ever.
ENDS_WITHIN_S = 20.0


async def watch(http: httpx.AsyncClient, sid: str, after: int = 0) -> list[Sse]:
    """The session's events from ``after`` with ``follow=run``, until the node ends the stream."""
    async with asyncio.timeout(ENDS_WITHIN_S):
        params = {"after": after, "follow": "run"}
        async with http.stream("GET", f"/sessions/{sid}/events", params=params) as response:
            assert response.status_code == 200
            return [event async for event in read_sse(response)]


def hold_idle(node: LiveServer) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the node's write of a run's ``idle`` state until released: the run's end is recorded, and the
    session still says it runs there. Returns (held, release)."""
    store = node.app.state.runtime.store
    real: Callable[..., Awaitable[Any]] = store.save_state
    held, release = asyncio.Event(), asyncio.Event()

    async def save_state(session_id: str, name: str, value: str, *, agent_id: str) -> None:
        if name == RUN_STATE and json.loads(value).get("status") == "idle":
            held.set()
            await release.wait()
        await real(session_id, name, value, agent_id=agent_id)

    store.save_state = save_state
    return held, release


async def test_a_watcher_attaching_to_another_node_as_a_run_ends_there_replays_the_end_and_ends(
    postgres_url: str, settings_for: Callable[..., ServerSettings]
) -> None:
    async with ScriptedServer(Reply.stream(stream_of("The answer."))) as model:
        a = settings_for(model.base_url, store=postgres_url, node="node-a")
        b = settings_for(model.base_url, store=postgres_url, node="node-b")
        async with (
            LiveServer(a) as node_a,
            LiveServer(b) as node_b,
            node_a.client() as on_a,
            node_b.client() as on_b,
        ):
            sid = (await on_a.post("/sessions", json={})).json()["id"]
            held, release = hold_idle(node_a)
            running = asyncio.create_task(on_a.post(f"/sessions/{sid}/messages", json={"text": "go"}))
            try:
                await held.wait()  # the run's end is in the record; the session still says node a runs it
                first = await watch(on_b, sid)
                last = first[-1].id
                assert last is not None
                past = asyncio.create_task(watch(on_b, sid, after=last))  # nothing left to replay
            finally:
                release.set()
            assert (await running).json()["answer"] == "The answer."
            again = await watch(on_b, sid)
            after_end = await past
            listed = (await on_b.get(f"/sessions/{sid}")).json()
    assert [e.event for e in first][-1] == "agent_end" and first[-1].data["outcome"] == "completed"
    assert [e.id for e in again] == [e.id for e in first], "a second attach replays the same and ends"
    assert after_end == []
    assert listed["status"] == "idle"
