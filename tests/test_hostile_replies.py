"""An Agent whose model or server sends something hostile ends in a typed outcome, never a bare exception."""

from __future__ import annotations

from typing import Any

import pytest

from steadyloop.agent import Agent
from steadyloop.events import Event, Notice, ToolExecutionEnd
from steadyloop.loop import LoopPolicy
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint

FAST = LoopPolicy(retry=RetryPolicy(base_delay_s=0.01, max_retries=1))


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18C"


def agent_for(server: ScriptedServer) -> tuple[Agent, list[Event]]:
    agent = Agent(Endpoint(server.base_url), "m", tools=[get_weather], policy=FAST)
    events: list[Event] = []
    agent.subscribe(events.append)
    return agent, events


@pytest.mark.parametrize(
    "reply",
    [
        "[" * 1000,
        "{" * 600,
        "{'a':" * 300,
        "<tool_call>" + "[" * 1000,
        "<tool_call><function=nope><parameter=city>" + "{" * 600,
        "[TOOL_CALLS]" + "[" * 1000,
        "<|python_tag|>" + "{" * 1000,
    ],
)
async def test_a_deeply_nested_reply_is_an_answer(reply: str) -> None:
    async with ScriptedServer(Reply.stream(stream_of(reply))) as server:
        agent, _ = agent_for(server)
        turn = await agent.prompt("What is the weather in Paris?")
    assert turn.content == reply
    assert agent.state.error is None


async def test_deeply_nested_call_arguments_reach_the_model_as_an_error_and_the_run_goes_on() -> None:
    nested = Reply.stream(
        stream_of(tool_calls=[{"id": "c1", "name": "get_weather", "arguments": "[" * 1000}])
    )
    async with ScriptedServer(nested, Reply.stream(stream_of("Sorry, let me answer directly."))) as server:
        agent, events = agent_for(server)
        turn = await agent.prompt("What is the weather in Paris?")
    assert turn.content == "Sorry, let me answer directly."
    (ended,) = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert ended.disposition == "failed"
    assert "could not be read" in str(ended.result.content)


async def test_a_mangled_stream_ends_in_a_turn_with_one_notice() -> None:
    mangled: list[Any] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        "data: {not json\n\n",
        "data: null\n\n",
        {"choices": "all of them"},
        {"choices": [{"delta": ["x"]}]},
        {"choices": [{"delta": {"content": "It is "}}]},
        {"choices": [{"delta": {"content": {"t": 1}}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": "get_weather"}]}}]},
        {"choices": [{"delta": {"content": "sunny."}}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}]},
        "data: " + '{"choices": [], "usage": {"prompt_tokens": NaN, "completion_tokens": 1e400}}' + "\n\n",
    ]
    async with ScriptedServer(Reply.stream(mangled)) as server:
        agent, events = agent_for(server)
        turn = await agent.prompt("Weather?")
    assert turn.content == "It is sunny."
    notices = [e for e in events if isinstance(e, Notice) and e.name == "stream-skipped"]
    assert len(notices) == 1


async def test_a_stream_of_nothing_but_junk_is_an_empty_answer_not_a_crash() -> None:
    junk: list[Any] = ["data: <html>\n\n", "data: 5\n\n", "data: [[[[\n\n", {"choices": 7}]
    async with ScriptedServer(Reply.stream(junk)) as server:
        agent, events = agent_for(server)
        turn = await agent.prompt("Weather?")
    assert turn.content == ""
    assert any(isinstance(e, Notice) and e.name == "stream-skipped" for e in events)
