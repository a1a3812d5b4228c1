"""run_turn against the scripted server: negotiation, retry, the loading clock, sizing, overflow."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steadyloop.errors import ContextOverflow, EndpointRefused, EndpointSilent, EndpointUnavailable
from steadyloop.events import Downgrade, Event, Notice, Retry
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, backoff_delay, run_turn
from steadyloop.turn.capabilities import capabilities_for, model_capabilities_for
from steadyloop.wire.endpoints import Endpoint

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, loading_poll_s=0.05, loading_timeout_s=5.0)


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


def error(message: str, status: int = 400, **fields: Any) -> Any:
    return Reply.json(
        {"error": {"message": message, "type": "invalid_request_error", **fields}}, status=status
    )


OK = Reply.stream(text_chunks("ok"))


async def run(server: ScriptedServer, request: dict[str, Any], **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    options.setdefault("policy", FAST)
    turn = await run_turn(Endpoint(server.base_url), request, on_event=events.append, **options)
    return turn, events


def sent(server: ScriptedServer, n: int) -> dict[str, Any]:
    return server.chat_requests[n].json  # type: ignore[no-any-return]


async def test_transient_failures_are_retried_with_events_and_counted() -> None:
    async with ScriptedServer(error("Bad gateway", 502), error("upstream", 500), OK) as server:
        turn, events = await run(server, body())
    assert turn.content == "ok" and turn.usage.retries == 2 and turn.usage.wall_ms is not None
    assert [e.attempt for e in events if isinstance(e, Retry)] == [1, 2]


async def test_retries_run_out() -> None:
    async with ScriptedServer(*[error("Bad gateway", 502)] * 3) as server:
        with pytest.raises(EndpointUnavailable):
            await run(server, body(), policy=RetryPolicy(max_retries=2, base_delay_s=0.01))
        assert len(server.chat_requests) == 3


async def test_retry_after_is_honoured_and_capped() -> None:
    limited = Reply.json(
        {"error": {"message": "Rate limit reached", "type": "requests"}}, 429, {"Retry-After": "0.2"}
    )
    async with ScriptedServer(limited, OK) as server:
        _, events = await run(server, body())
    (retry,) = [e for e in events if isinstance(e, Retry)]
    assert retry.delay_s == pytest.approx(0.2)
    assert backoff_delay(0, RetryPolicy(max_retry_delay_s=60), retry_after=3600) == 60
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=8.0)
    assert all(0.5 * min(2**n, 8) <= backoff_delay(n, policy) <= min(2**n, 8) for n in range(6))


async def test_a_retry_after_ms_header() -> None:
    limited = Reply.json(
        {"error": {"message": "Rate limit", "type": "rate_limit"}}, 429, {"retry-after-ms": "150"}
    )
    async with ScriptedServer(limited, OK) as server:
        _, events = await run(server, body())
    assert [e.delay_s for e in events if isinstance(e, Retry)] == [pytest.approx(0.15)]


async def test_never_resend_once_output_was_produced() -> None:
    async with ScriptedServer(Reply.stream(text_chunks(["a", "b", "c"]), disconnect_after=2), OK) as server:
        with pytest.raises(EndpointUnavailable):
            await run(server, body())
        assert len(server.chat_requests) == 1


async def test_silence_before_output_is_retried_and_counted_as_a_timeout() -> None:
    async with ScriptedServer(Reply.stall(), OK) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.2, first_token_timeout=0.3)
        turn = await run_turn(endpoint, body(), policy=FAST)
    assert turn.content == "ok" and turn.usage.timeouts == 1 and turn.usage.retries == 1


async def test_silence_after_output_is_not_retried() -> None:
    async with ScriptedServer(Reply.stream(text_chunks(["a", "b"]), stall_after=2), OK) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.2)
        with pytest.raises(EndpointSilent):
            await run_turn(endpoint, body(), policy=FAST)
        assert len(server.chat_requests) == 1


LOADING = Reply.json({"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}, 503)


async def test_a_loading_model_is_waited_for_without_spending_retries() -> None:
    async with ScriptedServer(LOADING, LOADING, LOADING, OK) as server:
        turn, events = await run(server, body(), policy=RetryPolicy(max_retries=0, loading_poll_s=0.02))
    assert turn.content == "ok" and turn.usage.retries == 0
    assert len([e for e in events if isinstance(e, Notice) and e.name == "loading"]) == 1


async def test_the_loading_wait_has_its_own_limit_and_can_be_turned_off() -> None:
    async with ScriptedServer(*[LOADING] * 50) as server:
        with pytest.raises(EndpointUnavailable):
            await run(server, body(), policy=RetryPolicy(loading_timeout_s=0.2, loading_poll_s=0.05))
    async with ScriptedServer(LOADING, OK) as server:
        with pytest.raises(EndpointUnavailable):
            await run(server, body(), policy=RetryPolicy(loading_timeout_s=0, max_retries=0))
        assert len(server.chat_requests) == 1


async def test_cancellation_ends_a_backoff_sleep_at_once() -> None:
    backing_off = asyncio.Event()

    def on_event(event: Event) -> None:
        if isinstance(event, Retry):
            backing_off.set()

    async with ScriptedServer(error("Bad gateway", 502), OK) as server:
        endpoint = Endpoint(server.base_url)
        policy = RetryPolicy(base_delay_s=30, max_delay_s=30)
        task = asyncio.create_task(run_turn(endpoint, body(), policy=policy, on_event=on_event))
        await backing_off.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 1.0)


EFFORT = (
    "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
    "Supported values are: 'minimal', 'low', 'medium', and 'high'."
)


async def test_effort_takes_the_rung_the_server_lists() -> None:
    async with ScriptedServer(
        error(EFFORT, param="reasoning_effort", code="unsupported_value"), OK
    ) as server:
        _, events = await run(server, body(reasoning_effort="none"))
        assert (
            sent(server, 0)["reasoning_effort"] == "none" and sent(server, 1)["reasoning_effort"] == "minimal"
        )
    assert any(isinstance(e, Downgrade) and e.field == "reasoning_effort" for e in events)
    assert any(isinstance(e, Notice) and "reasoning_effort" in e.text for e in events)


async def test_effort_walks_the_ladder_one_rung_per_refusal_and_latches() -> None:
    bare = "Unsupported value: 'reasoning_effort' does not support '{}' with this model."
    async with ScriptedServer(
        error(bare.format("minimal"), param="reasoning_effort"),
        error(bare.format("low"), param="reasoning_effort"),
        OK,
        OK,
    ) as server:
        await run(server, body(reasoning_effort="minimal"))
        assert [sent(server, n)["reasoning_effort"] for n in range(3)] == ["minimal", "low", "medium"]
        await run(server, body(reasoning_effort="minimal"))  # latched: no walk this time
        assert sent(server, 3)["reasoning_effort"] == "medium"


async def test_effort_never_walks_down_or_off_the_ladder() -> None:
    bare = "Unsupported value: 'reasoning_effort' does not support 'xhigh' with this model."
    async with ScriptedServer(error(bare, param="reasoning_effort")) as server:
        with pytest.raises(EndpointRefused):
            await run(server, body(reasoning_effort="xhigh"))
        assert len(server.chat_requests) == 1


async def test_token_limit_spelling_latches_per_model() -> None:
    refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    async with ScriptedServer(error(refusal, param="max_tokens"), OK, OK) as server:
        await run(server, body(max_tokens=50))
        assert "max_tokens" in sent(server, 0) and sent(server, 1)["max_completion_tokens"] == 50
        other = body(max_tokens=50) | {"model": "other"}
        await run(server, other)  # another model on the same endpoint is not affected
        assert sent(server, 2)["max_tokens"] == 50
    endpoint = Endpoint(server.base_url)
    assert model_capabilities_for(endpoint, "m").legacy_token_limit is False
    assert model_capabilities_for(endpoint, "other").legacy_token_limit is True


async def test_a_temperature_the_model_picks_itself_is_dropped_with_a_notice() -> None:
    refusal = "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported."
    async with ScriptedServer(error(refusal, param="temperature"), OK) as server:
        _, events = await run(server, body(temperature=0.2))
        assert "temperature" not in sent(server, 1)
    assert any(isinstance(e, Downgrade) and e.field == "temperature" for e in events)


async def test_a_refused_value_goes_to_the_caller_with_the_servers_words() -> None:
    words = "max_tokens is too large: 100000. This model supports at most 16384 completion tokens."
    async with ScriptedServer(error(words, param="max_tokens")) as server:
        with pytest.raises(EndpointRefused) as caught:
            await run(server, body(max_tokens=100000))
        assert len(server.chat_requests) == 1
    assert "16384" in str(caught.value)


async def test_only_droppable_extra_fields_are_dropped() -> None:
    refusal = "Unrecognized request argument supplied: min_p"
    async with ScriptedServer(error(refusal), OK) as server:
        _, events = await run(server, body(min_p=0.1), droppable={"min_p"})
        assert "min_p" in sent(server, 0) and "min_p" not in sent(server, 1)
    assert any(isinstance(e, Downgrade) and e.field == "min_p" for e in events)
    async with ScriptedServer(error(refusal)) as server:
        with pytest.raises(EndpointRefused):
            await run(server, body(min_p=0.1))
        assert len(server.chat_requests) == 1


async def test_usage_in_stream_latches_off_per_endpoint() -> None:
    refusal = "Unrecognized request argument supplied: stream_options"
    async with ScriptedServer(error(refusal), OK, OK) as server:
        await run(server, body())
        assert "stream_options" in sent(server, 0) and "stream_options" not in sent(server, 1)
        await run(server, body() | {"model": "another"})
        assert "stream_options" not in sent(server, 2)
    assert capabilities_for(Endpoint(server.base_url)).usage_in_stream is False


async def test_a_grammar_failure_relaxes_tool_schemas() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"s": {"type": "string", "pattern": "^[a-z]+$"}},
                },
            },
        }
    ]
    async with ScriptedServer(
        error("Failed to initialize samplers: failed to parse grammar", 500), OK
    ) as server:
        await run(server, body(tools=tools))
        first = sent(server, 0)["tools"][0]["function"]["parameters"]["properties"]["s"]
        second = sent(server, 1)["tools"][0]["function"]["parameters"]["properties"]["s"]
    assert "pattern" in first and "pattern" not in second


async def test_the_sizing_guard_refuses_before_sending() -> None:
    async with ScriptedServer(OK) as server:
        with pytest.raises(ContextOverflow) as caught:
            await run(
                server,
                body(max_tokens=400) | {"messages": [{"role": "user", "content": "x" * 4000}]},
                context_limit=1000,
            )
        assert server.chat_requests == []
    assert caught.value.limit == 1000 and (caught.value.requested or 0) > 1000


async def test_the_ceiling_counts_toward_the_window() -> None:
    request = body(max_tokens=900) | {"messages": [{"role": "user", "content": "x" * 800}]}
    async with ScriptedServer(OK) as server:
        with pytest.raises(ContextOverflow):
            await run(server, request, context_limit=1000)
        await run(server, request | {"max_tokens": 100}, context_limit=1000)


async def test_the_endpoints_own_overflow_is_the_same_error_and_never_retried() -> None:
    words = (
        "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens."
    )
    async with ScriptedServer(error(words, code="context_length_exceeded")) as server:
        with pytest.raises(ContextOverflow) as caught:
            await run(server, body())
        assert len(server.chat_requests) == 1
    assert "4096" in str(caught.value)


async def test_a_rate_limit_that_borrows_overflow_words_is_waited_through() -> None:
    tpm = "Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 45000."
    limited = Reply.json({"error": {"message": tpm, "type": "tokens", "code": "rate_limit_exceeded"}}, 429)
    async with ScriptedServer(limited, OK) as server:
        turn, _ = await run(server, body())
    assert turn.content == "ok"


async def test_calibration_learns_from_the_prompt_count() -> None:
    from steadyloop.sizing.calibration import chars_per_token_for

    reply = Reply.stream([*text_chunks("ok"), usage_chunk(100, 1)])
    async with ScriptedServer(reply) as server:
        endpoint = Endpoint(server.base_url)
        assert chars_per_token_for(endpoint, "m") == 4.0
        await run_turn(endpoint, body() | {"messages": [{"role": "user", "content": "y" * 300}]}, policy=FAST)
    assert chars_per_token_for(endpoint, "m") != 4.0


async def test_a_silently_truncated_prompt_raises_a_notice() -> None:
    reply = Reply.stream([*text_chunks("ok"), usage_chunk(50, 1)])
    async with ScriptedServer(reply) as server:
        _, events = await run(server, body() | {"messages": [{"role": "user", "content": "z" * 20000}]})
    assert any(isinstance(e, Notice) and e.name == "truncated" for e in events)


# What counts as produced: shown to a listener ---------------------------------------------------------


async def test_a_stall_right_after_a_bare_tool_call_header_is_retried() -> None:
    # OpenAI opens a call with its id and name before any arguments. Nothing was shown and nothing ran, so
    # silence right after it is sent again like silence before any output.
    header = tool_call_chunks([{"id": "call_1", "name": "search", "arguments": ""}], finish=None)
    stalled = Reply.stream(header, stall_after=len(header))
    retried = Reply.stream(tool_call_chunks([{"id": "call_2", "name": "search", "arguments": {"q": "x"}}]))
    async with ScriptedServer(stalled, retried) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.3, first_token_timeout=0.3)
        events: list[Event] = []
        turn = await run_turn(endpoint, body(), policy=FAST, on_event=events.append)
        assert len(server.chat_requests) == 2
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [("call_2", {"q": "x"})]
    assert turn.usage.retries == 1 and turn.usage.timeouts == 1
    assert any(isinstance(e, Retry) for e in events)


async def test_a_stall_after_shown_text_is_not_sent_again() -> None:
    shown: list[str] = []
    async with ScriptedServer(Reply.stream(text_chunks(["Hel", "lo"]), stall_after=2), OK) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.3)
        with pytest.raises(EndpointSilent) as caught:
            await run_turn(endpoint, body(), policy=FAST, on_output=shown.append)
        assert len(server.chat_requests) == 1
    assert "".join(shown) == "Hel" and caught.value.produced


# A stream that is partly unreadable --------------------------------------------------------------------


async def test_a_junk_event_mid_stream_is_skipped_with_one_notice_and_the_turn_finishes() -> None:
    chunks: list[Any] = [*text_chunks(["Hello", " there"], finish=None)]
    chunks.insert(2, "data: {not json\n\n")
    chunks.insert(3, b"<html>proxy says hi</html>\n\n")
    chunks.append("data: {not json either\n\n")
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    async with ScriptedServer(Reply.stream(chunks)) as server:
        turn, events = await run(server, body())
        assert len(server.chat_requests) == 1
    assert turn.content == "Hello there" and turn.finish_reason == "stop"
    notices = [e for e in events if isinstance(e, Notice) and e.name == "stream-skipped"]
    assert len(notices) == 1 and "2 event(s) that were not JSON" in notices[0].text


async def test_a_mangled_stream_ends_in_a_turn_not_an_exception() -> None:
    mangled: list[Any] = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        "data: null\n\n",
        "data: 5\n\n",
        "data: [1, 2]\n\n",
        {"choices": {"0": "x"}},
        {"choices": [{"delta": "text"}]},
        {"choices": [{"delta": {"content": 7}}]},
        {"choices": [{"delta": {"content": "ok"}}]},
        {"choices": [{"delta": {"tool_calls": 5}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": "f"}]}}]},
        {"choices": [{"delta": {}, "finish_reason": {"why": "stop"}}]},
        {"choices": [{"delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": "many"},
        "data: " + '{"choices": [], "usage": {"prompt_tokens": NaN, "completion_tokens": 1e400}}' + "\n\n",
    ]
    async with ScriptedServer(Reply.stream(mangled)) as server:
        turn, events = await run(server, body())
    assert turn.content == "ok" and turn.finish_reason == "stop"
    assert turn.usage.prompt_tokens == 0 and turn.usage.completion_tokens == 0
    (notice,) = [e for e in events if isinstance(e, Notice) and e.name == "stream-skipped"]
    assert "content that is not text" in notice.text


# A model whose template opens the thinking block -------------------------------------------------------


async def test_a_headless_think_close_is_latched_so_the_next_turn_splits_from_the_first_chunk() -> None:
    # Apart, so the first words reach the listener as answer before the closing tag shows what they were.
    first = Reply.stream(text_chunks(["I should ", "greet.", "</think>", "Hello!"]), delay=0.05)
    second = Reply.stream(text_chunks(["Greet ", "again.", "</think>", "Hello again!"]))
    async with ScriptedServer(first, second) as server:
        endpoint = Endpoint(server.base_url)
        out: list[str] = []
        thinking: list[str] = []
        events: list[Event] = []
        options: dict[str, Any] = {"policy": FAST, "on_output": out.append, "on_thinking": thinking.append}
        turn = await run_turn(endpoint, body(), on_event=events.append, **options)
        assert (turn.content, turn.reasoning) == ("Hello!", "I should greet.")
        assert "".join(out) == "I should greet.Hello!" and thinking == []  # told once, never twice
        assert model_capabilities_for(endpoint, "m").answer_first is False
        assert [e.name for e in events if isinstance(e, Notice)] == ["reasoning-start"]
        out.clear()
        turn = await run_turn(endpoint, body(), **options)
    assert (turn.content, turn.reasoning) == ("Hello again!", "Greet again.")
    assert "".join(out) == "Hello again!" and "".join(thinking) == "Greet again."


async def test_a_latched_reasoning_start_with_no_closing_tag_is_read_as_answer_and_unlatched() -> None:
    async with ScriptedServer(Reply.stream(text_chunks(["Just ", "an answer."]))) as server:
        endpoint = Endpoint(server.base_url)
        model_capabilities_for(endpoint, "m").answer_first = False
        turn, events = await run(server, body())
    assert (turn.content, turn.reasoning) == ("Just an answer.", "")
    assert model_capabilities_for(endpoint, "m").answer_first is True
    assert any(isinstance(e, Notice) and e.name == "reasoning-start" for e in events)


async def test_a_continued_prefill_neither_uses_nor_moves_the_reasoning_start_latch() -> None:
    async with ScriptedServer(Reply.stream(text_chunks(["and the rest."]))) as server:
        endpoint = Endpoint(server.base_url)
        model_capabilities_for(endpoint, "m").answer_first = False
        prefilled = body()
        prefilled["messages"] = [*prefilled["messages"], {"role": "assistant", "content": "The first half "}]
        turn, events = await run(server, prefilled)
    assert turn.content == "and the rest." and turn.reasoning == ""
    assert model_capabilities_for(endpoint, "m").answer_first is False
    assert not [e for e in events if isinstance(e, Notice)]
