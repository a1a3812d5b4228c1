"""An Agent's ``StepRecorder`` runs each model request and each tool execution of a run, against the
scripted server: a batch's calls are announced in the order the model listed them before any starts, and a
recorder that gives back what an earlier run returned replaces the request and the tool outright."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import steadyloop as sl
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools import ResourceClaim

T = TypeVar("T")

ran: list[str] = []


@sl.tool(effect="read", claims=[ResourceClaim("notes")])
async def note(text: str) -> str:
    """Read a note.

    Args:
        text: which.
    """
    ran.append(text)
    return f"note {text}"


CALLS = [
    {"id": "c1", "name": "note", "arguments": {"text": "a"}},
    {"id": "c2", "name": "note", "arguments": {"text": "b"}},
    {"id": "c3", "name": "note", "arguments": {"text": "c"}},
]


class Keeper:
    """Keeps each output, in the order they are made (tool results by call id)."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.results: dict[str, Any] = {}
        self.batches: list[list[str]] = []

    async def model_request(self, send: Callable[[], Awaitable[T]]) -> T:
        answer = await send()
        self.answers.append(answer)
        return answer

    def tool_batch(self, calls: Sequence[sl.ToolCall]) -> None:
        self.batches.append([call.id for call in calls])

    async def tool_execution(self, call: sl.ToolCall, execute: Callable[[], Awaitable[T]]) -> T:
        result = await execute()
        self.results[call.id] = result
        return result


class Replayer:
    """Gives back what a ``Keeper`` kept: nothing is sent and no tool runs."""

    def __init__(self, kept: Keeper) -> None:
        self.answers = list(kept.answers)
        self.results = dict(kept.results)

    async def model_request(self, send: Callable[[], Awaitable[T]]) -> T:
        answer: T = self.answers.pop(0)
        return answer

    def tool_batch(self, calls: Sequence[sl.ToolCall]) -> None:
        pass

    async def tool_execution(self, call: sl.ToolCall, execute: Callable[[], Awaitable[T]]) -> T:
        result: T = self.results.pop(call.id)
        return result


async def test_a_recorder_sees_each_request_and_each_execution_and_can_give_them_back() -> None:
    ran.clear()
    keeper = Keeper()
    script = [Reply.stream(stream_of(tool_calls=CALLS)), Reply.stream(stream_of("three notes"))]
    async with ScriptedServer(*script) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[note], recorder=keeper)
        turn = await agent.prompt("read them")
        sent = len(server.chat_requests)
    assert turn.content == "three notes" and sent == 2
    assert keeper.batches == [["c1", "c2", "c3"]], "announced in the order listed, before any started"
    assert len(keeper.answers) == 2 and sorted(keeper.results) == ["c1", "c2", "c3"]
    assert sorted(ran) == ["a", "b", "c"]

    ran.clear()
    replayer = Replayer(keeper)
    async with ScriptedServer() as server:
        again = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[note], recorder=replayer)
        replayed = await again.prompt("read them")
        assert server.chat_requests == [], "no request was sent"
    assert ran == [], "no tool ran"
    assert replayed.content == "three notes"
    assert again.state.messages == agent.state.messages
    assert not replayer.answers and not replayer.results, "every kept output was given back"


async def test_without_a_recorder_the_agent_runs_as_before() -> None:
    script = [Reply.stream(stream_of(tool_calls=CALLS[:1])), Reply.stream(stream_of("one note"))]
    async with ScriptedServer(*script) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[note])
        assert agent.recorder is None
        assert (await agent.prompt("read it")).content == "one note"
        assert len(server.chat_requests) == 2
