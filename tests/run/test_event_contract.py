"""The event contract, on every way a run can end, against the scripted server.

Every ``MessageStart`` is closed by its ``MessageEnd`` and every ``TurnStart`` by its ``TurnEnd``; ``seq``
runs from 1 by one; one ``AgentEnd`` comes last; a listener that builds the transcript from
``MessageEnd`` holds exactly what the agent (or the run's result or error) holds; and the text deltas of an
assistant message add up to its content (less the text of the calls recovered from it, which is never shown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.context import check_transcript
from steadyloop.errors import RunEndpointError
from steadyloop.events import (
    AgentEnd,
    AgentStart,
    Event,
    HookDenied,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnEnd,
    TurnStart,
)
from steadyloop.loop import ModelCall
from steadyloop.messages import messages_from_json, messages_to_json
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools import HookDecision, ToolHooks
from steadyloop.tools.loop_detection import LoopDetectorConfig

FAST = sl.RetryPolicy(base_delay_s=0.01, max_retries=1)
LLM = (sl.SystemMessage, sl.UserMessage, sl.AssistantMessage, sl.ToolResultMessage)


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def call(name: str, arguments: dict[str, Any], id: str = "c1") -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": name, "arguments": arguments}]))


@sl.tool
def echo(text: str) -> str:
    """Echo text back."""
    return text


def contract(events: Sequence[Event]) -> list[sl.Message]:
    """Check the contract over one run's events; the transcript its ``MessageEnd`` events make."""
    assert isinstance(events[0], AgentStart)
    ends = [i for i, e in enumerate(events) if isinstance(e, AgentEnd)]
    assert ends == [len(events) - 1], "exactly one AgentEnd, and it comes last"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.run_id for e in events}) == 1 and events[0].run_id
    message_open = turn_open = False
    built: list[sl.Message] = []
    shown: list[str] = []
    for event in events:
        if isinstance(event, MessageStart):
            assert turn_open and not message_open
            message_open = True
            shown = []
        elif isinstance(event, MessageUpdate):
            assert message_open
            if event.kind == "text":
                shown.append(event.delta)
        elif isinstance(event, MessageEnd):
            assert message_open
            message_open = False
            built.append(event.message)
            if isinstance(event.message, sl.AssistantMessage):
                text, content = "".join(shown), event.message.content
                # Recovery trims what a call leaves; anything else is shown exactly as it entered.
                assert text == content or (event.message.tool_calls and text.strip() == content)
        elif isinstance(event, TurnStart):
            assert not turn_open and not message_open
            turn_open = True
        elif isinstance(event, TurnEnd):
            assert turn_open and not message_open
            turn_open = False
        elif isinstance(event, AgentEnd):
            assert not turn_open and not message_open
    return built


@dataclass
class Ending:
    """One way for a run to end: what the server plays, how the agent is set up, what must come of it."""

    name: str
    replies: list[Any]
    outcome: str
    error: type[BaseException] | None = None
    agent: dict[str, Any] = field(default_factory=dict)
    abort_on: Callable[[Event], bool] | None = None
    last_is_partial: str | None = None


CALL_AS_TEXT = ['{"name": "echo", ', '"arguments": ', '{"text": "hi"}}']


@sl.tool
async def wait_forever(n: int) -> str:
    """Wait until cancelled."""
    await asyncio.Event().wait()
    return "never"


