"""Agent: state, listeners as a barrier, queues, interrupt modes, abort, continue."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from steadyloop.agent import Agent, AgentBusy
from steadyloop.errors import InvalidInput, RunCancelled
from steadyloop.events import AgentEnd, Event
from steadyloop.loop import LoopPolicy
from steadyloop.messages import AssistantMessage, ToolResultMessage, UserMessage
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import ToolContext, tool
from steadyloop.tools.execution import ToolPolicy
from steadyloop.wire.endpoints import Endpoint


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def calls(*pairs: tuple[str, dict[str, Any]]) -> Any:
    return Reply.stream(
        stream_of(tool_calls=[{"id": f"c{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(pairs)])
    )


@tool
def echo(text: str) -> str:
    """Echo text back."""
    return text


async def test_prompt_updates_state_and_listeners_are_a_barrier() -> None:
    async with ScriptedServer(answer("Hi!")) as server:
        agent = Agent(Endpoint(server.base_url), "m", system="Be kind.")
        seen: list[str] = []
        finished = asyncio.Event()

        async def slow(event: Event) -> None:
            seen.append(event.type)
            if isinstance(event, AgentEnd):
                await asyncio.sleep(0.05)
                finished.set()

        agent.subscribe(slow)
        agent.subscribe(lambda e: seen.append("second:" + e.type))
        turn = await agent.prompt("Hello")
        assert finished.is_set(), "prompt() returns only after AgentEnd listeners finished"
    assert turn.content == "Hi!"
    assert [type(m).__name__ for m in agent.state.messages] == ["UserMessage", "AssistantMessage"]
    assert not agent.state.is_streaming and agent.state.error is None
    assert seen.index("agent_start") < seen.index("second:agent_start")  # awaited in subscription order


async def test_prompt_while_running_says_to_steer_or_follow_up() -> None:
    reply = Reply.stream(text_chunks(["a", "b"]), stall_after=1, stall_seconds=0.5)
    async with ScriptedServer(reply) as server:
        agent = Agent(Endpoint(server.base_url), "m")
        task = asyncio.create_task(agent.prompt("one"))
        await server.wait_for_requests(1)
        with pytest.raises(AgentBusy, match="steer"):
            await agent.prompt("two")
        await task


async def test_steering_in_immediate_mode_skips_calls_not_yet_started() -> None:
    gate = asyncio.Event()

    @tool
    async def slow_step(n: int, ctx: ToolContext) -> str:
        """A step that waits for the test."""
        agent.steer("Stop that, do this instead.")
        await gate.wait() if n < 0 else None
        return f"step {n}"

    reply = calls(("slow_step", {"n": 1}), ("slow_step", {"n": 2}))
    async with ScriptedServer(reply, answer("Changed course.")) as server:
        agent = Agent(
            Endpoint(server.base_url),
            "m",
            tools=[slow_step],
            policy=LoopPolicy(tools=ToolPolicy(parallel=False)),
        )
        await agent.prompt("go")
        second = server.chat_requests[1].json["messages"]
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert results[0].content == "step 1"
    assert "Skipped due to queued user message" in str(results[1].content)
    assert second[-1] == {"role": "user", "content": "Stop that, do this instead."}


async def test_steering_in_wait_mode_lets_the_step_finish() -> None:
    @tool
    def step(n: int) -> str:
        """A step."""
        if n == 1:
            agent.steer("next")
        return f"step {n}"

    async with ScriptedServer(calls(("step", {"n": 1}), ("step", {"n": 2})), answer("ok")) as server:
        agent = Agent(
            Endpoint(server.base_url),
            "m",
            tools=[step],
            interrupt_mode="wait",
            policy=LoopPolicy(tools=ToolPolicy(parallel=False)),
        )
        await agent.prompt("go")
    results = [m.content for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert results == ["step 1", "step 2"]


async def test_follow_ups_run_after_the_model_stops_one_at_a_time() -> None:
    async with ScriptedServer(answer("first"), answer("second"), answer("third")) as server:
        agent = Agent(Endpoint(server.base_url), "m")
        agent.follow_up("and then?")
        agent.follow_up("and finally?")
        turn = await agent.prompt("start")
        assert len(server.chat_requests) == 3
    assert turn.content == "third"
    users = [m.content for m in agent.state.messages if isinstance(m, UserMessage)]
    assert users == ["start", "and then?", "and finally?"]


async def test_follow_ups_all_at_once() -> None:
    async with ScriptedServer(answer("first"), answer("second")) as server:
        agent = Agent(Endpoint(server.base_url), "m", follow_up_mode="all")
        agent.follow_up("a")
        agent.follow_up("b")
        await agent.prompt("start")
        assert len(server.chat_requests) == 2


async def test_abort_never_raises_and_keeps_a_replayable_transcript() -> None:
    release = asyncio.Event()
    running = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Waits."""
        running.set()
        await release.wait()
        return "done"

    async with ScriptedServer(calls(("wait_forever", {})), answer("after")) as server:
        agent = Agent(Endpoint(server.base_url), "m", tools=[wait_forever])
        agent.abort()  # nothing running: a no-op
        task = asyncio.create_task(agent.prompt("go"))
        await running.wait()
        assert agent.state.pending_tool_calls
        agent.abort()
        with pytest.raises(RunCancelled):
            await task
        await agent.wait_for_idle()
        assert agent.state.error and not agent.state.is_streaming
        last = agent.state.messages[-1]
        assert isinstance(last, ToolResultMessage) and last.is_error
        await agent.continue_()  # the transcript replays: it ends in a tool result
    assert isinstance(agent.state.messages[-1], AssistantMessage)


