"""A 200 that is not an event stream: a whole JSON completion is the turn, anything else a typed error.

Both transports, through ``run_turn`` on the scripted server; the sans-I/O sniffing and conversion under
generated input.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import EndpointError, EndpointUnavailable, EndpointUnreadable
from steadyloop.loop import run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import Tool, ToolContext
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import configure_clients
from steadyloop.wire.transport.stream_body import completion_chunks, mask_credentials, sniff

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, loading_poll_s=0.05, loading_timeout_s=5.0)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
KEY = "sk-proj-abcdefghijklmnop1234"


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        **extra,
    }


async def turn_of(transport: Transport, *replies: Any, key: str | None = KEY) -> tuple[Any, ScriptedServer]:
    configure_clients(transport=transport)
    async with ScriptedServer(*replies) as server:
        turn = await run_turn(Endpoint(server.base_url, api_key=key), BODY, policy=FAST)
    return turn, server


async def failure_of(transport: Transport, *replies: Any) -> tuple[EndpointError, ScriptedServer]:
    configure_clients(transport=transport)
    async with ScriptedServer(*replies) as server:
        with pytest.raises(EndpointError) as caught:
            await run_turn(Endpoint(server.base_url, api_key=KEY), BODY, policy=FAST)
    return caught.value, server


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_whole_json_completion_is_read_as_the_turn(transport: Transport) -> None:
    message = {
        "content": "<think>check the date</think>It is Monday.",
        "reasoning_content": "the user asked for the day",
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "clock", "arguments": '{"tz": "UTC"}'}}
        ],
    }
    turn, server = await turn_of(transport, Reply.json(completion(message, "tool_calls")))
    assert len(server.chat_requests) == 1
    assert turn.content == "It is Monday."
    # The reasoning field first, then what the fences took out of the content.
    assert turn.reasoning == "the user asked for the daycheck the date"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("call_a", "clock", {"tz": "UTC"})]
    assert turn.finish_reason == "tool_calls"
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (12, 5)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_completion_reads_the_same_as_its_stream(transport: Transport) -> None:
    streamed, _ = await turn_of(transport, Reply.stream(stream_of("Hello there.", reasoning="hm")))
    whole, _ = await turn_of(
        transport, Reply.json(completion({"content": "Hello there.", "reasoning_content": "hm"}))
    )
    assert (whole.content, whole.reasoning, whole.finish_reason) == (
        streamed.content,
        streamed.reasoning,
        streamed.finish_reason,
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_html_page_is_unreadable_sent_once_and_quoted_without_the_key(transport: Transport) -> None:
    page = (
        "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>"
        f"<p>Request headers: Authorization: Bearer {KEY}</p>" + "x" * 5000 + "</body></html>"
    )
    error, server = await failure_of(transport, Reply.raw(page, 200, {"Content-Type": "text/html"}))
    assert isinstance(error, EndpointUnreadable) and error.kind == "unreadable"
    assert len(server.chat_requests) == 1
    assert error.status == 200 and error.content_type == "text/html"
    assert str(error).startswith('HTTP 200: the URL served a web page, not an API ("502 Bad Gateway")')
    assert "<!DOCTYPE html> <html><head><title>502 Bad Gateway" in (error.body or "")
    assert KEY not in str(error) and KEY not in (error.body or "")
    assert len(str(error)) < 400


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply.json({"object": "list", "data": []}), "JSON that is not a chat completion"),
        (Reply.raw('{"choices": [', 200, {"Content-Type": "application/json"}), "neither one JSON"),
        (Reply.raw("upstream connect error", 200, {"Content-Type": "text/plain"}), "not an event stream"),
    ],
)
async def test_other_bodies_are_unreadable_and_not_retried(
    transport: Transport, reply: Any, why: str
) -> None:
    error, server = await failure_of(transport, reply, Reply.stream(text_chunks("never")))
    assert isinstance(error, EndpointUnreadable) and why in str(error)
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_error_document_with_200_reads_as_the_error_a_stream_would_carry(
    transport: Transport,
) -> None:
    loading = Reply.json({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
    turn, server = await turn_of(transport, loading, Reply.stream(text_chunks("up now")))
    assert turn.content == "up now" and len(server.chat_requests) == 2
    refused, _ = await failure_of(
        transport, Reply.json({"error": {"message": "Invalid API key", "type": "auth", "code": 401}})
    )
    assert not isinstance(refused, EndpointUnreadable | EndpointUnavailable)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_stream_without_its_content_type_is_still_a_stream(transport: Transport) -> None:
    frames = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in text_chunks(["a", "b"]))
    raw = b"\n\n: hello\n\n" + frames + b"data: [DONE]\n\n"
    turn, _ = await turn_of(transport, Reply.raw(raw, 200, {"Content-Type": "application/octet-stream"}))
    assert turn.content == "ab"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_completion_goes_through_tool_call_recovery_like_a_stream(transport: Transport) -> None:
    ran: list[dict[str, Any]] = []

    async def clock(arguments: dict[str, Any], context: ToolContext) -> str:
        ran.append(arguments)
        return "Monday"

    tool = Tool("clock", "what day it is", {"type": "object", "properties": {}}, clock)
    written = '<tool_call>\n{"name": "clock", "arguments": {}}\n</tool_call>'
    configure_clients(transport=transport)
    async with ScriptedServer(
        Reply.json(completion({"content": written})), Reply.json(completion({"content": "Monday."}))
    ) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="what day is it?")],
            tools=[tool],
        )
    assert ran == [{}] and result.turn.content == "Monday."


# -- sans I/O -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "head", "ended", "kind"),
    [
        ("text/event-stream", b"data: {}", False, "stream"),
        ("", b": ping\n\n", False, "stream"),
        ("text/html", b"\xef\xbb\xbf  \n<html>", False, "other"),
        ("application/json", b"\n {", False, "json"),
        ("", b"[1, 2]", False, "json"),
        ("", b"da", False, None),
        ("", b"da", True, "other"),
        ("text/event-stream; charset=utf-8", b"hello", False, "stream"),
        ("text/plain", b"hello", False, "other"),
        ("", b"\n\n", False, None),
        ("", b"", True, "stream"),
    ],
)
def test_sniffing_by_the_first_bytes(content_type: str, head: bytes, ended: bool, kind: str | None) -> None:
    assert sniff(content_type, head, ended=ended) == kind


@given(st.binary(max_size=600), st.sampled_from(["", "text/event-stream", "text/html", "application/json"]))
def test_sniffing_is_total_and_decides_once_ended(head: bytes, content_type: str) -> None:
    assert sniff(content_type, head, ended=True) in ("stream", "json", "other")
    assert sniff(content_type, head, ended=False) in ("stream", "json", "other", None)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=30,
)


@given(_json)
def test_completion_conversion_is_total(document: Any) -> None:
    chunks = completion_chunks(document)
    assert chunks is None or all(isinstance(chunk, dict) for chunk in chunks)


@given(st.dictionaries(st.sampled_from(["content", "reasoning_content", "tool_calls", "refusal"]), _json))
def test_any_message_shape_converts_to_chunks(message: dict[str, Any]) -> None:
    chunks = completion_chunks({"choices": [{"message": message, "finish_reason": "stop"}]})
    assert chunks is not None and chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_credentials_are_masked() -> None:
    text = (
        f"key {KEY} Authorization: Bearer abc.def-123 api_key=hunter22 "
        "https://user:pa55word@host/v1 password: 'opensesame'"
    )
    masked = mask_credentials(text, [KEY])
    for secret in (KEY, "abc.def-123", "hunter22", "pa55word", "opensesame"):
        assert secret not in masked
    assert "https://user:***@host/v1" in masked