ENDINGS = [
    Ending("completed", [call("echo", {"text": "hi"}), answer("done")], "completed"),
    Ending(
        "a call written as text",
        [
            Reply.stream(text_chunks(["I will echo it.\n<tool_call>", *CALL_AS_TEXT, "</tool_call>"])),
            answer("ok"),
        ],
        "completed",
    ),
    Ending(
        "timeout while a call written as text is held",
        [Reply.stream(text_chunks(CALL_AS_TEXT), stall_after=2)],
        "timeout",
        sl.RunTimedOut,
        agent={"run_timeout": 0.5},
        last_is_partial='{"name": "echo", ',  # kept and shown: no call is made of a reply cut off
    ),
    Ending(
        "error mid-stream",
        [Reply.stream(text_chunks(["Partial ", "answer", " lost"]), disconnect_after=3)],
        "error",
        RunEndpointError,
        last_is_partial="Partial answer",
    ),
    Ending(
        "error before any output",
        [Reply.json({"error": {"message": "no such model"}}, 404)],
        "error",
        sl.EndpointError,
    ),
    Ending(
        "abort mid-stream",
        [Reply.stream(text_chunks(["Partial ", "answer", " never"]), stall_after=2)],
        "cancelled",
        sl.RunCancelled,
        abort_on=lambda e: isinstance(e, MessageUpdate),
        last_is_partial="Partial ",
    ),
    Ending(
        "abort mid-tools",
        [call("wait_forever", {"n": 1})],
        "cancelled",
        sl.RunCancelled,
        abort_on=lambda e: e.type == "tool_execution_start",
    ),
    Ending(
        "timeout mid-stream",
        [Reply.stream(text_chunks(["Slow ", "answer"]), stall_after=2)],
        "timeout",
        sl.RunTimedOut,
        agent={"run_timeout": 0.5},
        last_is_partial="Slow ",
    ),
    Ending(
        "hook denial",
        [answer("never sent")],
        "hook_denied",
        sl.ModelCallDenied,
        agent={"before_llm_call": lambda call: HookDecision.block("no budget left")},
    ),
    Ending(
        "max_turns",
        [call("echo", {"text": "a"}), answer("unused")],
        "max_turns",
        sl.RunLimitReached,
        agent={"max_turns": 1},
    ),
    Ending(
        "iteration budget",
        [call("echo", {"text": "a"}), call("echo", {"text": "b"}, id="c2"), answer("unused")],
        "max_iterations",
        sl.RunLimitReached,
        agent={"policy": sl.LoopPolicy(max_tool_iterations=2, retry=FAST)},
    ),
    Ending(
        "loop detected",
        [call("echo", {"text": "a"}, id=f"c{n}") for n in range(4)],
        "loop_detected",
        sl.ToolLoopDetected,
        agent={
            "policy": sl.LoopPolicy(
                loop_detection=LoopDetectorConfig(identical_repeat=2, escalate_after=0), retry=FAST
            )
        },
    ),
]


@pytest.mark.parametrize("ending", ENDINGS, ids=[e.name for e in ENDINGS])
async def test_the_listeners_transcript_is_the_agents_on_every_ending(ending: Ending) -> None:
    async with ScriptedServer(*ending.replies) as server:
        options = {"policy": sl.LoopPolicy(retry=FAST), **ending.agent}
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[echo, wait_forever], **options)
        events: list[Event] = []

        def listen(event: Event) -> None:
            events.append(event)
            if ending.abort_on is not None and ending.abort_on(event):
                agent.abort()

        agent.subscribe(listen)
        if ending.error is None:
            await agent.prompt("go")
        else:
            with pytest.raises(ending.error) as caught:
                await agent.prompt("go")
            stop = caught.value
            assert isinstance(stop, sl.RunError)
            assert stop.messages == agent.state.messages  # the error carries the same transcript
    built = contract(events)
    assert built == agent.state.messages
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.outcome == ending.outcome
    if ending.last_is_partial is not None:
        last = agent.state.messages[-1]
        assert isinstance(last, sl.AssistantMessage) and last.content == ending.last_is_partial
        assert not last.tool_calls
    assert check_transcript(agent.state.messages) is not None


async def test_a_request_refused_before_output_opens_no_message_and_closes_its_turn() -> None:
    refusal = Reply.json({"error": {"message": "bad request", "type": "invalid_request_error"}}, 400)
    async with ScriptedServer(refusal) as server:
        events: list[Event] = []
        with pytest.raises(sl.EndpointRefused) as caught:
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m"),
                messages=[sl.UserMessage(content="hi")],
                on_event=events.append,
                policy=sl.LoopPolicy(retry=FAST),
            )
    built = contract(events)
    assert built == [sl.UserMessage(content="hi")] == caught.value.messages
    turn_end = next(e for e in events if isinstance(e, TurnEnd))
    assert turn_end.message is None and turn_end.error and "bad request" in turn_end.error
    assert isinstance(caught.value, sl.RunError) and caught.value.status == 400


