"""The Gemini wire: request shape by generation, the schema subset, function ids and responses, finish
reasons typed, usage; recorded bodies where a response is read."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import EndpointError, InvalidInput, ModelRefusal
from steadyloop.testing.provider_streams import gemini_chunks, gemini_stream
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.gemini.provider import gemini_body
from steadyloop.wire.gemini.shape import (
    GEMINI_SETTINGS,
    GENERATED_ID,
    GeminiChunks,
    gemini_generation,
    gemini_request,
    gemini_schema,
)

from ._properties import chat_bodies, json_values, read_through
from .provider_doubles import DATA

pytestmark = pytest.mark.timeout(60)
G = DATA / "gemini"


def endpoint(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url.removesuffix("/v1") + "/v1beta", "test-key", api="gemini")


def read(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((G / name).read_text())
    return value


@pytest.mark.parametrize(
    ("model", "effort", "thinking", "temperature"),
    [
        ("gemini-2.5-flash", "low", {"thinkingBudget": 2048, "includeThoughts": True}, 0.4),
        ("gemini-2.5-flash", "none", {"thinkingBudget": 0}, 0.4),
        ("gemini-2.5-pro", "none", {"thinkingBudget": 128}, 0.4),
        ("gemini-3-pro-preview", "high", {"thinkingLevel": "high", "includeThoughts": True}, None),
        ("gemini-3.8-flash", None, None, None),
        ("gemini-4-argon", "medium", {"thinkingLevel": "medium", "includeThoughts": True}, None),
    ],
)
def test_thinking_and_sampling_by_generation(
    model: str, effort: str | None, thinking: Any, temperature: float | None
) -> None:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "x"}],
        "temperature": 0.4,
    }
    if effort:
        body["reasoning_effort"] = effort
    _, _, config = gemini_request(body)
    assert config.get("thinkingConfig") == thinking
    assert config.get("temperature") == temperature


def test_generations_read_from_model_names() -> None:
    assert gemini_generation("gemini-2.5-pro") == (2, 5)
    assert gemini_generation("gemini-3-pro-preview") == (3, 0)
    assert gemini_generation("models/gemini-3.1-pro-preview") == (3, 1)
    assert gemini_generation("my-proxy-alias") == (99, 0)


def test_a_transcript_becomes_contents_with_named_function_responses() -> None:
    model, contents, config = gemini_request(
        {
            "model": "gemini-2.5-flash",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "fc_1",
                            "type": "function",
                            "function": {"name": "a", "arguments": '{"x": 1}'},
                        },
                        {
                            "id": GENERATED_ID + "1",
                            "type": "function",
                            "function": {"name": "b", "arguments": "{}"},
                        },
                    ],
                    "thinking_blocks": [{"provider": "gemini", "signature": "c2ln", "call_id": "fc_1"}],
                },
                {"role": "tool", "tool_call_id": "fc_1", "content": "one"},
                {"role": "tool", "tool_call_id": GENERATED_ID + "1", "content": "bad", "is_error": True},
            ],
            "tool_choice": {"type": "function", "function": {"name": "a"}},
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "a",
                        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
                    },
                }
            ],
        }
    )
    assert model == "gemini-2.5-flash"
    assert config["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    first, second = contents[1]["parts"]
    assert first == {
        "functionCall": {"name": "a", "args": {"x": 1}, "id": "fc_1"},
        "thoughtSignature": "c2ln",
    }
    assert second == {"functionCall": {"name": "b", "args": {}}}  # an id Gemini never issued is not sent
    responses = [p["functionResponse"] for p in contents[2]["parts"]]
    assert responses == [
        {"name": "a", "response": {"result": "one"}, "id": "fc_1"},
        {"name": "b", "response": {"error": "bad"}},
    ]
    assert config["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["a"]}}


def test_schemas_are_cut_to_the_subset_gemini_takes() -> None:
    schema = {
        "type": "object",
        "title": "Args",
        "additionalProperties": False,
        "$defs": {"Unit": {"type": "string", "enum": ["c", "f"]}},
        "properties": {
            "city": {"type": ["string", "null"], "description": "where"},
            "unit": {"$ref": "#/$defs/Unit"},
            "mode": {"const": "fast"},
            "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "required": ["city"],
    }
    cut = gemini_schema(schema)
    assert "additionalProperties" not in json.dumps(cut) and "$ref" not in json.dumps(cut)
    props = cut["properties"]
    assert props["city"] == {"type": "string", "nullable": True, "description": "where"}
    assert props["unit"]["enum"] == ["c", "f"]
    assert props["mode"] == {"type": "string", "enum": ["fast"]}
    assert props["count"]["type"] == "integer" and props["count"]["nullable"] is True
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert cut["required"] == ["city"]


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("08-finish-safety.nonstream.json", "SAFETY"),
        ("10-finish-recitation.reconstructed.json", "RECITATION"),
    ],
)
async def test_safety_and_recitation_are_typed_refusals(name: str, category: str) -> None:
    async with ScriptedServer(gemini_stream(gemini_chunks(read(name)))) as server:
        with pytest.raises(ModelRefusal) as caught:
            await run_turn(
                endpoint(server),
                {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "q"}]},
            )
    assert caught.value.category == category
    if category == "SAFETY":
        assert "HARM_CATEGORY_HATE_SPEECH" in str(caught.value)


async def test_max_tokens_is_a_length_finish_and_cached_tokens_are_read() -> None:
    async with ScriptedServer(
        gemini_stream(gemini_chunks(read("09-finish-max-tokens.nonstream.json")))
    ) as server:
        cut = await run_turn(
            endpoint(server), {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "q"}]}
        )
    assert cut.finish_reason == "length"
    assert cut.content
    cached = read("07-cached-content-usage.nonstream.json")
    async with ScriptedServer(gemini_stream(gemini_chunks(cached))) as server:
        hit = await run_turn(
            endpoint(server), {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "q"}]}
        )
    meta = cached["usageMetadata"]
    assert hit.usage.cached_tokens == meta["cachedContentTokenCount"]
    assert hit.usage.prompt_tokens == meta["promptTokenCount"]
    assert hit.usage.reasoning_tokens == meta["thoughtsTokenCount"]


async def test_a_thought_summary_streams_as_reasoning() -> None:
    from steadyloop.testing.provider_streams import sse_reply

    async with ScriptedServer(sse_reply((G / "04-thinking.sse").read_bytes())) as server:
        thought: list[str] = []
        turn = await run_turn(
            endpoint(server),
            {
                "model": "gemini-2.5-pro",
                "messages": [{"role": "user", "content": "q"}],
                "reasoning_effort": "low",
            },
            on_thinking=thought.append,
        )
    assert turn.reasoning.startswith("**Clarifying User Goals**")
    assert "".join(thought) == turn.reasoning
    assert "Clarifying" not in turn.content


_json = json_values(max_leaves=25)
_part = st.fixed_dictionaries(
    {}, optional={"text": _json, "thought": _json, "functionCall": _json, "thoughtSignature": _json}
)
_chunk = st.fixed_dictionaries(
    {},
    optional={
        "candidates": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "content": st.fixed_dictionaries(
                        {}, optional={"parts": st.lists(_part, max_size=3) | _json}
                    ),
                    "finishReason": st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", "OTHER", "X"]) | _json,
                    "safetyRatings": _json,
                },
            ),
            max_size=2,
        )
        | _json,
        "usageMetadata": _json,
        "promptFeedback": _json,
    },
)


@given(st.lists(_chunk | _json, max_size=8))
def test_any_chunk_sequence_reads_without_surprises(chunks: list[Any]) -> None:
    read_through(GeminiChunks(), chunks)


@given(chat_bodies(["safetySettings", "thinkingConfig", "cachedContent", "labels"], _json))
def test_any_body_makes_a_request(body: dict[str, Any]) -> None:
    try:
        _, contents, config = gemini_request(body)
    except InvalidInput as error:  # only a Gemini setting of the wrong JSON type is refused
        assert str(error).split(" ")[0] in GEMINI_SETTINGS
        return
    json.dumps([contents, config])


def test_the_callers_own_gemini_settings_go_out_in_their_places() -> None:
    safety = [{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}]
    body = {
        "model": "gemini-2.5-flash",
        "messages": [{"role": "user", "content": "hi"}],
        "reasoning_effort": "high",
        "safetySettings": tuple(safety),
        "thinkingConfig": {"thinkingBudget": 0},
        "cachedContent": "cachedContents/abc123",
    }
    request = gemini_body(*gemini_request(body)[1:])
    assert request["safetySettings"] == safety
    assert request["cachedContent"] == "cachedContents/abc123"
    assert request["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}  # over the effort's
    with pytest.raises(InvalidInput, match="safetySettings is a list"):
        gemini_request({**body, "safetySettings": {"category": "x"}})
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(InvalidInput, match="nests deeper"):
        gemini_request({**body, "safetySettings": deep})


def test_an_error_inside_the_stream_is_read_like_any_failure() -> None:
    rows = [json.loads(line) for line in (G / "errors.jsonl").read_text().splitlines() if line.strip()]
    overloaded = json.loads(rows[4]["body"])
    reader = GeminiChunks(endpoint="http://gemini.invalid", model="gemini-2.5-flash")
    assert reader.feed({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]})
    with pytest.raises(EndpointError) as caught:
        reader.feed(overloaded)
    assert caught.value.kind == "transient"
    assert "overloaded" in str(caught.value)


def test_an_in_stream_error_and_a_cancellation_leave_nothing_to_the_collector() -> None:
    # Whatever ends a stream, it is closed in order by the task that read it. A generator left open would be
    # closed when its loop ends, together with the others, out of order ("aclose(): asynchronous generator
    # is already running"): so the scenario runs on a loop of its own, ended here, which reports it.
    from steadyloop.errors import EndpointUnavailable
    from steadyloop.turn import RetryPolicy
    from steadyloop.wire.transport.clients import aclose_clients

    rows = [json.loads(line) for line in (G / "errors.jsonl").read_text().splitlines() if line.strip()]
    overloaded = json.loads(rows[4]["body"])
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}]}
    more = {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}, "index": 0}]}
    body = {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "q"}]}
    once = RetryPolicy(max_retries=0)
    reported: list[str] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(str(context.get("message"))))
        stalled = gemini_stream([first, more], stall_after=1)
        async with ScriptedServer(gemini_stream([first, overloaded]), stalled) as server:
            with pytest.raises(EndpointUnavailable) as caught:
                await run_turn(endpoint(server), body, policy=once)
            assert caught.value.kind == "transient"
            assert "overloaded" in str(caught.value)

            streaming = asyncio.Event()
            task = asyncio.create_task(
                run_turn(endpoint(server), body, policy=once, on_output=lambda _: streaming.set())
            )
            await streaming.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert len(server.chat_requests) == 2
        await aclose_clients()

    asyncio.run(scenario())
    assert reported == []
