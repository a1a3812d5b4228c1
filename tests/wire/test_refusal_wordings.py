"""A host's refusal of a field, in its own words, is dropped and latched, whichever OpenAI-compatible host
said it (the bodies and their sources are in tests/data/error_bodies, one file per host)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.events import Downgrade
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.failures import classify_failure

pytestmark = pytest.mark.timeout(60)
BODIES = Path(__file__).parent.parent / "data" / "error_bodies"


def _body(host: str, source: str) -> dict[str, Any]:
    return next(row for row in json.loads((BODIES / f"{host}.json").read_text()) if row["source"] == source)


GROQ = _body("groq", "https://github.com/immersive-translate/immersive-translate/issues/3003")


def test_every_host_the_issue_names_has_recorded_refusals() -> None:
    hosts = {path.stem for path in BODIES.glob("*.json")}
    named = {"openai", "groq", "mistral", "together", "fireworks", "deepinfra", "vllm", "sglang"}
    assert named | {"llamacpp", "ollama", "lmstudio"} <= hosts


def test_groqs_words_for_a_sampling_field_name_the_field() -> None:
    # Groq's wording for a refused top-level field (three recordings in groq.json), with top_k in it.
    said = {
        "error": {
            "message": "property 'top_k' is unsupported, did you mean 'top_p'?",
            "type": "invalid_request_error",
        }
    }
    failure = classify_failure(400, said)
    assert (failure.kind, failure.field) == ("refused_field", "top_k")


async def test_a_field_groq_refuses_is_dropped_latched_and_not_sent_again() -> None:
    refused = Reply.json(GROQ["body"], status=GROQ["status"])
    answer = Reply.stream(stream_of("Bonjour."))
    downgrades: list[Downgrade] = []
    async with ScriptedServer(refused, answer, Reply.stream(stream_of("Encore."))) as server:
        params = sl.ModelParams(
            model="qwen/qwen3-32b", extra_body={"chat_template_kwargs": {"enable_thinking": False}}
        )
        agent = sl.Agent(sl.Endpoint(server.base_url), params)
        agent.subscribe(lambda e: downgrades.append(e) if isinstance(e, Downgrade) else None)
        first = await agent.prompt("Translate 'hello'.")
        await agent.prompt("Again.")
        sent = [r.json for r in server.chat_requests]
    assert first.content == "Bonjour."
    assert ["chat_template_kwargs" in body for body in sent] == [True, False, False]
    assert [d.field for d in downgrades] == ["chat_template_kwargs"]
