"""A response schema an endpoint refuses as ``response_format`` is stated in the prompt instead, the
answer checked against it as before: the run, the CLI's ``--output-schema`` and the server's
``output_schema`` fall back the way ``ask_json`` does (the refusals are recorded bodies from
tests/data/error_bodies)."""

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

pytestmark = pytest.mark.timeout(60)
BODIES = Path(__file__).parent / "data" / "error_bodies"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}


def _recorded(host: str, source: str) -> dict[str, Any]:
    return next(row for row in json.loads((BODIES / f"{host}.json").read_text()) if row["source"] == source)


REFUSALS = [
    # ik_llama.cpp: "response_format type must be one of \"text\" or \"json_object\", but got: json_schema"
    _recorded("llamacpp", "https://github.com/ikawrakow/ik_llama.cpp/issues/778"),
    # DeepInfra, through a gateway: "json_object response format is not supported for model: ..."
    _recorded("deepinfra", "https://github.com/truefoundry/models/pull/913"),
    # OpenAI: "Invalid parameter: 'response_format' of type 'json_object' is not supported with this model."
    _recorded("openai", "https://github.com/openai-php/client/issues/259"),
]


@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda r: r["provider"])
async def test_a_refused_response_format_falls_back_to_the_schema_in_the_prompt(
    refusal: dict[str, Any],
) -> None:
    body = refusal["body"]
    refused = (
        Reply.json(body, status=refusal["status"])
        if isinstance(body, dict)
        else Reply.raw(body, status=refusal["status"])
    )
    answered = Reply.stream(stream_of('{"city": "Paris"}'))
    events: list[Any] = []
    async with ScriptedServer(refused, answered) as server:
        result = await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m", response_format=FORMAT),
            messages=[sl.UserMessage(content="Capital of France, as JSON.")],
            system="You answer in JSON.",
            on_event=events.append,
        )
        first, second = (r.json for r in server.chat_requests)
    assert "response_format" in first
    assert "response_format" not in second
    system = second["messages"][0]["content"]
    assert system.startswith("You answer in JSON.")
    assert "Answer with one JSON value matching this JSON Schema" in system
    assert json.dumps(SCHEMA, sort_keys=True) in system
    assert result.output == {"city": "Paris"}
    assert [e.field for e in events if isinstance(e, Downgrade)] == ["response_format"]


async def test_an_answer_off_the_stated_schema_is_sent_back_once_to_be_fixed() -> None:
    refusal = REFUSALS[0]
    refused = Reply.json(refusal["body"], status=refusal["status"])
    async with ScriptedServer(
        refused, Reply.stream(stream_of("Paris, of course.")), Reply.stream(stream_of('{"city": "Paris"}'))
    ) as server:
        result = await sl.run_agent_loop(
            sl.Endpoint(server.base_url),
            sl.ModelParams(model="m", response_format=FORMAT),
            messages=[sl.UserMessage(content="Capital of France, as JSON.")],
        )
        sent = [r.json for r in server.chat_requests]
    assert result.output == {"city": "Paris"}
    assert len(sent) == 3
    assert all("response_format" not in body for body in sent[1:])
    assert "Answer with one JSON value" in sent[2]["messages"][0]["content"]
