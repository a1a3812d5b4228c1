"""Models, windows, liveness and token counts of the native wires, each asked in its own API's terms, on
loopback. The model objects carry the fields the providers' API references publish: Anthropic's
``GET /v1/models`` entries (``type``, ``id``, ``display_name``, ``created_at``, ``max_input_tokens``,
``max_tokens``) and Gemini's ``models.get`` resource (``name``, ``inputTokenLimit``, ...)."""

from __future__ import annotations

from typing import Any

import pytest

import steadyloop as sl
from steadyloop.context.calibration import chars_per_token_for
from steadyloop.context.counting import GeminiCounter, TokenizerUnavailable, token_counter_for
from steadyloop.errors import EndpointRefused
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.liveness import endpoint_answers
from steadyloop.wire.windows import context_limit_for, list_models

from .provider_doubles import DOUBLES

pytestmark = pytest.mark.timeout(60)

SONNET = {
    "type": "model",
    "id": "claude-sonnet-4-5",
    "display_name": "Claude Sonnet 4.5",
    "created_at": "2025-09-29T00:00:00Z",
    "max_input_tokens": 200000,
    "max_tokens": 64000,
}
# An older entry, from before the API named windows.
HAIKU = {"type": "model", "id": "claude-3-5-haiku-20241022", "display_name": "Claude Haiku 3.5"}
FLASH = {
    "name": "models/gemini-2.5-flash",
    "version": "001",
    "displayName": "Gemini 2.5 Flash",
    "inputTokenLimit": 1048576,
    "outputTokenLimit": 65536,
    "supportedGenerationMethods": ["generateContent", "countTokens"],
    "thinking": True,
}
EMBEDDING = {"name": "models/gemini-embedding-001", "supportedGenerationMethods": ["embedContent"]}


def anthropic(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url, "test-key", api="anthropic")


def gemini(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url.removesuffix("/v1") + "/v1beta", "test-key", api="gemini")


def asked(server: ScriptedServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in server.requests]


async def test_anthropic_lists_its_models_and_names_their_windows() -> None:
    async with ScriptedServer(models=[SONNET, HAIKU]) as server:
        endpoint = anthropic(server)
        models = await list_models(endpoint)
        assert [(m.id, m.context_length) for m in models] == [
            ("claude-sonnet-4-5", 200000),
            ("claude-3-5-haiku-20241022", None),
        ]
        request = server.requests[0]
        assert (request.method, request.path) == ("GET", "/v1/models")
        assert request.header("x-api-key") == "test-key" and request.header("anthropic-version")
        # The listing named the window: no second request for it.
        assert await context_limit_for(endpoint, "claude-sonnet-4-5") == 200000
        assert len(server.requests) == 1


async def test_anthropic_window_of_one_model_and_a_model_without_one() -> None:
    async with ScriptedServer(models=[SONNET, HAIKU]) as server:
        endpoint = anthropic(server)
        assert await context_limit_for(endpoint, "claude-sonnet-4-5") == 200000
        assert await context_limit_for(endpoint, "claude-3-5-haiku-20241022") is None
        assert await context_limit_for(endpoint, "claude-3-5-haiku-20241022") is None  # the miss is kept
        assert await context_limit_for(endpoint, "claude-sonnet-4-5") == 200000  # so is the window
        assert asked(server) == [
            ("GET", "/v1/models/claude-sonnet-4-5"),
            ("GET", "/v1/models/claude-3-5-haiku-20241022"),
        ]
        assert await context_limit_for(endpoint, "claude-sonnet-4-5", operator_value=1000) == 1000


async def test_gemini_lists_its_models_and_names_their_windows() -> None:
    async with ScriptedServer(models=[FLASH, EMBEDDING]) as server:
        endpoint = gemini(server)
        models = await list_models(endpoint)
        assert [(m.id, m.context_length) for m in models] == [
            ("gemini-2.5-flash", 1048576),
            ("gemini-embedding-001", None),
        ]
        request = server.requests[0]
        assert (request.method, request.path) == ("GET", "/v1beta/models")
        assert request.header("x-goog-api-key") == "test-key"


async def test_gemini_window_is_the_models_input_token_limit() -> None:
    async with ScriptedServer(models=[FLASH]) as server:
        endpoint = gemini(server)
        assert await context_limit_for(endpoint, "gemini-2.5-flash") == 1048576
        assert await context_limit_for(endpoint, "gemini-unknown") is None  # 404: no window, no error
        assert asked(server) == [
            ("GET", "/v1beta/models/gemini-2.5-flash"),
            ("GET", "/v1beta/models/gemini-unknown"),
        ]


@pytest.mark.parametrize("wire", ["anthropic", "gemini"])
async def test_a_refused_listing_is_a_typed_error_and_the_liveness_probe_sees_the_server(wire: str) -> None:
    async with ScriptedServer(models=None) as server:  # every model route answers 404
        endpoint = anthropic(server) if wire == "anthropic" else gemini(server)
        with pytest.raises(EndpointRefused) as caught:
            await list_models(endpoint)
        assert caught.value.status == 404
        assert await context_limit_for(endpoint, "any-model") is None
        assert await endpoint_answers(endpoint, 5.0)  # a refusal is an answer
        port = server.port
    gone = Endpoint(f"http://127.0.0.1:{port}/v1", "k", api=wire)
    assert not await endpoint_answers(gone, 5.0)
    assert await context_limit_for(gone, "any-model") is None


async def test_gemini_counts_the_request_as_the_wire_would_send_it() -> None:
    body: dict[str, Any] = {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}],
        "max_tokens": 100,
    }
    async with ScriptedServer() as server:
        server.count_tokens = {
            "totalTokens": 31,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}],
        }
        endpoint = gemini(server)
        counter = token_counter_for(endpoint, "gemini-2.5-flash")
        assert isinstance(counter, GeminiCounter) and counter.name == "gemini:countTokens"
        counted = await sl.count_tokens(endpoint, "gemini-2.5-flash", body)
        (request,) = server.requests
    assert counted == sl.TokenCount(31, "gemini:countTokens")
    assert request.path == "/v1beta/models/gemini-2.5-flash:countTokens"
    assert request.header("x-goog-api-key") == "test-key"
    sent = request.json["generateContentRequest"]
    assert sent["model"] == "models/gemini-2.5-flash"
    assert sent["systemInstruction"]["parts"][0]["text"] == "Be brief."
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert sent["tools"][0]["functionDeclarations"][0]["name"] == "look"


async def test_without_a_gemini_count_the_estimate_stands_in() -> None:
    async with ScriptedServer() as server:  # answers the count with 404
        endpoint = gemini(server)
        with pytest.raises(TokenizerUnavailable, match="did not count"):
            await GeminiCounter(endpoint, "gemini-2.5-flash").count({"messages": []})
        counted = await sl.count_tokens(endpoint, "gemini-2.5-flash", {"messages": []})
    assert counted.counter == "estimate" and counted.fallback is not None


async def test_the_first_gemini_request_is_calibrated_by_the_providers_count() -> None:
    double = DOUBLES["gemini"]()
    big = {"model": double.model, "messages": [{"role": "user", "content": " hello" * 1200}]}
    async with ScriptedServer(double.plain) as server:
        server.count_tokens = {"totalTokens": 1210}
        endpoint = gemini(server)
        turn = await sl.run_turn(endpoint, big)
        assert [r.path.rsplit(":", 1)[-1] for r in server.requests] == [
            "countTokens",
            "streamGenerateContent",
        ]
    assert turn.content == double.plain_text
    assert chars_per_token_for(endpoint, double.model) > 5
