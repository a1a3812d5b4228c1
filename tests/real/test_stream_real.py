"""``stream_turn`` against a real llama-server: structure, never a small model's wording."""

from __future__ import annotations

import pytest

from steadyloop.errors import EndpointSilent
from steadyloop.local import key_for
from steadyloop.turn import RetryPolicy, run_turn, stream_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import get_client

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city"}},
            "required": ["city"],
        },
    },
}


async def test_plain_answer_streams_with_usage_and_timings(llama: Endpoint) -> None:
    pieces: list[str] = []
    turn = await stream_turn(
        get_client(llama),
        {
            "model": "qwen",
            "messages": [{"role": "user", "content": "Name three colours."}],
            "max_tokens": 40,
            "temperature": 0,
        },
        on_output=pieces.append,
        include_usage=True,
        idle_timeout=llama.idle_timeout,
    )
    assert turn.finish_reason in ("stop", "length")
    assert turn.content and "".join(pieces) == turn.content
    assert len(pieces) > 1, "the answer arrives in pieces as it streams"
    usage = turn.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_ms is not None and usage.predicted_ms is not None
    assert usage.tokens_per_second is not None and usage.tokens_per_second > 0
    assert usage.first_token_ms is not None and usage.first_token_ms > 0
    assert usage.uncached_tokens is not None  # llama.cpp reports a cache count


async def test_timings_stand_in_for_usage_when_it_is_not_asked_for(llama: Endpoint) -> None:
    turn = await stream_turn(
        get_client(llama),
        {"model": "qwen", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 10},
        include_usage=False,
    )
    assert turn.usage.prompt_tokens > 0 and turn.usage.completion_tokens > 0
    assert turn.usage.prompt_ms is not None


async def test_streamed_tool_call_is_reassembled(llama: Endpoint) -> None:
    turn = await stream_turn(
        get_client(llama),
        {
            "model": "qwen",
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [WEATHER],
            "tool_choice": "required",
            "temperature": 0,
        },
        idle_timeout=llama.idle_timeout,
    )
    assert turn.finish_reason == "tool_calls"
    assert len(turn.tool_calls) == 1
    call = turn.tool_calls[0]
    assert call.name == "get_weather"
    assert isinstance(call.arguments.get("city"), str) and call.arguments["city"]
    assert call.id and call.raw_arguments


def _long_prompt() -> list[dict[str, str]]:
    # About 2,500 tokens of varied text, so prefill on 2 CPU cores takes longer than the idle allowance.
    facts = [f"Item {i}: the value of register {i * 7 % 97} is {i * 31 % 1009}." for i in range(180)]
    return [{"role": "user", "content": "\n".join(facts) + "\nWhich item mentions register 5? One line."}]


async def test_first_token_allowance_survives_a_slow_prefill(llama: Endpoint) -> None:
    body = {"model": "qwen", "messages": _long_prompt(), "max_tokens": 8, "cache_prompt": False}
    idle = 8.0  # below an idle machine's ~12 s prefill, above a loaded machine's gaps between tokens
    turn = await stream_turn(get_client(llama), body, idle_timeout=idle, first_token_timeout=300.0)
    assert turn.usage.first_token_ms is not None
    # The prefill alone took longer than the idle allowance: only the first-token allowance let it live.
    assert turn.usage.first_token_ms > idle * 1000
    assert turn.finish_reason in ("stop", "length")


async def test_without_the_allowance_the_same_prefill_is_silence(llama: Endpoint) -> None:
    body = {"model": "qwen", "messages": _long_prompt(), "max_tokens": 8, "cache_prompt": False}
    with pytest.raises(EndpointSilent) as caught:
        await stream_turn(get_client(llama), body, idle_timeout=0.3, first_token_timeout=0.3)
    assert caught.value.produced is False


async def test_the_default_allowances_let_a_long_cpu_prefill_answer(llama_base_url: str) -> None:
    # Nothing configured: the endpoint's and the retry policy's defaults, which also fail a dead endpoint
    # within two minutes (tests/turn/test_silence_budget.py).
    body = {"model": "qwen", "messages": _long_prompt(), "max_tokens": 8, "cache_prompt": False}
    turn = await run_turn(Endpoint(llama_base_url, key_for(llama_base_url)), body, policy=RetryPolicy())
    assert turn.usage.prompt_tokens > 2000
    assert turn.usage.timeouts == 0 and turn.usage.retries == 0
    assert turn.finish_reason in ("stop", "length")