async def test_continue_needs_a_user_message_or_tool_result_last() -> None:
    async with ScriptedServer(answer("x")) as server:
        agent = Agent(Endpoint(server.base_url), "m")
        with pytest.raises(InvalidInput):
            await agent.continue_()
        await agent.prompt("hi")
        with pytest.raises(InvalidInput):
            await agent.continue_()


@dataclass(frozen=True)
class Bookmark:
    """A custom message type the host keeps in the transcript."""

    label: str


async def test_custom_messages_stay_in_state_and_are_filtered_before_the_request() -> None:
    async with ScriptedServer(answer("ok")) as server:
        agent = Agent(Endpoint(server.base_url), "m", messages=[Bookmark("start")])
        await agent.prompt("hi")
        sent = server.chat_requests[0].json["messages"]
    assert isinstance(agent.state.messages[0], Bookmark)
    assert sent == [{"role": "user", "content": "hi"}]


async def test_images_go_as_content_parts() -> None:
    async with ScriptedServer(answer("a cat")) as server:
        agent = Agent(Endpoint(server.base_url), "m")
        await agent.prompt("What is this?", images=[b"\x89PNG fake"])
        content = server.chat_requests[0].json["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert content[1]["type"] == "image_url" and content[1]["image_url"]["url"].startswith(
        "data:image/png;base64,"
    )


async def test_session_id_is_sent_as_prompt_cache_key_and_the_key_resolver_is_called() -> None:
    asked: list[int] = []

    def key() -> str:
        asked.append(1)
        return "sk-fresh"

    async with ScriptedServer(answer("ok")) as server:
        agent = Agent(Endpoint(server.base_url), "m", session_id="s-1", api_key=key)
        await agent.prompt("hi")
        request = server.chat_requests[0]
    assert request.json["prompt_cache_key"] == "s-1"
    assert request.header("authorization") == "Bearer sk-fresh" and asked == [1]


async def test_reset_forgets_the_transcript() -> None:
    async with ScriptedServer(answer("ok")) as server:
        agent = Agent(Endpoint(server.base_url), "m")
        await agent.prompt("hi")
        agent.reset()
    assert agent.state.messages == [] and not agent.has_queued_messages()


async def test_run_timeout_aborts_the_run() -> None:
    async with ScriptedServer(Reply.stream(text_chunks(["a", "b"]), stall_after=1)) as server:
        agent = Agent(Endpoint(server.base_url), "m", run_timeout=0.3)
        with pytest.raises(RunCancelled):
            await agent.prompt("hi")
    assert "run_timeout" in (agent.state.error or "")


async def test_an_abort_is_not_reported_as_a_timeout() -> None:
    streaming = asyncio.Event()
    async with ScriptedServer(Reply.stream(text_chunks(["a", "b"]), stall_after=2)) as server:
        agent = Agent(Endpoint(server.base_url), "m", run_timeout=60)
        agent.subscribe(lambda e: streaming.set() if e.type == "message_update" else None)
        task = asyncio.create_task(agent.prompt("hi"))
        await streaming.wait()
        agent.abort()
        with pytest.raises(RunCancelled):
            await task
    assert agent.state.error and "run_timeout" not in agent.state.error
