"""Two nodes on one PostgreSQL store asked at the same instant to start a run on one session: exactly one
starts it, the other refuses with ``run_in_progress``; the claim is one locked step in the store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx2 as httpx

from steadyloop.server import ServerSettings
from steadyloop.server.live import RUN_STATE
from steadyloop.server.settings import LOCAL_PRINCIPAL
from steadyloop.sessions.postgres import PostgresSessionStore
from steadyloop.testing import stream_of
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

from .conftest import LiveServer

SESSIONS = 12


def held(_request: RecordedRequest) -> ScriptedReply:
    """A model that starts every answer and then holds it, so each run stays going until aborted."""
    return Reply.stream(stream_of("Half an answer", finish=None), stall_after=2, stall_seconds=None)


async def start(http: httpx.AsyncClient, sid: str) -> int:
    """The status of a streaming post: 200 as soon as the run has started, else the refusal's."""
    async with http.stream(
        "POST", f"/sessions/{sid}/messages", json={"text": "go"}, headers={"Accept": "text/event-stream"}
    ) as response:
        return response.status_code


async def test_two_nodes_racing_to_start_one_session_start_it_once(
    postgres_url: str, settings_for: Callable[..., ServerSettings]
) -> None:
    async with ScriptedServer(respond=held) as model:
        a = settings_for(model.base_url, store=postgres_url, node="node-a")
        b = settings_for(model.base_url, store=postgres_url, node="node-b")
        async with (
            LiveServer(a) as node_a,
            LiveServer(b) as node_b,
            node_a.client() as on_a,
            node_b.client() as on_b,
        ):
            sids = [(await on_a.post("/sessions", json={})).json()["id"] for _ in range(SESSIONS)]
            for sid in sids:  # both nodes have the session loaded: the race is only the claim
                assert (await on_b.get(f"/sessions/{sid}")).status_code == 200
            statuses = await asyncio.gather(*(start(http, sid) for sid in sids for http in (on_a, on_b)))
            pairs = [statuses[i : i + 2] for i in range(0, len(statuses), 2)]
            assert all(sorted(pair) == [200, 409] for pair in pairs), pairs
            await model.wait_for_requests(SESSIONS)
            async with PostgresSessionStore(postgres_url) as store:
                for sid, pair in zip(sids, pairs, strict=True):
                    state = json.loads(
                        await store.load_state(sid, RUN_STATE, agent_id=LOCAL_PRINCIPAL) or "{}"
                    )
                    assert state["status"] == "running"
                    assert state["node"] == ("node-a" if pair[0] == 200 else "node-b")
            for sid, pair in zip(sids, pairs, strict=True):
                winner = on_a if pair[0] == 200 else on_b
                assert (await winner.post(f"/sessions/{sid}/abort")).status_code < 300
    assert len(model.chat_requests) == SESSIONS, "each session's run sent one request, from one node"
