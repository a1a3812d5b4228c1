"""Anthropic's count endpoint behind the token-counting interface, against the Anthropic double on loopback:
what is asked of it, what its answer feeds, and what happens when it has none."""

from __future__ import annotations

import json

import pytest

import steadyloop as sl
from steadyloop.sizing import TokenCount
from steadyloop.sizing.calibration import chars_per_token_for
from steadyloop.sizing.counting import (
    AnthropicCounter,
    TokenizerUnavailable,
    count_tokens,
    token_counter_for,
)
from steadyloop.sizing.tokens import request_tokens
from steadyloop.testing.server import ScriptedServer

from .provider_doubles import DATA, DOUBLES

pytestmark = pytest.mark.timeout(60)

MODEL = "claude-sonnet-4-5"
# A recorded count_tokens answer (tests/data/providers/README.md says where it came from).
RECORDED_COUNT = json.loads((DATA / "anthropic" / "count-tokens.json").read_text())


def body(text: str = "hi") -> dict[str, object]:
    return {
        "model": MODEL,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}],
        "max_tokens": 100,
        "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
    }


async def test_the_count_asks_what_the_request_would_send_and_reads_input_tokens() -> None:
    async with ScriptedServer() as server:
        server.count_tokens = RECORDED_COUNT
        endpoint = sl.Endpoint(server.base_url, "test-key", api="anthropic")
        counter = token_counter_for(endpoint, MODEL)
        assert isinstance(counter, AnthropicCounter) and counter.name == "anthropic:count_tokens"
        counted = await count_tokens(endpoint, MODEL, body())
        (asked,) = [r for r in server.requests if r.path == "/v1/messages/count_tokens"]
    assert counted == TokenCount(RECORDED_COUNT["input_tokens"], "anthropic:count_tokens")
    sent = asked.json
    assert sent["model"] == MODEL and sent["system"][0]["text"] == "Be brief."
    assert sent["messages"][0]["role"] == "user" and sent["tools"][0]["name"] == "look"
    assert "max_tokens" not in sent and "stream" not in sent
    assert asked.header("x-api-key") == "test-key" or asked.header("authorization") == "Bearer test-key"


async def test_without_a_count_endpoint_the_estimate_stands_in() -> None:
    async with ScriptedServer() as server:  # answers the count with 404
        endpoint = sl.Endpoint(server.base_url, "test-key", api="anthropic")
        with pytest.raises(TokenizerUnavailable, match="did not count"):
            await AnthropicCounter(endpoint, MODEL).count(body())
        counted = await count_tokens(endpoint, MODEL, body())
    assert counted.counter == "estimate" and counted.fallback is not None


async def test_the_first_anthropic_request_is_sized_by_the_providers_count() -> None:
    double = DOUBLES["anthropic"]()
    big = body(" hello" * 1200)  # the estimate calls this about 1,850 tokens
    async with ScriptedServer(double.plain) as server:
        server.count_tokens = {"input_tokens": 1210}
        endpoint = sl.Endpoint(server.base_url, "test-key", api="anthropic")
        assert request_tokens(big) > 1500
        turn = await sl.run_turn(endpoint, big, context_limit=1500)
        assert [r.path for r in server.requests] == ["/v1/messages/count_tokens", "/v1/messages"]
    assert turn.content == double.plain_text
    assert chars_per_token_for(endpoint, MODEL) > 5
