"""Models, windows, liveness and token counts of the native wires, each asked in its own API's terms, on
loopback, with the providers' own bodies (tests/data/providers, sources in the README there):

- Anthropic: ``anthropic/models-list.documented.json`` is the API reference's List Models example (one
  entry without window fields, ``has_more: true`` with the reference's ``"<string>"`` cursor);
  ``anthropic/model-get.reconstructed.json`` is its Get a Model example with the documented
  ``max_input_tokens`` / ``max_tokens`` fields filled with the published Claude Sonnet 4 values. No
  recording of an Anthropic model listing was found.
- Gemini: ``gemini/models-list.json`` is a ``GET /v1beta/models`` answer as a user of the API saved it
  (yuv-man/habeat-server @ 29ef58f0aab5346d55683308e215f7a989df68dc, ``models.json``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.errors import EndpointError, EndpointRefused
from steadyloop.sizing import TokenCount, count_tokens
from steadyloop.sizing.calibration import chars_per_token_for
from steadyloop.sizing.counting import GeminiCounter, TokenizerUnavailable, token_counter_for
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.liveness import endpoint_answers
from steadyloop.wire.windows import context_limit_for, list_models

from .provider_doubles import DATA, DOUBLES

pytestmark = pytest.mark.timeout(60)


def _data(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


ANTHROPIC_LISTING = (DATA / "anthropic" / "models-list.documented.json").read_bytes()
GEMINI_LISTING = (DATA / "gemini" / "models-list.json").read_bytes()
# Claude Sonnet 4 with its window (Get a Model); Claude 3.7 Sonnet as the List Models example shows it.
SONNET: dict[str, Any] = _data("anthropic/model-get.reconstructed.json")
(OLDER,) = _data("anthropic/models-list.documented.json")["data"]
GEMINI_MODELS: list[dict[str, Any]] = _data("gemini/models-list.json")["models"]
FLASH = next(m for m in GEMINI_MODELS if m["name"] == "models/gemini-2.5-flash")
JSON = {"content-type": "application/json"}


def anthropic(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url, "test-key", api="anthropic")


def gemini(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url.removesuffix("/v1") + "/v1beta", "test-key", api="gemini")


def asked(server: ScriptedServer) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in server.requests]


async def test_anthropic_lists_its_models_as_the_reference_shows_them() -> None:
    async with ScriptedServer(models=Reply.raw(ANTHROPIC_LISTING, headers=JSON)) as server:
        endpoint = anthropic(server)
        models = await list_models(endpoint)
        assert [(m.id, m.context_length) for m in models] == [("claude-3-7-sonnet-20250219", None)]
        first, again = server.requests
        assert (first.method, first.path) == ("GET", "/v1/models")
        assert first.header("x-api-key") == "test-key" and first.header("anthropic-version")
        # has_more with a cursor: the next page is asked for once; a cursor that does not move ends it.
        assert again.path == "/v1/models" and "after_id=%3Cstring%3E" in again.query


async def test_anthropic_listing_names_the_window_where_the_entry_has_one() -> None:
    async with ScriptedServer(models=[SONNET, OLDER]) as server:
        endpoint = anthropic(server)
        models = await list_models(endpoint)
        assert [(m.id, m.context_length) for m in models] == [
            ("claude-sonnet-4-20250514", 200000),
            ("claude-3-7-sonnet-20250219", None),
        ]
        # The listing named the window: no second request for it.
        assert await context_limit_for(endpoint, "claude-sonnet-4-20250514") == 200000
        assert len(server.requests) == 1


async def test_anthropic_window_of_one_model_and_a_model_without_one() -> None:
    async with ScriptedServer(models=[SONNET, OLDER]) as server:
        endpoint = anthropic(server)
        assert await context_limit_for(endpoint, "claude-sonnet-4-20250514") == 200000
        assert await context_limit_for(endpoint, "claude-3-7-sonnet-20250219") is None
        assert await context_limit_for(endpoint, "claude-3-7-sonnet-20250219") is None  # the miss is kept
        assert await context_limit_for(endpoint, "claude-sonnet-4-20250514") == 200000  # so is the window
        assert asked(server) == [
            ("GET", "/v1/models/claude-sonnet-4-20250514"),
            ("GET", "/v1/models/claude-3-7-sonnet-20250219"),
        ]
        assert await context_limit_for(endpoint, "claude-sonnet-4-20250514", operator_value=1000) == 1000


async def test_gemini_lists_its_models_and_names_their_windows() -> None:
    async with ScriptedServer(models=Reply.raw(GEMINI_LISTING, headers=JSON)) as server:
        endpoint = gemini(server)
        models = await list_models(endpoint)
        assert [(m.id, m.context_length) for m in models] == [
            (m["name"].removeprefix("models/"), m["inputTokenLimit"]) for m in GEMINI_MODELS
        ]
        assert ("gemini-2.5-flash", 1048576) in [(m.id, m.context_length) for m in models]
        assert ("text-embedding-004", 2048) in [(m.id, m.context_length) for m in models]
        (request,) = server.requests  # no nextPageToken: one page
        assert (request.method, request.path) == ("GET", "/v1beta/models")
        assert request.header("x-goog-api-key") == "test-key"
        assert await context_limit_for(endpoint, "gemini-2.0-flash") == 1048576
        assert len(server.requests) == 1


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
        counted = await count_tokens(endpoint, "gemini-2.5-flash", body)
        (request,) = server.requests
    assert counted == TokenCount(31, "gemini:countTokens")
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
        counted = await count_tokens(endpoint, "gemini-2.5-flash", {"messages": []})
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


_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)


def _mutated(listing: dict[str, Any], key: str) -> Any:
    entry = st.fixed_dictionaries(
        {}, optional=dict.fromkeys(("id", "name", "max_input_tokens", "inputTokenLimit"), _json)
    )
    return st.one_of(
        _json,
        st.builds(
            lambda entries, more: {**listing, key: entries, **more},
            st.lists(entry | _json, max_size=4),
            st.dictionaries(st.sampled_from(["has_more", "last_id", "nextPageToken"]), _json),
        ),
    )


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["anthropic", "gemini"]).flatmap(
        lambda wire: st.tuples(
            st.just(wire),
            _mutated(_data("anthropic/models-list.documented.json"), "data")
            if wire == "anthropic"
            else _mutated(_data("gemini/models-list.json"), "models"),
        )
    )
)
async def test_any_listing_body_reads_or_is_a_typed_refusal(case: tuple[str, Any]) -> None:
    wire, body = case
    text = json.dumps(body) if not isinstance(body, str) else body
    async with ScriptedServer(models=Reply.raw(text, headers=JSON)) as server:
        endpoint = anthropic(server) if wire == "anthropic" else gemini(server)
        try:
            models = await list_models(endpoint)
        except EndpointError:
            return
        assert len(server.requests) <= 20
    assert len({m.id for m in models}) == len(models)
    assert all(m.context_length is None or m.context_length > 0 for m in models)


async def test_a_listing_nested_past_the_parsers_stack_is_a_typed_refusal() -> None:
    async with ScriptedServer(models=Reply.raw("[" * 100_000, headers=JSON)) as server:
        with pytest.raises(EndpointRefused):
            await list_models(gemini(server))