async def test_seq_starts_at_one_for_every_run_of_an_agent() -> None:
    async with ScriptedServer(answer("one"), answer("two")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m")
        seen: list[Event] = []
        agent.subscribe(seen.append)
        await agent.prompt("first")
        await agent.prompt("second")
    starts = [i for i, e in enumerate(seen) if isinstance(e, AgentStart)]
    first, second = seen[: starts[1]], seen[starts[1] :]
    assert [e.seq for e in first] == list(range(1, len(first) + 1))
    assert [e.seq for e in second] == list(range(1, len(second) + 1))
    assert first[0].run_id != second[0].run_id
    assert contract(first) + contract(second) == agent.state.messages


async def test_async_listeners_are_a_barrier_before_the_tools_preflight() -> None:
    order: list[str] = []

    async def slow_store(event: Event) -> None:
        if isinstance(event, MessageEnd) and isinstance(event.message, sl.AssistantMessage):
            for _ in range(20):  # a store taking its time; the tool must not overtake it
                await asyncio.sleep(0)
            order.append(f"stored {len(event.message.tool_calls)} calls")
        elif isinstance(event, MessageEnd) and isinstance(event.message, sl.ToolResultMessage):
            order.append("stored result")

    def before(call: sl.ToolCall, arguments: dict[str, Any]) -> None:
        in_state = [m for m in agent.state.messages if isinstance(m, sl.AssistantMessage)]
        order.append(f"preflight sees {len(in_state)} assistant message(s)")

    @sl.tool
    def step() -> str:
        """One step."""
        order.append("tool ran")
        return "ok"

    async with ScriptedServer(call("step", {}), answer("done")) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url), "m", tools=[step], hooks=ToolHooks(before_tool_call=before)
        )
        agent.subscribe(slow_store)
        await agent.prompt("go")
    assert order == [
        "stored 1 calls",
        "preflight sees 1 assistant message(s)",
        "tool ran",
        "stored result",
        "stored 0 calls",
    ]


async def test_should_stop_after_turn_may_be_async() -> None:
    asked: list[int] = []

    async def stop(turn: sl.Turn, messages: list[sl.Message]) -> bool:
        asked.append(len(messages))
        return len(asked) >= 2

    replies = [call("echo", {"text": "a"}), call("echo", {"text": "b"}, id="c2"), answer("unused")]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[echo], should_stop_after_turn=stop)
        ends: list[AgentEnd] = []
        agent.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnd) else None)
        await agent.prompt("go")
        assert len(server.chat_requests) == 2  # a coroutine is awaited, not taken as a truthy "stop"
    assert ends[0].outcome == "stopped"


async def test_context_hooks_and_the_key_resolver_run_before_every_request() -> None:
    seen_by_transform: list[int] = []
    keys = iter(["key-1", "key-2", "key-3"])

    async def transform(messages: list[Any]) -> list[Any]:
        seen_by_transform.append(len(messages))
        # Pruning that must apply to later steps too: old tool results are shortened.
        return [
            sl.ToolResultMessage(call_id=m.call_id, content="[pruned]", name=m.name)
            if isinstance(m, sl.ToolResultMessage)
            else m
            for m in messages
        ]

    converted: list[int] = []

    async def convert(messages: Sequence[Any]) -> list[sl.Message]:
        converted.append(len(messages))
        return [m for m in messages if isinstance(m, LLM)]

    replies = [call("echo", {"text": "x" * 50}), call("echo", {"text": "y"}, id="c2"), answer("done")]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            tools=[echo],
            transform_context=transform,
            convert_to_llm=convert,
            api_key=lambda: next(keys),
        )
        await agent.prompt("go")
        requests = server.chat_requests
    assert seen_by_transform == [1, 3, 5] and converted == [1, 3, 5]
    assert [r.header("authorization") for r in requests] == ["Bearer key-1", "Bearer key-2", "Bearer key-3"]
    assert requests[2].json["messages"][2]["content"] == "[pruned]"  # the first result, pruned later too
    results = [m for m in agent.state.messages if isinstance(m, sl.ToolResultMessage)]
    assert results[0].content == "x" * 50  # the transcript itself is left alone


@dataclass
class Note:
    """A host message the model never reads as it is: ``convert_to_llm`` turns it into a user message."""

    text: str


