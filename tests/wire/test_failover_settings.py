"""A failover chain across three providers' doubles: each provider's own settings reach only the candidates
that speak its wire, in the spelling that wire takes, and the runtime's neutral settings reach every one.

The body is built once, the way the loop builds it (``build_body`` from ``ModelParams``), and carries a
setting of each kind: an Anthropic beta, Gemini safety settings and thinking config, and the
chat-completions ``prompt_cache_key`` and ``reasoning_effort``. The first two candidates are overloaded,
so every double receives the request and the assertions are on what each received.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

import pytest

from steadyloop.request_body import ModelParams, build_body
from steadyloop.testing.server import RecordedRequest, ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.turn.capabilities import capabilities_for
from steadyloop.wire.endpoints import Target

from .provider_doubles import DOUBLES
from .test_failover_providers import endpoint_for

pytestmark = pytest.mark.timeout(60)

ORDERS = list(permutations(sorted(DOUBLES)))
BETA = "context-1m-2025-08-07"
SAFETY = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
GEMINI_THINKING = {"thinkingBudget": 512, "includeThoughts": False}
# Fields each wire must never see at the top of its request body (Gemini's own are top-level there, but
# its thinkingConfig belongs inside generationConfig).
FOREIGN = {
    "openai": {"anthropic_beta", "safetySettings", "thinkingConfig"},
    "anthropic": {
        "anthropic_beta",
        "safetySettings",
        "thinkingConfig",
        "prompt_cache_key",
        "reasoning_effort",
    },
    "gemini": {"anthropic_beta", "thinkingConfig", "prompt_cache_key", "reasoning_effort"},
}


def check_openai(request: RecordedRequest) -> None:
    body = request.json
    assert body["prompt_cache_key"] == "session-1"
    assert body["reasoning_effort"] == "high"
    assert request.header("anthropic-beta") is None


def check_anthropic(request: RecordedRequest) -> None:
    body = request.json
    assert request.header("anthropic-beta") == BETA
    assert body["thinking"]["type"] == "enabled"  # claude-sonnet-4-5 thinks on a budget
    assert "extra_headers" not in body


def check_gemini(request: RecordedRequest) -> None:
    body = request.json
    assert body["safetySettings"] == SAFETY
    # The caller's own thinkingConfig, not the one the effort would have made.
    assert body["generationConfig"]["thinkingConfig"] == GEMINI_THINKING
    assert request.header("anthropic-beta") is None


CHECKS = {"openai": check_openai, "anthropic": check_anthropic, "gemini": check_gemini}


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
async def test_each_providers_settings_reach_only_candidates_of_its_kind(order: tuple[str, ...]) -> None:
    first, second, third = (DOUBLES[name]() for name in order)
    params = ModelParams(
        model=first.model,
        reasoning_effort="high",
        max_tokens=32000,
        extra_body={"anthropic_beta": BETA, "safetySettings": SAFETY, "thinkingConfig": GEMINI_THINKING},
    )
    async with (
        ScriptedServer(first.overloaded) as a,
        ScriptedServer(second.overloaded) as b,
        ScriptedServer(third.plain) as c,
    ):
        endpoint = endpoint_for(a, first).with_fallbacks(
            Target(endpoint_for(b, second), second.model), Target(endpoint_for(c, third), third.model)
        )
        caps = capabilities_for(endpoint)
        body: dict[str, Any] = build_body(
            params, "Be brief.", [], [], caps, caps.model(first.model), prompt_cache_key="session-1"
        )
        body["messages"].append({"role": "user", "content": "hi"})
        turn = await run_turn(endpoint, body, policy=RetryPolicy(max_retries=0))
        received = {
            double.api: server.chat_requests for double, server in ((first, a), (second, b), (third, c))
        }
    assert turn.content == third.plain_text
    for api, requests in received.items():
        (request,) = requests
        assert not FOREIGN[api] & set(request.json), (api, sorted(request.json))
        CHECKS[api](request)
