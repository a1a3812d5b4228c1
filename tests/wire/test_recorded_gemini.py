"""Gemini recordings (tests/data/providers/README.md says where each came from): the tool-use prompt
counted as Gemini counts it, a blocked prompt's own words kept and caught as a refusal, code-execution
turns sent back whole, a used-up daily quota not retried, and Vertex AI's streamed call arguments joined
into one call."""

from __future__ import annotations

import json
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import RunModelRefusal, RunQuotaExhausted
from steadyloop.testing.provider_streams import gemini_chunks, gemini_stream
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.gemini.shape import GeminiChunks

from .provider_doubles import DATA, error_reply, framed, recorded_events

pytestmark = pytest.mark.timeout(60)
G = DATA / "gemini"
ASK = {"model": "gemini-3-flash-preview", "messages": [{"role": "user", "content": "q"}]}


def endpoint(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url.removesuffix("/v1") + "/v1beta", "test-key", api="gemini")


def read(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((G / name).read_text())
    return value


@pytest.mark.parametrize("name", ["11-code-execution.nonstream.json", "12-tool-use-usage.nonstream.json"])
async def test_the_tool_use_prompt_is_counted_and_the_total_is_geminis(name: str) -> None:
    recorded = read(name)
    async with ScriptedServer(gemini_stream(gemini_chunks(recorded))) as server:
        turn = await run_turn(endpoint(server), ASK)
    meta = recorded["usageMetadata"]
    assert turn.usage.prompt_tokens == meta["promptTokenCount"] + meta["toolUsePromptTokenCount"]
    assert turn.usage.total_tokens == meta["totalTokenCount"]


async def test_a_blocked_prompt_keeps_the_providers_words_and_ends_a_run_as_a_refusal() -> None:
    # Vertex AI's answer without alt=sse: a JSON array, read once the body is whole.
    body = (G / "15-vertex-prompt-blocked.quoted.json").read_bytes()
    blocked = Reply.raw(body, headers={"content-type": "application/json"})
    async with ScriptedServer(blocked) as server:
        agent = sl.Agent(endpoint(server), "gemini-3-pro-preview")
        with pytest.raises(sl.ModelRefusal) as caught:
            await agent.prompt("q")
    error = caught.value
    assert isinstance(error, RunModelRefusal)
    assert error.category == "PROHIBITED_CONTENT"
    assert "The prompt is blocked due to prohibited contents" in str(error)
    assert error.body == "The prompt is blocked due to prohibited contents"


async def test_a_blocked_prompt_in_the_stream_names_its_reason() -> None:
    blocked = framed(recorded_events(G / "14-prompt-blocked.chunks.jsonl"), api="gemini")
    async with ScriptedServer(blocked) as server:
        with pytest.raises(sl.ModelRefusal) as caught:
            await run_turn(endpoint(server), ASK)
    assert caught.value.category == "PROHIBITED_CONTENT"
    assert "the prompt was blocked" in str(caught.value)


async def test_a_code_execution_turn_is_sent_back_with_its_code_results_and_every_signature() -> None:
    recorded = read("11-code-execution.nonstream.json")
    answered = gemini_stream(gemini_chunks(read("12-tool-use-usage.nonstream.json")))
    async with ScriptedServer(gemini_stream(gemini_chunks(recorded)), answered) as server:
        agent = sl.Agent(endpoint(server), "gemini-3-flash-preview")
        first = await agent.prompt("Run print('ok') then 1/0.")
        await agent.prompt("And again?")
        second = server.chat_requests[1].json
    assert first.content.startswith("The code execution resulted in the following output")
    model_turn = second["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"] == recorded["candidates"][0]["content"]["parts"]


def test_streamed_text_fragments_are_sent_back_as_the_part_they_were_cut_from() -> None:
    reader = GeminiChunks()
    recorded = read("11-code-execution.nonstream.json")
    parts = recorded["candidates"][0]["content"]["parts"]
    text = parts[3]["text"]
    cut = [
        *parts[:3],
        {"text": text[:20]},
        {"text": text[20:], "thoughtSignature": parts[3]["thoughtSignature"]},
    ]
    chunks = gemini_chunks(
        {**recorded, "candidates": [{**recorded["candidates"][0], "content": {"parts": cut}}]}
    )
    out = [c for chunk in chunks for c in reader.feed(chunk)]
    deltas = [c["choices"][0]["delta"] for c in out if c.get("choices")]
    kept = [b for delta in deltas for b in delta.get("thinking_blocks", [])]
    assert [json.loads(b["parts"]) for b in kept if "parts" in b] == [parts]


async def test_a_used_up_daily_quota_is_not_retried_and_says_so() -> None:
    async with ScriptedServer(error_reply("gemini", 10), error_reply("gemini", 10)) as server:
        with pytest.raises(sl.QuotaExhausted) as caught:
            await run_turn(endpoint(server), ASK, policy=RetryPolicy(max_retries=3, base_delay_s=0.01))
        sent = len(server.chat_requests)
    assert sent == 1
    error = caught.value
    assert error.status == 429
    assert error.kind == "rate_limited"
    assert error.period == "day"
    assert "daily quota" in str(error)
    assert "per day per user per tier" in str(error)


async def test_a_used_up_daily_quota_ends_a_run_as_the_quota_error() -> None:
    async with ScriptedServer(error_reply("gemini", 10)) as server:
        agent = sl.Agent(endpoint(server), "gemini-2.5-pro")
        with pytest.raises(sl.QuotaExhausted) as caught:
            await agent.prompt("q")
    assert isinstance(caught.value, RunQuotaExhausted)
    assert caught.value.reason == "quota"


async def test_a_quota_with_a_wait_named_is_still_retried() -> None:
    # The same recorded shape with RetryInfo (errors.jsonl row 4): it clears within the minute.
    async with ScriptedServer(
        error_reply("gemini", 4), gemini_stream(gemini_chunks(read("12-tool-use-usage.nonstream.json")))
    ) as server:
        with pytest.raises(sl.RetryDelayTooLong):
            await run_turn(endpoint(server), ASK, policy=RetryPolicy(max_retries=1, max_retry_delay_s=1.0))


EXPECTED_RECIPE = {
    "recipe": {
        "ingredients": [
            {"amount": "16 oz", "name": "Lasagna noodles"},
            {"amount": "1 lb", "name": "Ground beef"},
            {"amount": "15 oz", "name": "Ricotta cheese"},
            {"amount": "3 cups", "name": "Mozzarella cheese"},
            {"amount": "1/2 cup", "name": "Parmesan cheese"},
            {"amount": "24 oz", "name": "Tomato sauce"},
            {"amount": "1", "name": "Egg"},
            {"amount": "2 cloves", "name": "Garlic"},
            {"amount": "1 tsp", "name": "Salt"},
            {"amount": "1/2 tsp", "name": "Pepper"},
        ],
        "name": "Lasagna",
        "steps": [
            "Preheat oven to 375°F (190°C).",
            "Cook lasagna noodles according to package directions, drain and set aside.",
            "Brown ground beef with minced garlic in a skillet. Drain fat and stir in tomato sauce. Simmer for 10 minutes.",
            "In a bowl, mix ricotta cheese, egg, salt, pepper, and Parmesan cheese.",
            "In a 9x13 baking dish, spread a thin layer of meat sauce.",
            "Layer noodles, ricotta mixture, mozzarella, and meat sauce. Repeat.",
            "Top with remaining mozzarella cheese.",
            "Cover with foil and bake for 25 minutes.",
            "Remove foil and bake for another 25 minutes until golden.",
            "Let stand for 15 minutes before serving.",
        ],
    }
}


async def test_vertex_streamed_call_arguments_are_joined_into_one_call() -> None:
    streamed = framed(recorded_events(G / "13-vertex-partial-args.chunks.jsonl"), api="gemini")
    async with ScriptedServer(streamed) as server:
        turn = await run_turn(endpoint(server), {**ASK, "model": "gemini-3.1-pro-preview"})
    assert [(call.name, call.arguments) for call in turn.tool_calls] == [("cookRecipe", EXPECTED_RECIPE)]
    assert turn.finish_reason == "tool_calls"
    assert [b.call_id for b in turn.thinking if b.signature] == [turn.tool_calls[0].id]


def test_vertex_streamed_call_arguments_leave_nothing_skipped() -> None:
    reader = GeminiChunks()
    for payload in recorded_events(G / "13-vertex-partial-args.chunks.jsonl"):
        reader.feed(json.loads(payload))
    assert reader.skipped == 0
    assert reader.calls == 1
