"""Interceptors on a run and on an Agent, against the scripted server: the assistant's events seen (and
rewritten) before any listener, the event contract kept when an interceptor fails, and the Agent's
interceptors settable between runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import RunInterceptorFailed
from steadyloop.events import AgentEnd, Event, MessageEnd, MessageStart, MessageUpdate
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire import DROP


def answer(text: str, reasoning: str = "") -> Any:
    return Reply.stream(stream_of(text, reasoning=reasoning))


def call(name: str, arguments: dict[str, Any]) -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": name, "arguments": arguments}]))


@sl.tool
def echo(text: str) -> str:
    """Echo text back."""
    return text


def check_contract(events: Sequence[Event]) -> list[sl.Message]:
    """seq one more each, every message start closed by its end; the transcript the ends make."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[-1], AgentEnd)
    built: list[sl.Message] = []
    open_ = False
    for event in events:
        if isinstance(event, MessageStart):
            assert not open_
            open_ = True
        elif isinstance(event, MessageEnd):
            assert open_
            open_ = False
            built.append(event.message)
    assert not open_
    return built


async def test_the_assistant_interceptor_sees_every_assistant_event_first_and_rewrites_updates() -> None:
    seen: list[str] = []

    def redact(event: Event) -> Any:
        seen.append(event.type)
        if isinstance(event, MessageUpdate):
            if event.kind == "thinking":
                return DROP
            return MessageUpdate(kind="text", delta=event.delta.replace("hunter2", "*******"))
        return None

    events: list[Event] = []
    messages: list[sl.Message] = [sl.UserMessage(content="go")]
    async with ScriptedServer(
        call("echo", {"text": "x"}), answer("the password is hunter2", reasoning="think")
    ) as server:
        result = await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m"),
            messages=messages,
            tools=[echo],
            on_event=events.append,
            interceptors=sl.Interceptors(on_assistant_event=redact),
        )
    built = check_contract(events)
    assert built == result.messages  # the transcript is what streamed, not what was shown
    assert result.turn.content == "the password is hunter2"
    shown = "".join(e.delta for e in events if isinstance(e, MessageUpdate))
    assert shown == "the password is *******"
    assert not [e for e in events if isinstance(e, MessageUpdate) and e.kind == "thinking"]
    # The tool-call message is opened and closed too; the user's and the tool result's are not assistant's.
    assert seen.count("message_start") == 2 and seen.count("message_end") == 2
    assert all(e.run_id == events[0].run_id for e in events)


@pytest.mark.parametrize("mode", ["raises", "replaces_the_end"])
async def test_a_failing_assistant_interceptor_stops_the_run_and_keeps_the_contract(mode: str) -> None:
    def broken(event: Event) -> Any:
        if mode == "raises" and isinstance(event, MessageUpdate):
            raise ValueError("listener bug")
        if mode == "replaces_the_end" and isinstance(event, MessageEnd):
            return MessageEnd(message=sl.AssistantMessage(content="forged"))
        return None

    events: list[Event] = []
    async with ScriptedServer(answer("hello there")) as server:
        with pytest.raises(sl.InterceptorFailed) as caught:
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m"),
                messages=[sl.UserMessage(content="hi")],
                on_event=events.append,
                interceptors=sl.Interceptors(on_assistant_event=broken),
            )
    error = caught.value
    assert isinstance(error, RunInterceptorFailed) and isinstance(error, sl.RunError)
    assert error.interceptor == "on_assistant_event" and error.reason == "interceptor"
    built = check_contract(events)
    assert built == error.messages and len(built) == 2
    assert "forged" not in repr(built)
    assert events[-1].outcome == "error"  # type: ignore[union-attr]


async def test_wire_interceptors_see_each_step_of_a_run() -> None:
    bodies: list[dict[str, Any]] = []
    statuses: list[int] = []
    async with ScriptedServer(call("echo", {"text": "x"}), answer("done")) as server:
        await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m"),
            messages=[sl.UserMessage(content="go")],
            tools=[echo],
            interceptors=sl.Interceptors(
                on_payload=bodies.append, on_response=lambda r: statuses.append(r.status)
            ),
        )
        sent = [r.json for r in server.chat_requests]
    assert bodies == sent and statuses == [200, 200]
    assert [m["role"] for m in sent[1]["messages"]] == ["user", "assistant", "tool"]


async def test_an_agent_takes_interceptors_and_they_can_be_set_between_runs() -> None:
    first: list[int] = []
    second: list[int] = []
    shown: list[str] = []
    async with ScriptedServer(answer("one"), answer("two")) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            interceptors=sl.Interceptors(on_response=lambda r: first.append(r.status)),
        )
        agent.subscribe(lambda e: shown.append(e.delta) if isinstance(e, MessageUpdate) else None)
        await agent.prompt("first")
        agent.interceptors = sl.Interceptors(
            on_response=lambda r: second.append(r.status),
            on_assistant_event=lambda e: (
                MessageUpdate(kind="text", delta="<x>") if isinstance(e, MessageUpdate) else None
            ),
        )
        turn = await agent.prompt("second")
    assert first == [200] and second == [200]
    assert turn.content == "two" and agent.state.messages[-1].content == "two"  # type: ignore[union-attr]
    assert "".join(shown).startswith("one") and "".join(shown).endswith("<x>")


async def test_an_agent_run_stopped_by_an_interceptor_says_which() -> None:
    def refuse(body: dict[str, Any]) -> None:
        raise PermissionError("not through this proxy")

    async with ScriptedServer(answer("never")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", interceptors=sl.Interceptors(on_payload=refuse))
        with pytest.raises(RunInterceptorFailed, match="on_payload") as caught:
            await agent.prompt("hi")
        assert server.chat_requests == []
    assert isinstance(caught.value.__cause__, sl.InterceptorFailed)
    assert agent.state.error is not None and "not through this proxy" in agent.state.error
