"""The Agent's queues: a message reaches the run it was queued for, or is refused or reported dropped, and is
never carried into a later run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steadyloop import QueueClosed, RunLimitReached
from steadyloop.agent import Agent
from steadyloop.events import AgentEnd, Event, QueuedMessage, event_from_json, event_to_json
from steadyloop.messages import UserMessage
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def call(name: str, arguments: dict[str, Any]) -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": name, "arguments": arguments}]))


def users(request: Any) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "user"]


def ends(agent: Agent) -> list[AgentEnd]:
    seen: list[AgentEnd] = []
    agent.subscribe(lambda event: seen.append(event) if isinstance(event, AgentEnd) else None)
    return seen


async def test_a_message_queued_as_the_run_ends_is_refused_not_carried_into_the_next_run() -> None:
    async with ScriptedServer(answer("first"), answer("second")) as server:
        agent = Agent(Endpoint(server.base_url), "m")
        refusals: list[str] = []

        def late(event: Event) -> None:
            # What a client does as it receives the end: the run can no longer read either message.
            if isinstance(event, AgentEnd):
                for queue in (agent.steer, agent.follow_up):
                    with pytest.raises(QueueClosed, match="prompt\\(\\) with it once the agent is idle"):
                        queue("one more thing")
                    refusals.append(queue.__name__)

        unsubscribe = agent.subscribe(late)
        await agent.prompt("one")
        unsubscribe()
        assert refusals == ["steer", "follow_up"]
        await agent.prompt("two")
        assert len(server.chat_requests) == 2, "no extra model turn"
        assert users(server.chat_requests[1]) == ["one", "two"]


async def test_the_runs_end_says_what_the_queues_held_and_what_became_of_it() -> None:
    gate = asyncio.Event()

    @tool
    async def wait_for_test() -> str:
        """Waits for the test."""
        agent.steer("steered in")
        agent.follow_up("followed up")
        await gate.wait()
        return "done"

    replies = [call("wait_for_test", {}), answer("after steering"), answer("after one"), answer("after two")]
    async with ScriptedServer(*replies) as server:
        agent = Agent(Endpoint(server.base_url), "m", tools=[wait_for_test], interrupt_mode="wait")
        seen = ends(agent)
        agent.follow_up("queued while idle")
        run = asyncio.create_task(agent.prompt("go"))
        await server.wait_for_requests(1)
        gate.set()
        assert (await run).content == "after two"
        assert users(server.chat_requests[3]) == ["go", "steered in", "queued while idle", "followed up"]
    (end,) = seen
    assert [(q.queue, q.message, q.fate) for q in end.queued] == [
        ("steering", UserMessage(content="steered in"), "delivered"),
        ("follow_up", UserMessage(content="queued while idle"), "delivered"),
        ("follow_up", UserMessage(content="followed up"), "delivered"),
    ]
    assert not agent.has_queued_messages()
    assert event_from_json(event_to_json(end)) == end


async def test_a_run_that_stops_before_reading_its_queue_drops_it_and_the_next_run_never_sees_it() -> None:
    @tool
    def step() -> str:
        """One step."""
        agent.steer("too late for this run")
        agent.follow_up("and this")
        return "stepped"

    async with ScriptedServer(call("step", {}), answer("next run")) as server:
        agent = Agent(Endpoint(server.base_url), "m", tools=[step], should_stop_after_turn=lambda *_: True)
        seen = ends(agent)
        await agent.prompt("go")
        agent.should_stop_after_turn = None
        await agent.prompt("again")
        assert users(server.chat_requests[1]) == ["go", "again"]
    assert [(q.queue, q.message.content, q.fate) for q in seen[0].queued] == [
        ("steering", "too late for this run", "dropped"),
        ("follow_up", "and this", "dropped"),
    ]
    assert seen[1].queued == ()


async def test_a_message_taken_by_a_run_that_then_hit_its_limit_is_reported_dropped() -> None:
    @tool
    def step() -> str:
        """One step."""
        agent.steer("read after the step")
        return "stepped"

    async with ScriptedServer(call("step", {}), answer("never asked")) as server:
        agent = Agent(Endpoint(server.base_url), "m", tools=[step], max_turns=1)
        seen = ends(agent)
        with pytest.raises(RunLimitReached):
            await agent.prompt("go")
    assert [(q.queue, q.message.content, q.fate) for q in seen[0].queued] == [
        ("steering", "read after the step", "dropped")
    ]
    assert not any(m == UserMessage(content="read after the step") for m in agent.state.messages)


def test_a_queued_message_round_trips_as_json() -> None:
    end = AgentEnd(
        outcome="completed",
        queued=(QueuedMessage(queue="follow_up", message=UserMessage(content="x"), fate="dropped"),),
    )
    assert event_from_json(event_to_json(end)) == end
    assert AgentEnd(outcome="completed").queued == ()