async def test_the_context_hooks_run_once_per_request_transform_first_from_any_entry() -> None:
    calls: list[str] = []

    async def transform(messages: list[Any]) -> list[Any]:
        calls.append(f"transform {len(messages)}")
        return messages

    def convert(messages: Sequence[Any]) -> list[sl.Message]:
        calls.append(f"convert {len(messages)}")
        return [sl.UserMessage(content=m.text) if isinstance(m, Note) else m for m in messages]

    replies = [call("echo", {"text": "x"}), answer("done"), answer("again"), answer("loop")]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            tools=[echo],
            transform_context=transform,
            convert_to_llm=convert,
        )
        await agent.prompt("go")
        assert calls == ["transform 1", "convert 1", "transform 3", "convert 3"]
        calls.clear()
        agent.state.messages.append(Note("and once more"))  # only the hook makes this something to answer
        await agent.continue_()
        assert calls == ["transform 5", "convert 5"]
        calls.clear()
        await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m"),
            messages=[Note("hello")],  # type: ignore[list-item]
            transform_context=transform,
            convert_to_llm=convert,
        )
        assert calls == ["transform 1", "convert 1"]
        assert server.chat_requests[-1].json["messages"][-1] == {"role": "user", "content": "hello"}


async def test_a_run_refuses_an_empty_or_answered_transcript() -> None:
    events: list[Event] = []
    endpoint = sl.Endpoint("http://127.0.0.1:9/v1")
    with pytest.raises(sl.InvalidInput, match="empty"):
        await sl.run_agent_loop(endpoint, sl.ModelParams(model="m"), messages=[], on_event=events.append)
    answered = [sl.UserMessage(content="hi"), sl.AssistantMessage(content="hello")]
    with pytest.raises(sl.InvalidInput, match="ends in an assistant message"):
        await sl.run_agent_loop(
            endpoint, sl.ModelParams(model="m"), messages=answered, on_event=events.append
        )
    assert events == []  # refused before it started


async def test_a_chat_message_written_as_a_mapping_is_refused_not_dropped() -> None:
    # A host's own messages stay out of the prompt; one in the wire's shape would vanish without a word.
    events: list[Event] = []
    endpoint = sl.Endpoint("http://127.0.0.1:9/v1")
    written = [{"role": "assistant", "content": "Earlier answer."}, sl.UserMessage(content="And now?")]
    refused = r"message 0 is a plain mapping \(role 'assistant'\).*steadyloop\.messages\.from_openai"
    with pytest.raises(sl.InvalidInput, match=refused):
        await sl.run_agent_loop(
            endpoint,
            sl.ModelParams(model="m"),
            messages=written,  # type: ignore[list-item]
            on_event=events.append,
        )
    assert events == []


async def test_a_sync_tool_that_times_out_reports_its_late_settlement() -> None:
    import threading

    release = threading.Event()

    @sl.tool(timeout=0.2)
    def slow_sync(n: int) -> str:
        """Block until released."""
        release.wait(10)
        return f"finished {n}"

    late = asyncio.Event()
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if event.type == "tool_execution_late_settlement":
            late.set()

    async with ScriptedServer(call("slow_sync", {"n": 7}), answer("moved on")) as server:
        result = await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m"),
            messages=[sl.UserMessage(content="go")],
            tools=[slow_sync],
            on_event=on_event,
        )
    timed_out = result.messages[2]
    assert isinstance(timed_out, sl.ToolResultMessage) and timed_out.disposition == "timeout"
    assert result.turn.content == "moved on"
    release.set()  # the thread was never stopped: it finishes now, after the run
    await asyncio.wait_for(late.wait(), 10)
    settled = events[-1]
    assert settled.type == "tool_execution_late_settlement"
    assert settled.outcome == "completed" and settled.text == "finished 7" and settled.call_id == "c1"


async def test_a_sync_tool_that_raises_after_its_timeout_is_reported_failed() -> None:
    import threading

    release = threading.Event()

    @sl.tool(timeout=0.2)
    def breaks_late() -> str:
        """Fails, late."""
        release.wait(10)
        raise RuntimeError("disk full")

    late = asyncio.Event()
    settled: list[Any] = []

    def on_event(event: Event) -> None:
        if event.type == "tool_execution_late_settlement":
            settled.append(event)
            late.set()

    async with ScriptedServer(call("breaks_late", {}), answer("ok")) as server:
        await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m"),
            messages=[sl.UserMessage(content="go")],
            tools=[breaks_late],
            on_event=on_event,
        )
    release.set()
    await asyncio.wait_for(late.wait(), 10)
    assert settled[0].outcome == "failed" and "disk full" in settled[0].text


