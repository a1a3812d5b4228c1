"""A message goes where it was sent, or is refused: a steer or follow-up never lands in another run."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from steadyloop import tool
from steadyloop.server import ServerSettings
from steadyloop.server.live import RUN_STATE
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer, read_sse, wait_for_event


def users(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "user"]


async def test_a_steer_or_follow_up_posted_as_the_run_ends_is_refused_and_never_reaches_the_next_run(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    model.enqueue(Reply.stream(stream_of("first")), Reply.stream(stream_of("second")))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        # The run's last write (its state back to idle) is held until the late messages are answered: the
        # moment the client learns the run ended while the server is still finishing it.
        store, finishing = server.app.state.runtime.store, asyncio.Event()
        save_state = store.save_state

        async def held(session_id: str, key: str, value: str, **kwargs: Any) -> None:
            if key == RUN_STATE and '"idle"' in value:
                await finishing.wait()
            await save_state(session_id, key, value, **kwargs)

        monkeypatch.setattr(store, "save_state", held)
        late: list[Any] = []
        async with http.stream(
            "POST", f"/sessions/{sid}/messages", json={"text": "one"}, headers={"Accept": "text/event-stream"}
        ) as response:
            async for event in read_sse(response):
                if event.event == "agent_end":  # posted the moment the client learns the run ended
                    late = list(
                        await asyncio.gather(
                            http.post(f"/sessions/{sid}/steer", json={"text": "steered late"}),
                            http.post(f"/sessions/{sid}/follow_up", json={"text": "followed up late"}),
                        )
                    )
                    finishing.set()
                    assert event.data["queued"] == []
        for refused in late:
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert error["code"] == "no_run_in_progress" and "its run has ended" in error["message"]
            assert f"POST /sessions/{sid}/messages" in error["hint"]
        second = await http.post(f"/sessions/{sid}/messages", json={"text": "two"})
        assert second.json()["answer"] == "second"
        assert len(model.chat_requests) == 2, "no extra model turn"
        assert users(model.chat_requests[1]) == ["one", "two"]


async def test_a_steer_taken_by_a_run_that_stops_before_reading_it_is_reported_dropped(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    gate = asyncio.Event()

    @tool
    async def wait_for_test() -> str:
        """Waits for the test."""
        await gate.wait()
        return "waited"

    model.enqueue(
        Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": "wait_for_test", "arguments": {}}])),
        Reply.stream(stream_of("next run")),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=[wait_for_test])) as server,
        server.client() as http,
    ):
        sid = (await http.post("/sessions", json={"max_turns": 1})).json()["id"]
        running = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "go"}))
        await wait_for_event(http, sid, "tool_execution_start")
        accepted = await http.post(f"/sessions/{sid}/steer", json={"text": "after the step"})
        assert accepted.status_code == 202 and accepted.json() == {"queued": "steer"}
        gate.set()
        assert (await running).json()["outcome"] == "max_turns"
        end = await wait_for_event(http, sid, "agent_end")
        assert [(q["queue"], q["message"]["content"], q["fate"]) for q in end.data["queued"]] == [
            ("steering", "after the step", "dropped")
        ]
        await http.post(f"/sessions/{sid}/messages", json={"text": "again"})
        assert users(model.chat_requests[1]) == ["go", "again"], "the dropped steer is not carried over"
