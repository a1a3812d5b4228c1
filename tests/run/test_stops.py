"""How runs stop, typed; the async-iterator forms; structured answers checked in the loop; force_abort."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import RunContextOverflow, RunEndpointError
from steadyloop.events import AgentEnd, Event, MessageEnd
from steadyloop.structured import OutputMismatch, read_structured
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

FAST = sl.LoopPolicy(retry=sl.RetryPolicy(base_delay_s=0.01, max_retries=0))
QUESTION = [sl.UserMessage(content="go")]


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def call(name: str, arguments: dict[str, Any], id: str = "c1") -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": name, "arguments": arguments}]))


@sl.tool
def echo(text: str) -> str:
    """Echo text back."""
    return text


async def run(server: ScriptedServer, **options: Any) -> sl.LoopResult:
    options.setdefault("messages", QUESTION)
    options.setdefault("policy", FAST)
    return await sl.run_agent_loop(sl.Endpoint(server.base_url), sl.ModelParams(model="m"), **options)


# -- a failed request is both the endpoint's error and the run's stop ----------------------------------


async def test_an_overflow_that_stops_a_run_is_caught_as_context_overflow() -> None:
    overflow = Reply.json(
        {"error": {"message": "request (9000 tokens) exceeds the available context size (4096 tokens)"}}, 400
    )
    async with ScriptedServer(call("echo", {"text": "a"}), overflow) as server:
        try:
            await run(server, tools=[echo])
        except sl.ContextOverflow as stop:
            assert isinstance(stop, sl.RunError) and isinstance(stop, RunContextOverflow)
            assert stop.reason == "overflow" and stop.steps == 1 and len(stop.messages) == 3
            assert stop.limit == 4096 and stop.status == 400 and isinstance(stop.cause, sl.ContextOverflow)
            assert isinstance(stop.__cause__, sl.ContextOverflow)
        else:
            pytest.fail("the overflow did not stop the run")


async def test_silence_that_stops_a_run_is_caught_as_endpoint_silent() -> None:
    silent = Reply.stream(text_chunks(["Half an ", "answer"]), stall_after=2)
    async with ScriptedServer(silent) as server:
        endpoint = sl.Endpoint(server.base_url, request_timeout=0.3, first_token_timeout=0.3)
        with pytest.raises(sl.EndpointSilent) as caught:
            await sl.run_agent_loop(endpoint, sl.ModelParams(model="m"), messages=QUESTION, policy=FAST)
    stop = caught.value
    assert isinstance(stop, sl.RunError) and stop.produced and stop.waited > 0
    assert stop.messages[-1] == sl.AssistantMessage(content="Half an ")  # what was shown is kept


async def test_a_refusal_that_stops_a_run_is_caught_as_endpoint_refused() -> None:
    refusal = Reply.json({"error": {"message": "invalid api key", "type": "invalid_request_error"}}, 401)
    async with ScriptedServer(refusal) as server:
        with pytest.raises(sl.EndpointRefused) as caught:
            await run(server)
    assert isinstance(caught.value, RunEndpointError) and caught.value.status == 401
    assert caught.value.messages == QUESTION and caught.value.reason == "endpoint"


# -- the two budgets stop the same way ---------------------------------------------------------------


async def test_max_turns_and_the_tool_budget_stop_alike() -> None:
    replies = [call("echo", {"text": "a"}), call("echo", {"text": "b"}, id="c2"), answer("done")]
    async with ScriptedServer(*replies) as server:
        with pytest.raises(sl.RunLimitReached) as turns:
            await run(server, tools=[echo], max_turns=2)
    async with ScriptedServer(*replies) as server:
        with pytest.raises(sl.RunLimitReached) as tools:
            await run(server, tools=[echo], policy=sl.LoopPolicy(max_tool_iterations=2))
    for stop, limit, reason in (
        (turns.value, "max_turns", "max_turns"),
        (tools.value, "max_tool_iterations", "max_iterations"),
    ):
        assert stop.limit == limit and stop.value == 2 and stop.reason == reason and stop.steps == 2
        assert isinstance(stop.messages[-1], sl.ToolResultMessage)


async def test_an_answer_at_the_limit_completes() -> None:
    async with ScriptedServer(call("echo", {"text": "a"}), answer("done")) as server:
        result = await run(server, tools=[echo], max_turns=2, policy=sl.LoopPolicy(max_tool_iterations=2))
    assert result.turn.content == "done" and result.steps == 2


# -- the run timeout -----------------------------------------------------------------------------------


async def test_a_run_timeout_raises_run_timed_out_with_reason_timeout() -> None:
    stalled = Reply.stream(text_chunks(["Thinking ", "hard"]), stall_after=2)
    async with ScriptedServer(stalled) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", run_timeout=0.3)
        ends: list[AgentEnd] = []
        agent.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnd) else None)
        with pytest.raises(sl.RunCancelled) as caught:
            await agent.prompt("go")
    stop = caught.value
    assert isinstance(stop, sl.RunTimedOut) and stop.reason == "timeout" and stop.timeout == 0.3
    assert ends[0].outcome == "timeout"
    assert agent.state.error == "the run took longer than run_timeout (0.3s)"


async def test_a_caller_cancel_still_works_beside_a_timeout() -> None:
    cancel = asyncio.Event()
    stalled = Reply.stream(text_chunks(["a", "b"]), stall_after=2)
    async with ScriptedServer(stalled) as server:
        task = asyncio.ensure_future(run(server, cancel=cancel, policy=sl.LoopPolicy(run_timeout=60)))
        await server.wait_for_requests(1)
        cancel.set()
        with pytest.raises(sl.RunCancelled) as caught:
            await task
    assert not isinstance(caught.value, sl.RunTimedOut) and caught.value.reason == "cancelled"


# -- async iterators -----------------------------------------------------------------------------------


async def test_the_loop_as_an_async_iterator() -> None:
    async with ScriptedServer(call("echo", {"text": "hi"}), answer("done")) as server:
        seen: list[Event] = []
        async with sl.stream_agent_loop(
            sl.Endpoint(server.base_url), sl.ModelParams(model="m"), messages=QUESTION, tools=[echo]
        ) as stream:
            async for event in stream:
                seen.append(event)
    assert seen[0].type == "agent_start" and seen[-1].type == "agent_end"
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert stream.result is not None and stream.result.turn.content == "done"


async def test_the_iterator_raises_the_runs_error_after_its_end() -> None:
    refusal = Reply.json({"error": {"message": "nope"}}, 400)
    async with ScriptedServer(refusal) as server:
        seen: list[str] = []
        with pytest.raises(sl.EndpointRefused):
            async for event in sl.stream_agent_loop(
                sl.Endpoint(server.base_url), sl.ModelParams(model="m"), messages=QUESTION, policy=FAST
            ):
                seen.append(event.type)
    assert seen[-1] == "agent_end"


async def test_leaving_the_iterator_early_aborts_the_run() -> None:
    stalled = Reply.stream(text_chunks(["a", "b"]), stall_after=2)
    async with ScriptedServer(stalled) as server:
        stream = sl.stream_agent_loop(
            sl.Endpoint(server.base_url), sl.ModelParams(model="m"), messages=QUESTION
        )
        async with stream:
            async for event in stream:
                if event.type == "message_update":
                    break
        assert server.disconnects == 1 or len(server.chat_requests) == 1
    assert stream.result is None


async def test_agent_stream_yields_every_event_and_keeps_the_state() -> None:
    async with ScriptedServer(call("echo", {"text": "hi"}), answer("done")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[echo])
        other: list[Event] = []
        agent.subscribe(other.append)
        stream = agent.stream("say hi")
        seen = [event async for event in stream]
    assert [e.seq for e in seen] == [e.seq for e in other] == list(range(1, len(seen) + 1))
    assert stream.turn is not None and stream.turn.content == "done"
    assert [e.message for e in seen if isinstance(e, MessageEnd)] == agent.state.messages
    assert not agent.is_running


async def test_agent_stream_is_the_barrier_for_the_tools() -> None:
    order: list[str] = []

    @sl.tool
    def step() -> str:
        """A step."""
        order.append("tool ran")
        return "ok"

    async with ScriptedServer(call("step", {}), answer("done")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[step])
        async for event in agent.stream("go"):
            if isinstance(event, MessageEnd) and isinstance(event.message, sl.AssistantMessage):
                await asyncio.sleep(0.05)  # a slow consumer
                order.append("consumer handled the call")
    assert order[:2] == ["consumer handled the call", "tool ran"]


async def test_breaking_out_of_agent_stream_aborts_the_run() -> None:
    stalled = Reply.stream(text_chunks(["a", "b"]), stall_after=2)
    async with ScriptedServer(stalled) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m")
        async with agent.stream("go") as stream:
            async for event in stream:
                if event.type == "message_update":
                    break
        await agent.wait_for_idle()
    assert not agent.is_running
    assert isinstance(agent.state.messages[-1], sl.AssistantMessage)  # the partial answer was kept


# -- structured answers -------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "weather", "schema": SCHEMA, "strict": True}}


async def test_an_answer_off_the_schema_goes_back_with_the_problem() -> None:
    replies = [answer('{"city": "Paris"}'), answer('```json\n{"city": "Paris", "temp": 18.5}\n```')]
    async with ScriptedServer(*replies) as server:
        events: list[Event] = []
        result = await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m", response_format=FORMAT),
            messages=QUESTION,
            on_event=events.append,
        )
        fix = server.chat_requests[1].json["messages"][-1]
    assert result.output == {"city": "Paris", "temp": 18.5}
    assert fix["role"] == "user" and 'lacks the field "temp"' in fix["content"]
    ended = [e.message for e in events if isinstance(e, MessageEnd)]
    assert ended == result.messages  # the correction entered the transcript with its events


async def test_an_answer_that_keeps_missing_the_schema_stops_the_run() -> None:
    replies = [answer("no json here")] * 2
    async with ScriptedServer(*replies) as server:
        with pytest.raises(sl.OutputInvalid) as caught:
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m", response_format=FORMAT),
                messages=QUESTION,
                policy=sl.LoopPolicy(output_retries=1),
            )
        assert len(server.chat_requests) == 2
    assert caught.value.reason == "invalid_output" and "not valid JSON" in caught.value.problem


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"city": 3, "temp": 1}', "$.city should be string"),
        ('{"city": "a", "temp": true}', "$.temp should be number"),
        ('{"city": "a", "temp": 1, "x": 0}', 'not allow: "x"'),
        ("[1, 2]", "$ should be object"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_read_structured_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(OutputMismatch, match=problem.replace("$", r"\$").replace("[", r"\[")):
        read_structured(text, SCHEMA)


# -- force_abort ---------------------------------------------------------------------------------------


async def test_force_abort_leaves_a_run_stuck_in_a_host_callback() -> None:
    stuck = asyncio.Event()
    entered = asyncio.Event()

    async def transform(messages: list[Any]) -> list[Any]:
        entered.set()
        await stuck.wait()  # a host callback that ignores the abort: the run cannot drain
        return messages

    async with ScriptedServer(answer("never")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", transform_context=transform)
        seen: list[Event] = []
        agent.subscribe(seen.append)
        task = asyncio.ensure_future(agent.prompt("go"))
        await entered.wait()
        agent.abort()
        await asyncio.sleep(0.05)
        assert not task.done()  # abort() alone did not end it
        assert agent.force_abort("stuck in transform_context")
        with pytest.raises(sl.RunCancelled) as caught:
            await task
        assert server.chat_requests == []
    assert caught.value.reason == "forced" and "stuck in transform_context" in str(caught.value)
    assert not agent.is_running and not agent.state.is_streaming
    assert agent.state.error == "the run was force-aborted: stuck in transform_context"
    assert agent.force_abort() is False  # nothing left to force
    stuck.set()
    count = len(seen)
    await asyncio.sleep(0.05)
    assert len(seen) == count  # what the abandoned run says afterwards reaches no listener


async def test_force_abort_after_the_run_ended_frees_a_hung_listener() -> None:
    hang, reached = asyncio.Event(), asyncio.Event()

    async def stuck(event: Event) -> None:
        if event.type == "agent_end":
            reached.set()
            await hang.wait()

    async with ScriptedServer(answer("hi")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m")
        agent.subscribe(stuck)
        task = asyncio.ensure_future(agent.prompt("go"))
        await reached.wait()
        assert not task.done()  # the run ended; its AgentEnd listener holds the prompt
        assert agent.force_abort()
        turn = await task  # the run had finished: its answer is still the prompt's
    assert turn.content == "hi" and not agent.is_running


async def test_force_abort_leaves_a_tool_that_ignores_cancellation() -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @sl.tool
    async def stubborn() -> str:
        """Ignores cancellation."""
        started.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return "finally"

    async with ScriptedServer(call("stubborn", {}), answer("unused")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[stubborn])
        task = asyncio.ensure_future(agent.prompt("go"))
        await started.wait()
        assert agent.force_abort()
        with pytest.raises(sl.RunCancelled, match="force-aborted"):
            await task
        assert not agent.is_running
        release.set()
