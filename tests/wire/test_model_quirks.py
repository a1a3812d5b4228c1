"""What a model family is documented to refuse is latched before its first request: OpenAI's reasoning
models are never sent the temperature they refuse (their refusal, recorded, answers any request that
carries one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import steadyloop as sl
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer
from steadyloop.turn.capabilities import model_capabilities_for, reset_capabilities

pytestmark = pytest.mark.timeout(60)
BODIES = Path(__file__).parent.parent / "data" / "error_bodies"
REFUSED = next(
    row
    for row in json.loads((BODIES / "openai.json").read_text())
    if row["source"] == "https://github.com/openai/openai-python/issues/2104"
)


def _as_openai(request: RecordedRequest) -> ScriptedReply:
    """api.openai.com's answer for an o-series model: its recorded refusal when a temperature is sent."""
    body = request.json or {}
    if "temperature" in body:
        return Reply.json(REFUSED["body"], status=400)
    return Reply.stream(stream_of("Paris."))


@pytest.mark.parametrize("model", ["o4-mini", "o3-mini", "o1", "gpt-5", "gpt-5-mini", "openai/o3-mini"])
async def test_a_reasoning_model_is_never_sent_temperature(model: str) -> None:
    async with ScriptedServer(respond=_as_openai) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url), sl.ModelParams(model=model, temperature=0.2, max_tokens=64)
        )
        reply = await agent.prompt("Capital of France?")
        sent = [r.json for r in server.chat_requests]
    assert reply.content == "Paris."
    assert len(sent) == 1, "the first request was refused"
    assert "temperature" not in sent[0]
    assert sent[0]["max_completion_tokens"] == 64


@pytest.mark.parametrize(
    "model", ["gpt-4o", "gpt-4.1-mini", "gpt-5-chat-latest", "qwen2.5-coder", "o3ish", ""]
)
def test_other_models_keep_their_sampling_controls(model: str) -> None:
    from steadyloop.wire.model_quirks import quirk_for

    assert quirk_for(model) is None


def test_a_quirk_is_a_latch_the_caller_can_reset() -> None:
    endpoint = sl.Endpoint("http://127.0.0.1:9/v1")
    assert model_capabilities_for(endpoint, "o4-mini").chosen_temperature is False
    model_capabilities_for(endpoint, "o4-mini").chosen_temperature = True
    assert model_capabilities_for(endpoint, "o4-mini").chosen_temperature is True
    reset_capabilities(endpoint)
    assert model_capabilities_for(endpoint, "o4-mini").chosen_temperature is False
