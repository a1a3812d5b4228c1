"""stream_turn against the scripted server on loopback: framing, the watchdog, faults, cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from steadyloop.errors import ContextOverflow, EndpointRefused, EndpointSilent, EndpointUnavailable
from steadyloop.testing.chunks import stream_of, text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import stream_turn
from steadyloop.turn.assembly import Produced
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import get_chat_client

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def turn_from(server: ScriptedServer, **options: object) -> object:
    return await stream_turn(get_chat_client(Endpoint(server.base_url)), BODY, **options)  # type: ignore[arg-type]


async def test_a_plain_stream_with_usage() -> None:
    chunks = stream_of("Hello there", usage=usage_chunk(7, 2, cached=4))
    async with ScriptedServer(Reply.stream(chunks)) as server:
        pieces: list[str] = []
        turn = await stream_turn(
            get_chat_client(Endpoint(server.base_url)), BODY, on_output=pieces.append, include_usage=True
        )
        sent = server.chat_requests[0].json
    assert turn.content == "Hello there" and "".join(pieces) == "Hello there"
    assert (
        turn.usage.prompt_tokens == 7
        and turn.usage.cached_tokens == 4
        and turn.usage.first_token_ms is not None
    )
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_stream_options_are_sent_only_when_asked() -> None:
    async with ScriptedServer(Reply.stream(text_chunks("x"))) as server:
        await turn_from(server)
        assert "stream_options" not in server.chat_requests[0].json


async def test_real_llamacpp_tool_stream_replayed_byte_exact() -> None:
    async with ScriptedServer(Reply.from_capture(CAPTURES / "tools_auto_stream.response.txt")) as server:
        turn = await turn_from(server)
    assert turn.finish_reason == "tool_calls"  # type: ignore[attr-defined]
    (call,) = turn.tool_calls  # type: ignore[attr-defined]
    assert call.name == "get_weather" and isinstance(call.arguments.get("city"), str)


async def test_real_llamacpp_usage_stream_replayed() -> None:
    async with ScriptedServer(Reply.from_capture(CAPTURES / "chat_stream_usage.response.txt")) as server:
        turn = await turn_from(server)
    usage = turn.usage  # type: ignore[attr-defined]
    assert usage.prompt_tokens > 0 and usage.prompt_ms is not None and usage.tokens_per_second is not None


async def test_silence_after_the_first_token_is_endpoint_silent_with_produced_set() -> None:
    reply = Reply.stream(text_chunks(["a", "b", "c"]), stall_after=2)
    async with ScriptedServer(reply) as server:
        box = Produced()
        with pytest.raises(EndpointSilent) as caught:
            await turn_from(server, produced=box, idle_timeout=0.3)
    assert caught.value.produced and box.value


async def test_keepalive_comments_do_not_rearm_the_watchdog() -> None:
    reply = Reply.stream(text_chunks(["a", "b"]), stall_after=2, keepalive_every=0.05)
    async with ScriptedServer(reply) as server:
        with pytest.raises(EndpointSilent):
            await turn_from(server, idle_timeout=0.4)


async def test_the_first_token_gets_its_own_allowance() -> None:
    # Prefill longer than the idle allowance, shorter than the first-token allowance.
    reply = Reply.stream(text_chunks("ok"), first_delay=0.6)
    async with ScriptedServer(reply) as server:
        turn = await turn_from(server, idle_timeout=0.2, first_token_timeout=5.0)
    assert turn.content == "ok"  # type: ignore[attr-defined]


async def test_a_role_opener_does_not_start_the_idle_clock() -> None:
    chunks = text_chunks("ok")
    reply = Reply.stream(chunks, stall_after=1, stall_seconds=0.6)  # opener, then a long prefill
    async with ScriptedServer(reply) as server:
        turn = await turn_from(server, idle_timeout=0.2, first_token_timeout=5.0)
    assert turn.content == "ok"  # type: ignore[attr-defined]


async def test_silence_before_headers_is_endpoint_silent_not_produced() -> None:
    async with ScriptedServer(Reply.stall()) as server:
        with pytest.raises(EndpointSilent) as caught:
            await turn_from(server, idle_timeout=0.1, first_token_timeout=0.3)
    assert not caught.value.produced


async def test_no_timeout_waits_for_a_slow_model() -> None:
    reply = Reply.stream(text_chunks(["a", "b"]), stall_after=1, stall_seconds=0.5)
    async with ScriptedServer(reply) as server:
        turn = await turn_from(server, idle_timeout=None)
    assert turn.content == "ab"  # type: ignore[attr-defined]


async def test_a_dropped_connection_mid_stream_is_unavailable() -> None:
    reply = Reply.stream(text_chunks(["a", "b", "c"]), disconnect_after=2)
    async with ScriptedServer(reply) as server:
        box = Produced()
        with pytest.raises(EndpointUnavailable):
            await turn_from(server, produced=box, idle_timeout=5)
    assert box.value


async def test_a_stream_that_ends_without_finishing_is_unavailable() -> None:
    reply = Reply.stream(text_chunks("a", finish=None), done=False)
    async with ScriptedServer(reply) as server:
        with pytest.raises(EndpointUnavailable):
            await turn_from(server)


async def test_status_errors_are_typed_with_the_servers_words() -> None:
    overflow = {
        "error": {
            "code": 400,
            "message": "request (1219 tokens) exceeds the available context size (512 tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 1219,
            "n_ctx": 512,
        }
    }
    async with ScriptedServer(Reply.json(overflow, status=400)) as server:
        with pytest.raises(ContextOverflow) as caught:
            await turn_from(server)
    assert caught.value.limit == 512 and caught.value.requested == 1219 and caught.value.status == 400
    refused = {
        "error": {"message": "Unrecognized request argument supplied: min_p", "type": "invalid_request_error"}
    }
    async with ScriptedServer(Reply.json(refused, status=400)) as server:
        with pytest.raises(EndpointRefused) as refusal:
            await turn_from(server)
    assert refusal.value.field == "min_p" and "min_p" in (refusal.value.body or "")


async def test_an_error_event_inside_a_200_stream() -> None:
    chunks: list[object] = [
        *text_chunks("part", finish=None),
        {"error": {"message": "Server overloaded", "code": 503}},
    ]
    async with ScriptedServer(Reply.stream(chunks)) as server:  # type: ignore[arg-type]
        with pytest.raises(EndpointUnavailable):
            await turn_from(server)


async def test_cancelling_closes_the_request_at_once() -> None:
    reply = Reply.stream(text_chunks(["a", "b"]), stall_after=2)  # the opener and "a", then nothing
    async with ScriptedServer(reply) as server:
        streaming = asyncio.Event()
        task = asyncio.create_task(turn_from(server, idle_timeout=None, on_output=lambda _t: streaming.set()))
        await streaming.wait()
        task.cancel()
        # The stream stalls for good and no watchdog runs: only the cancellation reaching the request ends
        # the task. The bound tells that from a hang, on however loaded a machine.
        done, _ = await asyncio.wait({task}, timeout=60)
        assert done == {task}, "the cancellation did not reach the request"
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_tool_calls_split_into_many_fragments() -> None:
    calls = [{"id": "c1", "name": "read_file", "arguments": {"path": "/etc/hosts", "lines": 10}}]
    async with ScriptedServer(
        Reply.stream(tool_call_chunks(calls, split_arguments_every=3, style="llamacpp"))
    ) as server:
        turn = await turn_from(server)
    assert turn.tool_calls[0].arguments == {"path": "/etc/hosts", "lines": 10}  # type: ignore[attr-defined]
