"""Side tasks never fail the run: ask and ask_json against the scripted server."""

from __future__ import annotations

from steadyloop.events import Event, Notice
from steadyloop.messages import ImagePart, TextPart
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capabilities import capabilities_for, model_capabilities_for
from steadyloop.turn.side_tasks import ask, ask_json, read_json
from steadyloop.wire.endpoints import Endpoint

SCHEMA = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": {"type": "string"}}},
    "required": ["tools"],
}
QUICK = RetryPolicy(max_retries=0)


async def test_ask_takes_thinking_out_and_returns_none_on_failure_with_a_notice() -> None:
    async with ScriptedServer(
        Reply.stream(text_chunks("<thinking>hm</thinking>Forty-two.")),
        Reply.json({"error": {"message": "boom"}}, 500),
    ) as server:
        endpoint = Endpoint(server.base_url)
        assert await ask(endpoint, "m", "Be brief.", "The answer?") == "Forty-two."
        events: list[Event] = []
        assert await ask(endpoint, "m", "Be brief.", "Again?", policy=QUICK, on_event=events.append) is None
    assert any(isinstance(e, Notice) and "side task failed" in e.text for e in events)


async def test_ask_json_sends_the_schema_as_response_format_and_in_the_prompt() -> None:
    async with ScriptedServer(Reply.stream(text_chunks('Sure: {"tools": ["read_file"]}'))) as server:
        value = await ask_json(
            Endpoint(server.base_url), "m", "Pick tools.", "Read a file", SCHEMA, name="preselection"
        )
        sent = server.chat_requests[0].json
    assert value == {"tools": ["read_file"]}
    assert (
        sent["response_format"]["type"] == "json_schema"
        and sent["response_format"]["json_schema"]["strict"] is True
    )
    assert sent["response_format"]["json_schema"]["name"] == "preselection"
    assert '"tools"' in sent["messages"][0]["content"]


async def test_a_server_that_cannot_build_the_grammar_gets_the_relaxed_schema() -> None:
    grammar = Reply.json({"error": {"message": "JSON schema conversion failed: Unrecognized schema"}}, 400)
    async with ScriptedServer(grammar, Reply.stream(text_chunks('{"tools": []}'))) as server:
        value = await ask_json(Endpoint(server.base_url), "m", "Pick.", "x", SCHEMA)
        second = server.chat_requests[1].json
    assert value == {"tools": []} and second["response_format"]["json_schema"]["strict"] is False
    assert capabilities_for(Endpoint(server.base_url)).strict_schemas is False


async def test_a_model_that_refuses_response_format_is_asked_in_words() -> None:
    refusal = Reply.json({"error": {"message": "Unknown parameter: 'response_format'."}}, 400)
    async with ScriptedServer(refusal, Reply.stream(text_chunks('```json\n{"tools": ["x"]}\n```'))) as server:
        endpoint = Endpoint(server.base_url)
        value = await ask_json(endpoint, "m", "Pick.", "x", SCHEMA)
        assert "response_format" not in server.chat_requests[1].json
    assert value == {"tools": ["x"]} and model_capabilities_for(endpoint, "m").structured_output is False


async def test_no_json_is_none_and_images_reach_the_server_as_parts() -> None:
    async with ScriptedServer(Reply.stream(text_chunks("I cannot say."))) as server:
        user = [TextPart("What is this?"), ImagePart.from_bytes(b"img")]
        assert await ask_json(Endpoint(server.base_url), "m", "Describe.", user, SCHEMA) is None
        content = server.chat_requests[0].json["messages"][1]["content"]
    assert content[1]["type"] == "image_url"


def test_read_json_is_lenient() -> None:
    assert read_json('<think>x</think>\n{"a": 1,}') == {"a": 1}
    assert read_json("[1, 2]") == [1, 2]
    assert read_json("no json here") is None


async def test_side_tasks_ask_at_temperature_zero_unless_told_or_refused() -> None:
    refused = Reply.json({"error": {"message": "Unsupported parameter: 'temperature'"}}, 400)
    async with ScriptedServer(
        Reply.stream(text_chunks("Yes.")),
        Reply.stream(text_chunks('{"tools": []}')),
        Reply.stream(text_chunks("Warm.")),
        refused,
        Reply.stream(text_chunks("No.")),
    ) as server:
        endpoint = Endpoint(server.base_url)
        await ask(endpoint, "m", "Be brief.", "Yes?")
        await ask_json(endpoint, "m", "Pick tools.", "None", SCHEMA)
        await ask(endpoint, "m", "Be brief.", "Warm?", temperature=0.7)
        await ask(endpoint, "o", "Be brief.", "No?", policy=QUICK)
        sent = [r.json for r in server.chat_requests]
    assert [b.get("temperature") for b in sent] == [0, 0, 0.7, 0, None]
    assert not model_capabilities_for(endpoint, "o").chosen_temperature
