"""Two nodes on one PostgreSQL store, without ``--durable``: a decision, a steer, a follow-up and an abort
posted to the node that is not running the session's run reach the run on the other node, as they do
between durable nodes (the running node applies them and answers)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from steadyloop import tool
from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, stream_of
from steadyloop.testing.replies import ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

from .conftest import LiveServer, wait_for_event

_calls = itertools.count(1)


def respond(request: RecordedRequest) -> ScriptedReply:
    """A note to write first (it waits for its approval), then a short answer to anything after."""
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return Reply.stream(stream_of("Noted."))
    call = {"id": f"c{next(_calls)}", "name": "write_note", "arguments": {"text": "hello"}}
    return Reply.stream(stream_of(tool_calls=[call]))


def note_tools(written: list[str]) -> list[Any]:
    @tool(effect="mutate-reversible")
    async def write_note(text: str) -> str:
        """Write a note."""
        written.append(text)
        await asyncio.sleep(1.5)  # long enough to steer the run while it writes
        return "written"

    return [write_note]


async def test_decisions_steers_follow_ups_and_aborts_posted_to_the_other_node_reach_the_run(
    postgres_url: str, settings_for: Callable[..., ServerSettings]
) -> None:
    written: list[str] = []
    async with ScriptedServer(respond=respond) as model:
        a = settings_for(model.base_url, store=postgres_url, node="node-a", tools=note_tools(written))
        b = settings_for(model.base_url, store=postgres_url, node="node-b", tools=note_tools(written))
        async with (
            LiveServer(a) as node_a,
            LiveServer(b) as node_b,
            node_a.client() as on_a,
            node_b.client() as on_b,
        ):
            decided, aborted = [(await on_a.post("/sessions", json={})).json()["id"] for _ in range(2)]
            runs = [
                asyncio.create_task(on_a.post(f"/sessions/{sid}/messages", json={"text": "note it"}))
                for sid in (decided, aborted)
            ]
            asked = [
                (await wait_for_event(on_b, sid, "approval_required")).data for sid in (decided, aborted)
            ]
            pending = (await on_b.get(f"/sessions/{decided}/approvals")).json()["approvals"]
            assert [p["approval_id"] for p in pending] == [asked[0]["approval_id"]]
            unknown = await on_b.post(f"/sessions/{decided}/approvals/nope", json={"decision": "allow"})
            assert unknown.status_code == 404, unknown.text  # node a's answer: no such approval waits
            allowed = await on_b.post(
                f"/sessions/{decided}/approvals/{asked[0]['approval_id']}", json={"decision": "allow"}
            )
            assert allowed.status_code == 200, allowed.text
            await wait_for_event(on_b, decided, "tool_execution_start")  # the note is being written
            for which, text in (("steer", "keep it short"), ("follow_up", "and date it")):
                queued = await on_b.post(f"/sessions/{decided}/{which}", json={"text": text})
                assert queued.status_code == 202, queued.text
            stopped = await on_b.post(f"/sessions/{aborted}/abort")
            assert stopped.status_code == 202, stopped.text
            answers = [(await run).json() for run in runs]
            detail = (await on_b.get(f"/sessions/{decided}")).json()
            idle = await on_b.post(f"/sessions/{decided}/steer", json={"text": "too late"})
    assert [answer["outcome"] for answer in answers] == ["completed", "cancelled"]
    assert written == ["hello"], "the allowed note was written on node a; the aborted one never"
    users = [m["content"] for m in detail["messages"] if m["role"] == "user"]
    assert users == ["note it", "keep it short", "and date it"]
    assert idle.status_code == 409 and idle.json()["error"]["code"] == "no_run_in_progress", idle.text