async def test_a_sync_tool_that_settles_after_the_agent_run_ended_reaches_its_listeners() -> None:
    import threading

    release = threading.Event()

    @sl.tool(timeout=0.2)
    def slow_sync(n: int) -> str:
        """Block until released."""
        release.wait(10)
        return f"finished {n}"

    late = asyncio.Event()
    heard: list[Event] = []

    async def listener(event: Event) -> None:
        heard.append(event)
        if event.type == "tool_execution_late_settlement":
            late.set()

    async with ScriptedServer(call("slow_sync", {"n": 3}), answer("moved on")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[slow_sync])
        agent.subscribe(listener)
        turn = await agent.prompt("go")
    assert turn.content == "moved on" and not agent.is_running
    assert heard[-1].type == "agent_end"  # the run is over, and its listeners heard all of it
    release.set()  # the thread was never stopped: it finishes now, after the run
    await asyncio.wait_for(late.wait(), 10)
    settled = heard[-1]
    assert settled.type == "tool_execution_late_settlement"
    assert settled.outcome == "completed" and settled.text == "finished 3" and settled.call_id == "c1"
    assert settled.run_id == heard[0].run_id and settled.seq == heard[-2].seq + 1
    assert agent.state.messages[2].disposition == "timeout"  # type: ignore[union-attr]


async def test_dispositions_are_kept_on_the_result_messages() -> None:
    def before(call: sl.ToolCall, arguments: dict[str, Any]) -> HookDecision | None:
        return HookDecision.block("not this one") if arguments.get("text") == "no" else None

    reply = Reply.stream(
        stream_of(
            tool_calls=[
                {"id": "a", "name": "echo", "arguments": {"text": "yes"}},
                {"id": "b", "name": "echo", "arguments": {"text": "no"}},
                {"id": "c", "name": "missing", "arguments": {}},
            ]
        )
    )
    async with ScriptedServer(reply, answer("done")) as server:
        result = await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m"),
            messages=[sl.UserMessage(content="go")],
            tools=[echo],
            hooks=ToolHooks(before_tool_call=before),
        )
        sent = server.chat_requests[1].json["messages"]
    results = [m for m in result.messages if isinstance(m, sl.ToolResultMessage)]
    assert [r.disposition for r in results] == ["completed", "blocked", "failed"]
    again = messages_from_json(messages_to_json(results))
    assert [r.disposition for r in again if isinstance(r, sl.ToolResultMessage)] == [
        "completed",
        "blocked",
        "failed",
    ]
    assert all("disposition" not in m for m in sent)  # never sent to the model


async def test_before_llm_call_sees_each_request_and_a_denial_sends_nothing() -> None:
    shown: list[ModelCall] = []

    async def guard(call: ModelCall) -> HookDecision | None:
        shown.append(call)
        return HookDecision.block("over budget") if call.step == 2 else None

    async with ScriptedServer(call("echo", {"text": "a"}), answer("unused")) as server:
        events: list[Event] = []
        with pytest.raises(sl.ModelCallDenied) as caught:
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m"),
                messages=[sl.UserMessage(content="go")],
                tools=[echo],
                before_llm_call=guard,
                on_event=events.append,
            )
        assert len(server.chat_requests) == 1
    assert [c.step for c in shown] == [1, 2] and shown[1].messages[-1].role == "tool"
    assert caught.value.reason == "hook_denied" and caught.value.hook_reason == "over budget"
    denied = [e for e in events if isinstance(e, HookDenied)]
    assert denied and denied[0].hook == "before_llm_call" and denied[0].reason == "over budget"
    assert contract(events)[1:] == caught.value.messages[1:]
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.outcome == "hook_denied"


async def test_a_before_llm_call_hook_that_breaks_denies_rather_than_waves_through() -> None:
    def broken(call: ModelCall) -> None:
        raise ValueError("bug in the guard")

    async with ScriptedServer(answer("unused")) as server:
        with pytest.raises(sl.ModelCallDenied, match="bug in the guard"):
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m"),
                messages=[sl.UserMessage(content="go")],
                before_llm_call=broken,
            )
        assert server.chat_requests == []
