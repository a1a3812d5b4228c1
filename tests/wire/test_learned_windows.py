"""A hosted model whose window no listing names: an overflow that states the window gives it, and the
run folds and goes on; a table of documented windows fills the gap before the first overflow (the
refusals are recorded bodies from tests/data/error_bodies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.context.keeper import ContextPolicy
from steadyloop.events import ContextCompacted, Notice
from steadyloop.loop import LoopPolicy
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.windows import context_limit_for

pytestmark = pytest.mark.timeout(60)
BODIES = Path(__file__).parent.parent / "data" / "error_bodies"
OVERFLOW = next(
    row
    for row in json.loads((BODIES / "openai.json").read_text())
    if row["source"] == "https://github.com/chathub-dev/chathub/issues/126"
)


async def _summarise(text: str) -> str:
    return "Read logs 0-7; nothing unusual."


def _long_history() -> list[Any]:
    history: list[Any] = [sl.UserMessage(content="Read the logs one by one.")]
    for n in range(8):
        history.append(sl.AssistantMessage(tool_calls=(sl.ToolCall(f"r{n}", "read_log", {"n": n}),)))
        history.append(sl.ToolResultMessage(call_id=f"r{n}", content="x" * 2000, name="read_log"))
        history.append(sl.AssistantMessage(content=f"Noted log {n}."))
        history.append(sl.UserMessage(content=f"Next one please ({n})."))
    return history


async def test_the_window_an_overflow_states_is_kept_and_the_run_folds_and_goes_on() -> None:
    refused = Reply.json(OVERFLOW["body"], status=OVERFLOW["status"])
    policy = LoopPolicy(context=ContextPolicy(summarise=_summarise))
    async with ScriptedServer(refused, Reply.stream(stream_of("All logs read."))) as server:
        endpoint = sl.Endpoint(server.base_url)
        agent = sl.Agent(endpoint, "my-hosted-model", messages=_long_history(), policy=policy)
        events: list[Any] = []
        agent.subscribe(events.append)
        turn = await agent.continue_()
        first, second = (json.dumps(r.json) for r in server.chat_requests)
        later = await context_limit_for(endpoint, "my-hosted-model")
    assert turn.content == "All logs read."
    assert [e for e in events if isinstance(e, ContextCompacted) and e.forced]
    assert any(isinstance(e, Notice) and "4097 tokens" in e.text for e in events)
    assert "nothing unusual" in second and len(second) < len(first)
    assert later == 4097  # the next run sizes to it before sending anything


async def test_without_context_keeping_the_overflow_still_stops_the_run_but_the_window_is_kept() -> None:
    refused = Reply.json(OVERFLOW["body"], status=OVERFLOW["status"])
    async with ScriptedServer(refused) as server:
        endpoint = sl.Endpoint(server.base_url)
        agent = sl.Agent(endpoint, "my-hosted-model", messages=_long_history())
        with pytest.raises(sl.ContextOverflow) as caught:
            await agent.continue_()
        assert caught.value.limit == 4097
        assert await context_limit_for(endpoint, "my-hosted-model") == 4097


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("openai/gpt-4o-mini", 128_000),
        ("gpt-4.1-mini", 1_047_576),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("gpt-5", 400_000),
        ("my-hosted-model", None),
    ],
)
async def test_a_documented_window_fills_the_gap_a_listing_leaves(model: str, window: int | None) -> None:
    async with ScriptedServer() as server:  # its listing names no window, and no model of these
        assert await context_limit_for(sl.Endpoint(server.base_url), model) == window


async def test_the_servers_own_listing_wins_over_the_table() -> None:
    listed = [{"id": "gpt-4o", "object": "model", "owned_by": "proxy", "context_length": 32_768}]
    async with ScriptedServer(models=listed) as server:
        assert await context_limit_for(sl.Endpoint(server.base_url), "gpt-4o") == 32_768
