"""A run and the room its window has for tool results: each call is told its share, a result too long is cut
(head and tail kept) rather than ending the run, and the request that goes out fits."""

from __future__ import annotations

from typing import Any

import pytest

from steadyloop.context.keeper import ContextPolicy, ContextState
from steadyloop.errors import RunError
from steadyloop.events import Event, Notice
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.sizing.tokens import request_tokens
from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import ToolContext, tool
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint

RETRY = RetryPolicy(base_delay_s=0.01, max_retries=1)
WINDOW = 1500
# A file of numbered lines, so what a cut kept is easy to see: about 17,000 characters, 4,000+ tokens.
BIG = "".join(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(1, 301))

budgets: list[ToolContext] = []


@tool
def read_everything(path: str, context: ToolContext) -> str:
    """Read a file whole, whatever its size."""
    budgets.append(context)
    return BIG


def call(name: str, arguments: dict[str, Any], id: str = "c1") -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": name, "arguments": arguments}]))


def answer(text: str, **usage: Any) -> Any:
    return Reply.stream(stream_of(text, usage=usage_chunk(**usage) if usage else None))


async def _run(server: ScriptedServer, policy: LoopPolicy, **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    result = await run_agent_loop(
        Endpoint(server.base_url),
        ModelParams(model="m"),
        messages=[UserMessage(content="What does notes.txt say?")],
        tools=[read_everything],
        policy=policy,
        on_event=events.append,
        **options,
    )
    return result, events


@pytest.fixture(autouse=True)
def _fresh() -> None:
    budgets.clear()


async def test_a_result_larger_than_the_window_is_cut_head_and_tail_and_the_run_answers() -> None:
    policy = LoopPolicy(context_limit=WINDOW, context=ContextPolicy(), retry=RETRY)
    async with ScriptedServer(
        call("read_everything", {"path": "notes.txt"}), answer("It lists lines.")
    ) as server:
        result, events = await _run(server, policy)
        second = server.chat_requests[1].json
    assert result.turn.content == "It lists lines."
    sent = next(m for m in second["messages"] if m["role"] == "tool")["content"]
    assert sent.startswith("line 1: the quick") and sent.rstrip().endswith(
        "line 300: the quick brown fox jumps over the lazy dog"
    )
    assert "characters cut here to fit the context window" in sent
    # what went out fits the window with the reply's room (an eighth) to spare
    assert request_tokens(second) <= WINDOW - WINDOW // 8
    assert any(isinstance(e, Notice) and "cut 1 tool result" in e.text for e in events)
    # the transcript keeps the whole result: only what is sent is cut
    kept = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert kept.content == BIG
    assert result.context is not None and result.context.cut


async def test_each_call_is_told_the_room_the_window_has_for_its_result() -> None:
    policy = LoopPolicy(context_limit=WINDOW, context=ContextPolicy(), retry=RETRY)
    async with ScriptedServer(call("read_everything", {"path": "a"}), answer("ok")) as server:
        await _run(server, policy)
    [context] = budgets
    assert context.budget_tokens is not None and 0 < context.budget_tokens < WINDOW - WINDOW // 8
    assert context.budget_chars == int(context.budget_tokens * context.chars_per_token)


async def test_calls_of_one_step_share_the_room() -> None:
    two = Reply.stream(
        stream_of(
            tool_calls=[
                {"id": "a", "name": "read_everything", "arguments": {"path": "a"}},
                {"id": "b", "name": "read_everything", "arguments": {"path": "b"}},
            ]
        )
    )
    policy = LoopPolicy(context_limit=WINDOW, context=ContextPolicy(), retry=RETRY)
    async with ScriptedServer(call("read_everything", {"path": "a"}), answer("ok")) as server:
        await _run(server, policy)
    [alone] = budgets
    budgets.clear()
    async with ScriptedServer(two, answer("ok")) as server:
        await _run(server, policy)
    assert len(budgets) == 2 and alone.budget_tokens is not None
    for each in budgets:
        assert each.budget_tokens is not None and each.budget_tokens <= alone.budget_tokens // 2 + 1


async def test_without_a_window_a_call_has_no_budget() -> None:
    async with ScriptedServer(call("read_everything", {"path": "a"}), answer("ok")) as server:
        await _run(server, LoopPolicy(retry=RETRY))
    assert budgets[0].budget_tokens is None and budgets[0].budget_chars is None


async def test_a_server_refusal_after_the_estimate_fitted_cuts_the_result_and_sends_again() -> None:
    # The estimate thinks the window is large; only the server's count says otherwise.
    policy = LoopPolicy(context_limit=100_000, context=ContextPolicy(), retry=RETRY)
    overflow = Reply.json(
        {
            "error": {
                "code": 400,
                "message": "request (5812 tokens) exceeds the available context size (1500 tokens)",
                "type": "exceed_context_size_error",
            }
        },
        status=400,
    )
    replies = [call("read_everything", {"path": "notes.txt"}), overflow, answer("Done.")]
    async with ScriptedServer(*replies) as server:
        result, _ = await _run(server, policy)
        last = server.chat_requests[-1].json
    assert result.turn.content == "Done."
    sent = next(m for m in last["messages"] if m["role"] == "tool")["content"]
    assert "characters cut here" in sent and len(sent) < len(BIG) / 2


async def test_without_context_keeping_a_result_that_does_not_fit_still_ends_the_run() -> None:
    async with ScriptedServer(call("read_everything", {"path": "a"}), answer("never")) as server:
        with pytest.raises(RunError) as caught:
            await _run(server, LoopPolicy(context_limit=WINDOW, retry=RETRY))
    assert caught.value.reason == "overflow"


async def test_a_cut_carries_on_to_the_next_run_through_the_kept_state() -> None:
    policy = LoopPolicy(context_limit=WINDOW, context=ContextPolicy(), retry=RETRY)
    async with ScriptedServer(call("read_everything", {"path": "a"}), answer("ok")) as server:
        result, _ = await _run(server, policy)
    state = result.context
    assert state is not None
    restored = ContextState()
    assert restored.restore(state.to_json(result.messages), result.messages)
    assert restored.cut == state.cut
    view = restored.stubbed(list(result.messages))
    cut = next(m for m in view if isinstance(m, ToolResultMessage))
    assert "characters cut here" in str(cut.content)
