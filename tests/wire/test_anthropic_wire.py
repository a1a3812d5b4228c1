"""The Anthropic Messages wire: cache breakpoints, cache usage, signed and redacted thinking, request shape
by model generation, pause_turn, refusals; real SDK on loopback where a request is sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.errors import ModelRefusal
from steadyloop.events import UsageReport
from steadyloop.testing.provider_streams import anthropic_events, anthropic_stream, sse_reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import run_turn
from steadyloop.wire.anthropic.events import AnthropicEvents
from steadyloop.wire.anthropic.shape import anthropic_request, claude_generation
from steadyloop.wire.endpoints import Endpoint

from ._properties import chat_bodies, json_values, read_through
from .provider_doubles import DATA

pytestmark = pytest.mark.timeout(60)
A = DATA / "anthropic"


def endpoint(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url, "test-key", api="anthropic")


def message(content: list[dict[str, Any]], stop: str, **usage: int) -> dict[str, Any]:
    return {
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


def call(n: int) -> Any:
    block = {"type": "tool_use", "id": f"toolu_{n}", "name": "lookup", "input": {"key": f"k{n}"}}
    return anthropic_stream(anthropic_events(message([block], "tool_use")))


def _without_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_marks(v) for v in value]
    return value


def _marked_prefixes(request: dict[str, Any]) -> list[Any]:
    """For every marked block of the conversation: the conversation up to and including it."""
    prefixes = []
    turns = request["messages"]
    for n, turn in enumerate(turns):
        for b, block in enumerate(turn["content"]):
            if "cache_control" in block:
                cut = [*turns[:n], {**turn, "content": turn["content"][: b + 1]}]
                prefixes.append(_without_marks(cut))
    return prefixes


async def test_every_request_after_the_first_reads_the_cached_prefix() -> None:
    @sl.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    replies = [call(1), call(2), call(3), sse_reply((A / "01-text.sse").read_bytes())]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(endpoint(server), "claude-sonnet-4-5", system="You look things up.", tools=[lookup])
        await agent.prompt("Look up k1, k2 and k3.")
        requests = [r.json for r in server.chat_requests]
    assert len(requests) == 4
    for n, request in enumerate(requests):
        marks = sum(
            json.dumps(part).count('"cache_control"')
            for part in (request.get("tools"), request.get("system"), request["messages"])
        )
        assert marks <= 4
        assert "cache_control" in request["tools"][-1]
        assert "cache_control" in request["system"][-1]
        assert _marked_prefixes(request), f"request {n} marks nothing in the conversation"
        if n == 0:
            continue
        # What the previous request wrote (its whole marked conversation) is a marked prefix of this one,
        # with the tools and system unchanged: this request reads it from the cache.
        previous = requests[n - 1]
        written = _marked_prefixes(previous)[-1]
        assert written in _marked_prefixes(request)
        assert _without_marks(request["tools"]) == _without_marks(previous["tools"])
        assert _without_marks(request["system"]) == _without_marks(previous["system"])


async def test_cache_reads_and_writes_reach_usage() -> None:
    written = message([{"type": "text", "text": "ok"}], "end_turn", cache_creation_input_tokens=1200)
    async with ScriptedServer(anthropic_stream(anthropic_events(written))) as server:
        first = await run_turn(
            endpoint(server), {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "x"}]}
        )
    assert first.usage.cache_write_tokens == 1200
    assert first.usage.cached_tokens == 0
    assert first.usage.prompt_tokens == 1210

    async with ScriptedServer(sse_reply((A / "09-cache-read-usage.sse").read_bytes())) as server:
        hit = await run_turn(
            endpoint(server), {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "x"}]}
        )
    # Compaction ran a pass of its own: the request read 55096 cached tokens in it, billed in iterations.
    assert hit.content == "Hello! 👋"
    assert hit.usage.cached_tokens == 55096
    assert hit.usage.cache_write_tokens == 0
    assert hit.usage.prompt_tokens == 100 + 55096 + 181


async def test_an_agents_usage_events_show_cache_writes_then_reads() -> None:
    # The first request writes the prefix to the cache; the second reads it: the run's UsageReport events
    # carry both, per request and in the totals.
    @sl.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    block = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "k1"}}
    replies = [
        anthropic_stream(anthropic_events(message([block], "tool_use", cache_creation_input_tokens=1500))),
        anthropic_stream(
            anthropic_events(
                message([{"type": "text", "text": "k1 found"}], "end_turn", cache_read_input_tokens=1500)
            )
        ),
    ]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(endpoint(server), "claude-sonnet-4-5", system="You look things up.", tools=[lookup])
        reports: list[UsageReport] = []
        agent.subscribe(lambda e: reports.append(e) if isinstance(e, UsageReport) else None)
        await agent.prompt("Look up k1.")
    first, second = (r.turn for r in reports)
    assert (first.cache_write_tokens, first.cached_tokens) == (1500, 0)
    assert (second.cache_write_tokens, second.cached_tokens) == (0, 1500)
    assert (reports[-1].totals.cache_write_tokens, reports[-1].totals.cached_tokens) == (1500, 1500)


async def test_redacted_thinking_is_kept_and_replayed_unchanged() -> None:
    raw = (A / "06-redacted-thinking.sse").read_bytes()
    data = [
        json.loads(line.removeprefix(b"data: "))["content_block"]["data"]
        for line in raw.splitlines()
        if b'"redacted_thinking"' in line
    ]
    async with ScriptedServer(sse_reply(raw), sse_reply((A / "01-text.sse").read_bytes())) as server:
        agent = sl.Agent(endpoint(server), "claude-sonnet-4-5", thinking="low")
        await agent.prompt("first")
        await agent.prompt("second")
        second = server.chat_requests[1].json
    kept = next(m for m in agent.state.messages if isinstance(m, sl.AssistantMessage))
    assert [b.redacted for b in kept.thinking] == data
    replayed = next(m for m in second["messages"] if m["role"] == "assistant")["content"]
    assert [b["data"] for b in replayed if b["type"] == "redacted_thinking"] == data
    assert replayed[-1]["type"] == "text"


def test_tool_results_carry_is_error_and_merge_into_one_user_turn() -> None:
    request = anthropic_request(
        {
            "model": "claude-haiku-4-5",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "a", "content": "fine"},
                {"role": "tool", "tool_call_id": "b", "content": "boom", "is_error": True},
            ],
        }
    )
    assert request["system"][0]["text"] == "sys"
    assert [t["role"] for t in request["messages"]] == ["user", "assistant", "user"]
    results = request["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == ["a", "b"]
    assert "is_error" not in results[0] and results[1]["is_error"] is True
    assert request["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "a",
        "name": "f",
        "input": {"x": 1},
    }


@pytest.mark.parametrize(
    ("model", "effort", "thinking", "effort_sent", "temperature"),
    [
        ("claude-sonnet-4-5-20250929", None, None, None, 0.2),
        ("claude-sonnet-4-5-20250929", "high", {"type": "enabled", "budget_tokens": 16384}, None, None),
        ("claude-3-7-sonnet-latest", "low", {"type": "enabled", "budget_tokens": 2048}, None, None),
        ("claude-opus-4-6", None, None, None, None),
        ("claude-opus-4-6", "medium", {"type": "adaptive"}, "medium", None),
        ("claude-opus-5-5", None, {"type": "adaptive"}, None, None),
        ("claude-fable-5-1", "high", {"type": "adaptive"}, "high", None),
    ],
)
def test_thinking_and_temperature_by_model_generation(
    model: str, effort: str | None, thinking: Any, effort_sent: str | None, temperature: float | None
) -> None:
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "x"}],
        "temperature": 0.2,
    }
    if effort:
        body["reasoning_effort"] = effort
    request = anthropic_request(body)
    assert request.get("thinking") == thinking
    assert request.get("output_config", {}).get("effort") == effort_sent
    assert request.get("temperature") == temperature
    if thinking and thinking.get("budget_tokens"):
        assert request["max_tokens"] > thinking["budget_tokens"]


def test_generations_read_from_model_names() -> None:
    assert claude_generation("claude-sonnet-4-5-20250929") == (4, 5)
    assert claude_generation("claude-haiku-4-5") == (4, 5)
    assert claude_generation("claude-3-7-sonnet-latest") == (3, 7)
    assert claude_generation("claude-3-5-haiku-20241022") == (3, 5)
    assert claude_generation("claude-opus-4-20250514") == (4, 0)
    assert claude_generation("claude-fable-5-1") == (5, 1)
    assert claude_generation("claude-opus-5") == (5, 0)
    assert claude_generation("some-proxy-alias") == (99, 0)


def test_structured_output_goes_to_output_config() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    request = anthropic_request(
        {
            "model": "claude-opus-4-6",
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
        }
    )
    assert request["output_config"]["format"] == {"type": "json_schema", "schema": schema}


async def test_pause_turn_is_continued_into_the_same_turn() -> None:
    paused = message([{"type": "text", "text": "Searching... "}], "pause_turn")
    done = message([{"type": "text", "text": "found it."}], "end_turn")
    async with ScriptedServer(
        anthropic_stream(anthropic_events(paused)), anthropic_stream(anthropic_events(done))
    ) as server:
        turn = await run_turn(
            endpoint(server), {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "q"}]}
        )
        second = server.chat_requests[1].json
    assert turn.content == "Searching... found it."
    assert turn.finish_reason == "stop"
    assert turn.usage.completion_tokens == 10  # both requests' output
    assert second["messages"][-1]["role"] == "assistant"
    assert second["messages"][-1]["content"][0]["text"] == "Searching... "


async def test_a_refusal_names_its_category() -> None:
    events = anthropic_events(message([{"type": "text", "text": "I can't"}], "refusal"))
    events[-2]["delta"]["stop_details"] = {"type": "refusal", "category": "cyber", "explanation": None}
    async with ScriptedServer(anthropic_stream(events)) as server:
        with pytest.raises(ModelRefusal) as caught:
            await run_turn(
                endpoint(server), {"model": "claude-opus-5-5", "messages": [{"role": "user", "content": "q"}]}
            )
    assert caught.value.category == "cyber"
    assert "cyber" in str(caught.value)


async def test_the_key_reaches_the_server_and_v1_is_optional() -> None:
    async with ScriptedServer(sse_reply((A / "01-text.sse").read_bytes())) as server:
        bare = Endpoint(server.base_url.removesuffix("/v1"), "sk-ant-test", api="anthropic")
        await run_turn(bare, {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "q"}]})
        request = server.chat_requests[0]
    assert request.path == "/v1/messages"
    # The SDK chooses the header; the key reaches the server in one of Anthropic's two.
    assert (
        request.header("x-api-key") == "sk-ant-test"
        or request.header("authorization") == "Bearer sk-ant-test"
    )


_json = json_values(max_leaves=20)
_event_types = st.sampled_from(
    [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
        "other",
    ]
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {"type": _event_types, "index": st.integers(-1, 3)},
            optional={"delta": _json, "content_block": _json, "message": _json, "usage": _json},
        ),
        max_size=20,
    )
)
def test_any_event_sequence_reads_without_surprises(events: list[dict[str, Any]]) -> None:
    read_through(AnthropicEvents(), events)


@given(chat_bodies(["user", "thinking"], _json))
def test_any_body_makes_a_request_or_nothing_worse(body: dict[str, Any]) -> None:
    request = anthropic_request(body)
    assert isinstance(request["messages"], list)
    json.dumps(request)


def test_a_thinking_model_is_not_forced_to_call_a_tool() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    body = {"model": "claude-opus-4-6", "messages": [{"role": "user", "content": "x"}], "tools": [tool]}
    forced = anthropic_request({**body, "tool_choice": "required"})
    assert forced["tool_choice"] == {"type": "any"}  # no thinking asked for on 4.6: forcing stands
    thinking = anthropic_request({**body, "tool_choice": "required", "reasoning_effort": "high"})
    assert thinking["tool_choice"] == {"type": "auto"}
    named = anthropic_request(
        {**body, "tool_choice": {"type": "function", "function": {"name": "f"}}, "parallel_tool_calls": False}
    )
    assert named["tool_choice"] == {"type": "tool", "name": "f", "disable_parallel_tool_use": True}
