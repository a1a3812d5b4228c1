"""No user of the library is shown a tool call the model wrote as text.

A model whose server did not parse its call writes the call as answer text, and the run reads it back as a
call once the reply is complete. Every way of watching a run (``Agent.subscribe``, ``agent.stream``,
``stream_agent_loop``, ``run_agent_loop(on_event=...)``) gets the answer text only once it cannot be part
of such a call, then the call, then the answer; prose still streams piece by piece.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest

import steadyloop as sl
from steadyloop.events import Event, MessageUpdate, Notice, ToolExecutionStart
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
ANSWER = ["It is ", "sunny ", "in ", "Paris."]
FAST = sl.RetryPolicy(base_delay_s=0.01, max_retries=0)


@sl.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


def pieces(text: str, size: int = 7) -> list[str]:
    """The text in pieces as small as tokens, so a call's opening arrives before the rest of it."""
    return [text[i : i + size] for i in range(0, len(text), size)]


# How the model writes the call: bare (the README's snippet on the bundled model), fenced, tagged after prose.
WRITTEN = {
    "bare": ("", CALL),
    "fenced": ("", f"```json\n{CALL}\n```"),
    "tagged after prose": ("Let me check.\n", f"Let me check.\n<tool_call>\n{CALL}\n</tool_call>"),
}

Watch = Callable[[ScriptedServer], Awaitable[list[Event]]]


def _agent(server: ScriptedServer) -> sl.Agent:
    return sl.Agent(sl.Endpoint(server.base_url), "m", tools=[get_weather], policy=sl.LoopPolicy(retry=FAST))


async def _subscribed(server: ScriptedServer) -> list[Event]:
    agent, seen = _agent(server), []
    agent.subscribe(seen.append)
    await agent.prompt("What is the weather in Paris?")
    return seen


async def _agent_stream(server: ScriptedServer) -> list[Event]:
    return [event async for event in _agent(server).stream("What is the weather in Paris?")]


async def _loop_stream(server: ScriptedServer) -> list[Event]:
    seen: list[Event] = []
    async with sl.stream_agent_loop(
        sl.Endpoint(server.base_url),
        sl.ModelParams(model="m"),
        messages=[sl.UserMessage(content="What is the weather in Paris?")],
        tools=[get_weather],
        policy=sl.LoopPolicy(retry=FAST),
    ) as run:
        async for event in run:
            seen.append(event)
    return seen


async def _on_event(server: ScriptedServer) -> list[Event]:
    seen: list[Event] = []
    await sl.run_agent_loop(
        sl.Endpoint(server.base_url),
        sl.ModelParams(model="m"),
        messages=[sl.UserMessage(content="What is the weather in Paris?")],
        tools=[get_weather],
        policy=sl.LoopPolicy(retry=FAST),
        on_event=seen.append,
    )
    return seen


WATCHES: dict[str, Watch] = {
    "Agent.subscribe": _subscribed,
    "agent.stream": _agent_stream,
    "stream_agent_loop": _loop_stream,
    "run_agent_loop on_event": _on_event,
}


def _text(events: list[Event]) -> str:
    return "".join(e.delta for e in events if isinstance(e, MessageUpdate) and e.kind == "text")


@pytest.mark.parametrize("watch", WATCHES.values(), ids=WATCHES.keys())
@pytest.mark.parametrize("written", WRITTEN.values(), ids=WRITTEN.keys())
async def test_a_call_written_as_text_reaches_no_watcher_as_text(
    watch: Watch, written: tuple[str, str]
) -> None:
    before, reply = written
    async with ScriptedServer(
        Reply.stream(text_chunks(pieces(reply))), Reply.stream(text_chunks(ANSWER))
    ) as server:
        events = await watch(server)
    shown = _text(events)
    assert "get_weather" not in shown and "{" not in shown
    assert shown == before + "".join(ANSWER)
    call = next(i for i, e in enumerate(events) if isinstance(e, ToolExecutionStart))
    assert isinstance(events[call], ToolExecutionStart) and events[call].arguments == {"city": "Paris"}
    assert _text(events[:call]) == before and _text(events[call:]) == "".join(ANSWER)
    assert [e.name for e in events if isinstance(e, Notice)].count("call_held") == 1


async def test_prose_is_shown_before_the_reply_ends() -> None:
    # The stream stalls after its first piece: that piece reaches the watcher while the reply is unfinished.
    stalled = Reply.stream(text_chunks(["The weather ", "is ", "sunny."]), stall_after=2)
    async with ScriptedServer(stalled) as server:
        agent, seen = _agent(server), []

        def listen(event: Event) -> None:
            seen.append(event)
            if isinstance(event, MessageUpdate):
                agent.abort()

        agent.subscribe(listen)
        with pytest.raises(sl.RunCancelled):
            await agent.prompt("Weather?")
    assert [e.delta for e in seen if isinstance(e, MessageUpdate)] == ["The weather "]
    assert not [e for e in seen if isinstance(e, Notice) and e.name == "call_held"]


async def test_json_that_is_no_call_is_shown_whole_once_the_reply_is_decided() -> None:
    reply = '{"colour": "red"} is the JSON you asked for.'
    async with ScriptedServer(Reply.stream(text_chunks(pieces(reply)))) as server:
        events = await _subscribed(server)
    assert _text(events) == reply
    assert not [e for e in events if isinstance(e, ToolExecutionStart)]


async def test_without_tools_nothing_is_held() -> None:
    # No tool is declared, so no call can be read from the text: its first piece is shown while the stream
    # is stalled after it.
    chunks = pieces(CALL)
    stalled = Reply.stream(text_chunks(chunks), stall_after=2)
    cancel = asyncio.Event()
    seen: list[Event] = []

    def listen(event: Event) -> None:
        seen.append(event)
        if isinstance(event, MessageUpdate):
            cancel.set()

    async with ScriptedServer(stalled) as server:
        with pytest.raises(sl.RunCancelled) as stopped:
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m"),
                messages=[sl.UserMessage(content="Show a call.")],
                on_event=listen,
                cancel=cancel,
            )
    assert _text(seen) == chunks[0]
    assert stopped.value.messages[-1] == sl.AssistantMessage(content=chunks[0])
    assert not [e for e in seen if isinstance(e, Notice) and e.name == "call_held"]
