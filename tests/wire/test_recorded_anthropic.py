"""Anthropic recordings (tests/data/providers/README.md says where each came from): a refusal that ends a
run is caught as the refusal it is, and a tool Anthropic runs itself keeps its streamed input, with nothing
reported skipped, and is sent back exactly when a paused turn is continued."""

from __future__ import annotations

import json
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import RunModelRefusal
from steadyloop.events import Notice
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import run_turn
from steadyloop.wire.anthropic.events import AnthropicEvents
from steadyloop.wire.endpoints import Endpoint

from .provider_doubles import DATA, framed, recorded_events

pytestmark = pytest.mark.timeout(60)
A = DATA / "anthropic"
WEB_FETCH = A / "11-web-fetch-server-tool.chunks.jsonl"
FETCHED = "https://en.wikipedia.org/wiki/Maglemosian_culture"


def endpoint(server: ScriptedServer) -> Endpoint:
    return Endpoint(server.base_url, "test-key", api="anthropic")


async def test_a_refusal_that_ends_an_agent_run_is_caught_as_a_model_refusal() -> None:
    refusal = framed(recorded_events(A / "12-refusal-cyber.chunks.jsonl"), api="anthropic")
    async with ScriptedServer(refusal) as server:
        agent = sl.Agent(endpoint(server), "claude-fable-5")
        with pytest.raises(sl.ModelRefusal) as caught:
            await agent.prompt("something the model declines")
    error = caught.value
    assert isinstance(error, sl.RunError)  # the run's stop, with its transcript
    assert isinstance(error, RunModelRefusal)
    assert error.reason == "refusal"
    assert error.category == "cyber"
    assert "violative cyber content" in str(error)
    assert error.messages and error.messages[0].role == "user"


def test_a_server_tools_streamed_input_is_joined_and_nothing_is_skipped() -> None:
    events = AnthropicEvents()
    for payload in recorded_events(WEB_FETCH):
        events.feed(json.loads(payload))
    assert events.skipped == 0
    used = next(block for block in events.content if block["type"] == "server_tool_use")
    assert used["input"] == {"url": FETCHED}
    assert [block["type"] for block in events.content] == [
        "text",
        "server_tool_use",
        "web_fetch_tool_result",
        "text",
    ]


async def test_a_web_fetch_answer_carries_no_notice_of_skipped_events() -> None:
    notices: list[Notice] = []
    async with ScriptedServer(framed(recorded_events(WEB_FETCH), api="anthropic")) as server:
        turn = await run_turn(
            endpoint(server),
            {
                "model": "claude-sonnet-4-20250514",
                "messages": [{"role": "user", "content": "What is it about?"}],
            },
            on_event=lambda e: notices.append(e) if isinstance(e, Notice) else None,
        )
    assert turn.content.startswith("I'll fetch the content from that Wikipedia page")
    assert turn.content.endswith("submerged by rising sea levels.")
    assert turn.tool_calls == []  # Anthropic ran it: no call for the loop to run
    assert [n.text for n in notices] == []


def _paused_then_answered() -> tuple[list[bytes], list[bytes]]:
    """The recorded reply cut where Anthropic's own tool finished: the first request ends there with
    ``pause_turn`` (the closing events written as the Messages docs give them), and the second carries on
    with the recorded answer."""
    payloads = recorded_events(WEB_FETCH)
    cut = next(
        n for n, p in enumerate(payloads) if json.loads(p) == {"type": "content_block_stop", "index": 2}
    )
    pause = [
        b'{"type":"message_delta","delta":{"stop_reason":"pause_turn","stop_sequence":null},'
        b'"usage":{"output_tokens":52}}',
        b'{"type":"message_stop"}',
    ]
    rest = [payloads[0], *payloads[cut + 1 :]]
    return [*payloads[: cut + 1], *pause], rest


async def test_a_paused_turn_is_continued_with_the_server_tools_exact_input() -> None:
    paused, rest = _paused_then_answered()
    async with ScriptedServer(framed(paused, api="anthropic"), framed(rest, api="anthropic")) as server:
        turn = await run_turn(
            endpoint(server),
            {
                "model": "claude-sonnet-4-20250514",
                "messages": [{"role": "user", "content": "What is it about?"}],
            },
        )
        requests = [r.json for r in server.chat_requests]
    assert len(requests) == 2
    continued: list[dict[str, Any]] = requests[1]["messages"][-1]["content"]
    assert requests[1]["messages"][-1]["role"] == "assistant"
    used = next(block for block in continued if block["type"] == "server_tool_use")
    assert used == {
        "type": "server_tool_use",
        "id": "srvtoolu_01VNMRfQny2LCrLKEdYaVcCe",
        "name": "web_fetch",
        "input": {"url": FETCHED},
    }
    result = next(block for block in continued if block["type"] == "web_fetch_tool_result")
    assert result["content"]["url"] == FETCHED
    assert turn.content.endswith("submerged by rising sea levels.")
