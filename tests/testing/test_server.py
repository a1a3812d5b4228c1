"""The scripted server over real loopback sockets: framing, timing, faults, capture replay, recording, CLI."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2 as httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from steadyloop.messages import ToolCall
from steadyloop.testing.chunks import (
    finish_chunk,
    llamacpp_timings,
    reasoning_chunks,
    split_text,
    stream_of,
    text_chunks,
    tool_call_chunks,
    usage_chunk,
)
from steadyloop.testing.replies import (
    BodyReply,
    Reply,
    StreamReply,
    reply_from_json,
    split_events,
    sse_frame,
)
from steadyloop.testing.server import ScriptedServer

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
CHAT = {"model": "m", "messages": MESSAGES, "stream": True}
# Lower bounds are exact (the server must not be early); upper bounds only tell a bounded wait from an
# endless one, so they leave room for a full suite on two shared cores (3 s was once not enough).
SLACK = 30.0


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(autouse=True)
def _uvicorn_stays_quiet() -> Iterator[None]:
    # A scripted fault is not a server error: uvicorn must not log one (it would for an unfinished response).
    # A handler of our own, because caplog only shows the current phase and the server stops in teardown.
    collect, logger = _Collect(), logging.getLogger("uvicorn")
    logger.addHandler(collect)
    try:
        yield
    finally:
        logger.removeHandler(collect)
    assert collect.messages == []


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as running:
        yield running


@pytest.fixture
async def http(server: ScriptedServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as client:
        yield client


@pytest.fixture
async def sdk(server: ScriptedServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0) as client:
        yield client


def _data_events(body: bytes) -> list[str]:
    return [
        frame[len(b"data: ") :].strip().decode() for frame in split_events(body) if frame.startswith(b"data:")
    ]


# -- chunk builders (no I/O) ---------------------------------------------------------------------------------


def test_text_chunks_have_llamacpp_shape() -> None:
    chunks = text_chunks("Hello big world")
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    assert [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]] == ["Hello ", "big ", "world"]
    assert chunks[-1]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert text_chunks(["a", "b"], role_opener=False, finish=None) == [
        text_chunks("a", role_opener=False, finish=None)[0],
        text_chunks("b", role_opener=False, finish=None)[0],
    ]


@given(st.text())
def test_split_text_joins_back(text: str) -> None:
    assert "".join(split_text(text)) == text


@given(st.binary(max_size=300))
def test_split_events_joins_back(body: bytes) -> None:
    frames = split_events(body)
    assert b"".join(frames) == body
    assert all(frame.endswith(b"\n\n") for frame in frames[:-1])


def test_tool_call_chunks_styles() -> None:
    openai_style = tool_call_chunks([{"name": "f", "arguments": {"city": "Paris"}}], split_arguments_every=4)
    first = openai_style[1]["choices"][0]["delta"]["tool_calls"][0]
    assert first == {
        "index": 0,
        "id": "call_0",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    fragments = [c["choices"][0]["delta"]["tool_calls"][0] for c in openai_style[2:-1]]
    assert all(set(f) == {"index", "function"} for f in fragments)
    assert "".join(f["function"]["arguments"] for f in fragments) == '{"city": "Paris"}'
    assert all(len(f["function"]["arguments"]) <= 4 for f in fragments)
    assert openai_style[-1]["choices"][0]["finish_reason"] == "tool_calls"

    call = ToolCall(id="abc", name="g", arguments={}, raw_arguments='{"x":1}')
    llama = tool_call_chunks([call, {"name": "h", "arguments": "{}"}], style="llamacpp", role_opener=False)
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in llama[:-1]]
    assert deltas == [
        {"index": 0, "id": "abc", "type": "function", "function": {"name": "g", "arguments": "{"}},
        {"index": 0, "function": {"arguments": '"x":1}'}},
        {"index": 1, "id": "call_1", "type": "function", "function": {"name": "h", "arguments": "{"}},
        {"index": 1, "function": {"arguments": "}"}},
    ]


def test_stream_of_orders_parts_and_usage() -> None:
    usage = usage_chunk(34, 10, cached=17, reasoning=3, timings=llamacpp_timings(17, 10, cache_n=17))
    chunks = stream_of(text="ok", reasoning="hmm", tool_calls=[{"name": "f"}], usage=usage)
    deltas = [c["choices"][0]["delta"] if c["choices"] else None for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": None}
    assert deltas[1] == {"reasoning_content": "hmm"}
    assert deltas[2] == {"content": "ok"}
    assert deltas[3]["tool_calls"][0]["function"]["name"] == "f"
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {
        "completion_tokens": 10,
        "prompt_tokens": 34,
        "total_tokens": 44,
        "prompt_tokens_details": {"cached_tokens": 17},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    timings = chunks[-1]["timings"]
    assert timings["cache_n"] == 17
    assert timings["predicted_per_second"] == pytest.approx(100.0)
    assert reasoning_chunks("x", field="reasoning")[1]["choices"][0]["delta"] == {"reasoning": "x"}
    assert finish_chunk("length", timings={"prompt_n": 1})["timings"] == {"prompt_n": 1}


def test_stream_plan_coalesces_and_places_faults() -> None:
    frames = [sse_frame(c) for c in text_chunks("a b")]
    assert Reply.stream(text_chunks("a b")).plan == (b"".join(frames) + b"data: [DONE]\n\n",)
    cut = Reply.stream(text_chunks("a b"), delay=0.5, disconnect_after=2)
    assert [type(step).__name__ for step in cut.plan] == ["bytes", "Wait", "bytes", "Drop"]
    assert (
        dataclasses.replace(cut, disconnect_after=None, delay=0).plan == Reply.stream(text_chunks("a b")).plan
    )
    with pytest.raises(ValueError, match="outside"):
        Reply.stream(text_chunks("a b"), disconnect_after=99)


# -- streams over the socket ---------------------------------------------------------------------------------


async def test_stream_framing_is_sse(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    chunks = [*text_chunks("Hi there"), ": a comment\n\n"]
    server.enqueue(Reply.stream(chunks, headers={"X-Extra": "1"}))
    response = await http.post("/chat/completions", json=CHAT)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["x-extra"] == "1"
    assert response.headers["transfer-encoding"] == "chunked"
    assert response.content == b"".join(sse_frame(c) for c in chunks) + b"data: [DONE]\n\n"
    assert _data_events(response.content)[-1] == "[DONE]"
    no_done = Reply.stream(text_chunks("x"), done=False)
    server.enqueue(no_done)
    assert b"[DONE]" not in (await http.post("/chat/completions", json=CHAT)).content


async def test_sdk_reads_text_tool_calls_and_usage(server: ScriptedServer, sdk: AsyncOpenAI) -> None:
    usage = usage_chunk(5, 7, cached=2)
    calls = [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "c1"}]
    server.enqueue(Reply.stream(stream_of(text="Let me check.", tool_calls=calls, usage=usage)))
    stream = await sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    text, arguments, names, finish, got_usage = "", "", [], None, None
    async for chunk in stream:
        if chunk.usage:
            got_usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                assert call.function is not None
                names += [call.function.name] if call.function.name else []
                arguments += call.function.arguments or ""
    assert (text, names, json.loads(arguments), finish) == (
        "Let me check.",
        ["get_weather"],
        {"city": "Paris"},
        "tool_calls",
    )
    assert got_usage is not None and got_usage.prompt_tokens_details is not None
    assert got_usage.prompt_tokens_details.cached_tokens == 2


async def test_delays_are_honoured(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    server.enqueue(Reply.stream(text_chunks(["a", "b", "c"], role_opener=False, finish=None), delay=0.15))
    arrivals: list[float] = []
    start = time.monotonic()
    async with http.stream("POST", "/chat/completions", json=CHAT) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic() - start)
    assert len(arrivals) == 4  # three chunks and [DONE]
    assert arrivals[2] >= 0.3
    assert arrivals[-1] < 0.3 + SLACK


async def test_first_delay_sends_headers_first(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    server.enqueue(Reply.stream(text_chunks("x"), first_delay=0.4))
    start = time.monotonic()
    async with http.stream("POST", "/chat/completions", json=CHAT) as response:
        headers_at = time.monotonic() - start
        first = await anext(response.aiter_lines())
        first_at = time.monotonic() - start
    assert first.startswith("data:")
    assert first_at >= 0.4
    # The headers are written before the wait starts, so they beat the first chunk by most of the delay.
    assert headers_at < first_at - 0.2


async def test_headers_delay_holds_the_response(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    server.enqueue(Reply.stream(text_chunks("x"), headers_delay=0.3))
    start = time.monotonic()
    async with http.stream("POST", "/chat/completions", json=CHAT) as response:
        assert time.monotonic() - start >= 0.3
        assert response.status_code == 200


async def test_stall_after_chunks_then_client_times_out(server: ScriptedServer) -> None:
    server.enqueue(Reply.stream(text_chunks("a b c"), stall_after=2), Reply.stream(text_chunks("next")))
    timeout = httpx.Timeout(10, read=0.3)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=timeout) as http:
        lines: list[str] = []
        with pytest.raises(httpx.ReadTimeout):
            async with http.stream("POST", "/chat/completions", json=CHAT) as response:
                async for line in response.aiter_lines():
                    lines += [line] if line else []
        assert len(lines) == 2
        # The stalled exchange does not block the server.
        assert b"next" in (await http.post("/chat/completions", json=CHAT)).content


async def test_stall_for_seconds_sends_keepalives(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    reply = Reply.stream(text_chunks("a b"), stall_after=1, stall_seconds=0.5, keepalive_every=0.1)
    server.enqueue(reply)
    start = time.monotonic()
    body = (await http.post("/chat/completions", json=CHAT)).content
    assert time.monotonic() - start >= 0.5
    keepalives = body.count(b": keep-alive\n\n")
    assert keepalives >= 2  # about 4; fewer only if the loop was starved
    rest = b"".join(reply.frames[1:]) + b"data: [DONE]\n\n"
    assert body == reply.frames[0] + b": keep-alive\n\n" * keepalives + rest


async def test_sdk_ignores_keepalive_comments(server: ScriptedServer, sdk: AsyncOpenAI) -> None:
    server.enqueue(Reply.stream(text_chunks("a b"), first_delay=0.25, keepalive_every=0.05))
    stream = await sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "a b"


async def test_disconnect_mid_stream(
    server: ScriptedServer, http: httpx.AsyncClient, sdk: AsyncOpenAI
) -> None:
    server.enqueue(Reply.stream(text_chunks("a b c d"), disconnect_after=2, delay=0.01))
    lines: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with http.stream("POST", "/chat/completions", json=CHAT) as response:
            async for line in response.aiter_lines():
                lines += [line] if line else []
    assert len(lines) == 2

    server.enqueue(Reply.stream(text_chunks("a b c d"), disconnect_after=3))
    stream = await sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    seen = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            seen.append(chunk)
    assert len(seen) == 3

    server.enqueue(Reply.stream(text_chunks("ok")))
    assert b"ok" in (await http.post("/chat/completions", json=CHAT)).content


async def test_stall_and_drop_before_headers(server: ScriptedServer) -> None:
    server.enqueue(Reply.stall(), Reply.stall(0.3), Reply.drop())
    async with httpx.AsyncClient(base_url=server.base_url, timeout=httpx.Timeout(10, read=0.3)) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.post("/chat/completions", json=CHAT)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
        start = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post("/chat/completions", json=CHAT)
        assert 0.3 <= time.monotonic() - start < 0.3 + SLACK
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post("/chat/completions", json=CHAT)


async def test_error_replies_with_headers(server: ScriptedServer, sdk: AsyncOpenAI) -> None:
    overflow = {"error": {"code": 400, "message": "request exceeds the available context size", "n_ctx": 512}}
    server.enqueue(
        Reply.json(overflow, status=400),
        Reply.json({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "7"}),
        Reply.json({"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}, 503),
    )
    with pytest.raises(openai.BadRequestError) as bad:
        await sdk.chat.completions.create(model="m", messages=MESSAGES)
    assert bad.value.body == overflow["error"]
    with pytest.raises(openai.RateLimitError) as limited:
        await sdk.chat.completions.create(model="m", messages=MESSAGES)
    assert limited.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.InternalServerError) as loading:
        await sdk.chat.completions.create(model="m", messages=MESSAGES)
    assert loading.value.status_code == 503


async def test_raw_reply_is_byte_exact(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    server.enqueue(Reply.raw(b"not json{", 502, [("Content-Type", "text/plain"), ("X-A", "1"), ("X-A", "2")]))
    response = await http.post("/chat/completions", json=CHAT)
    assert (response.status_code, response.content) == (502, b"not json{")
    assert response.headers.get_list("x-a") == ["1", "2"]


@pytest.mark.parametrize(
    "name", ["tools_auto_stream", "chat_stream_usage", "loading_chat_loading", "chat_basic"]
)
async def test_capture_replay_is_byte_exact(
    name: str, server: ScriptedServer, http: httpx.AsyncClient
) -> None:
    captured = (CAPTURES / f"{name}.response.txt").read_bytes()
    head, _, body = captured.partition(b"\r\n\r\n")
    reply = Reply.from_capture(CAPTURES / f"{name}.response.txt")
    server.enqueue(reply)
    response = await http.post("/chat/completions", json=CHAT)
    assert response.content == body
    assert str(response.status_code) == head.split()[1].decode()
    assert response.headers["server"] == "llama.cpp"
    assert response.headers["access-control-allow-origin"] == ""
    if isinstance(reply, StreamReply):
        assert len(reply.frames) > 5 and body.endswith(b"data: [DONE]\n\n")
        assert "keep-alive" not in response.headers
    else:
        assert isinstance(reply, BodyReply)


async def test_capture_replay_with_faults(server: ScriptedServer, sdk: AsyncOpenAI) -> None:
    reply = Reply.from_capture(CAPTURES / "tools_auto_stream.response.txt")
    assert isinstance(reply, StreamReply)
    server.enqueue(dataclasses.replace(reply, disconnect_after=4))
    stream = await sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    seen = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            seen.append(chunk)
    assert len(seen) == 4
    assert seen[1].choices[0].delta.tool_calls is not None


# -- recording, the script, metadata -------------------------------------------------------------------------


async def test_requests_are_recorded(server: ScriptedServer, sdk: AsyncOpenAI) -> None:
    server.enqueue(Reply.stream(text_chunks("x")))
    stream = await sdk.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    async for _ in stream:
        pass
    [request] = server.chat_requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.json["messages"] == MESSAGES
    assert request.json["stream_options"] == {"include_usage": True}
    assert request.header("Authorization") == "Bearer x"
    assert json.loads(request.body) == request.json


async def test_script_runs_out_loudly(server: ScriptedServer, sdk: AsyncOpenAI) -> None:
    server.enqueue(Reply.json({"id": "1"}))
    assert server.pending == 1
    await sdk.chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert server.pending == 0
    with pytest.raises(openai.InternalServerError) as error:
        await sdk.chat.completions.create(model="m", messages=MESSAGES)
    assert "script ran out" in str(error.value)
    assert "#2" in str(error.value)


async def _raw_post(port: int) -> bytes:
    # A bare HTTP/1.1 client: at a thousand connections httpx's own bookkeeping would dominate the test.
    body = json.dumps(CHAT).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}"
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head.encode() + b"\r\n\r\n" + body)
    response = await reader.read()
    writer.close()
    await writer.wait_closed()
    return response


async def test_default_reply_serves_a_thousand_concurrent_streams(server: ScriptedServer) -> None:
    reply = Reply.stream(stream_of(text="word " * 20), delay=0.001)
    server.default_reply = reply
    responses = await asyncio.gather(*(_raw_post(server.port) for _ in range(1000)))
    dechunked = [_dechunk(response.partition(b"\r\n\r\n")[2]) for response in responses]
    assert all(body == b"".join(reply.frames) + b"data: [DONE]\n\n" for body in dechunked)
    assert len(server.chat_requests) == 1000
    assert server.pending == 0


def _dechunk(data: bytes) -> bytes:
    out = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return out
        out, data = out + data[:size], data[size + 2 :]


async def test_metadata_endpoints(server: ScriptedServer, http: httpx.AsyncClient) -> None:
    models = (await http.get("/models")).json()
    assert [m["id"] for m in models["data"]] == ["scripted"]
    root = server.base_url.removesuffix("/v1")
    assert (await http.get(f"{root}/health")).json() == {"status": "ok"}
    assert (await http.get("/health")).json() == {"status": "ok"}
    assert (await http.get(f"{root}/props")).status_code == 404

    server.props = {"default_generation_settings": {"n_ctx": 4096}}
    server.models = ["a", {"id": "b", "meta": {"n_ctx": 8192}}]
    assert (await http.get(f"{root}/props")).json()["default_generation_settings"]["n_ctx"] == 4096
    assert (await http.get("/models")).json()["data"][1]["meta"] == {"n_ctx": 8192}

    loading = Reply.from_capture(CAPTURES / "loading_models_loading.response.txt")
    server.models, server.health = loading, None
    assert (await http.get("/models")).status_code == 503
    assert (await http.get(f"{root}/health")).status_code == 404
    assert (await http.get("/nowhere")).status_code == 404
    assert [r.path for r in server.requests][-2:] == ["/health", "/v1/nowhere"]


def test_port_needs_a_running_server() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = ScriptedServer().base_url


# -- lifecycle -----------------------------------------------------------------------------------------------


async def test_exit_while_requests_are_stalled_is_clean_and_quick() -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        async with ScriptedServer() as server:
            server.enqueue(Reply.stream(text_chunks("a b"), stall_after=1), Reply.stall())
            url = f"{server.base_url}/chat/completions"
            request = http.build_request("POST", url, json=CHAT)
            response = await http.send(request, stream=True)
            lines = response.aiter_lines()
            assert (await anext(lines)).startswith("data:")
            stalled = asyncio.create_task(http.post(url, json=CHAT))
            await server.wait_for_requests(2)
            start = time.monotonic()
        assert time.monotonic() - start < SLACK
        with pytest.raises(httpx.RemoteProtocolError):
            async for _ in lines:
                pass
        await response.aclose()
        with pytest.raises(httpx.RemoteProtocolError):
            await stalled


async def test_wait_for_requests_lets_a_test_act_mid_request(
    server: ScriptedServer, sdk: AsyncOpenAI
) -> None:
    server.enqueue(Reply.stall())
    call = asyncio.create_task(sdk.chat.completions.create(model="m", messages=MESSAGES))
    await server.wait_for_requests(1)
    await server.wait_for_requests(1)  # already reached: returns at once
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


def test_thread_mode_serves_sync_clients() -> None:
    with ScriptedServer.in_thread(Reply.stream(text_chunks("one"))) as server:
        server.enqueue(Reply.json({"ok": True}))
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            assert b"one" in http.post("/chat/completions", json=CHAT).content
            assert http.post("/chat/completions", json={}).json() == {"ok": True}
        assert len(server.chat_requests) == 2
    with pytest.raises(httpx.ConnectError), httpx.Client(timeout=5) as http:
        http.get(f"{server.base_url}/models")


async def test_thread_mode_stops_under_a_stalled_async_client() -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        with ScriptedServer.in_thread(Reply.stream(text_chunks("x"), stall_after=1)) as server:
            request = http.build_request("POST", f"{server.base_url}/chat/completions", json=CHAT)
            response = await http.send(request, stream=True)
            lines = response.aiter_lines()
            assert (await anext(lines)).startswith("data:")
            await server.wait_for_requests(1)
        with pytest.raises(httpx.RemoteProtocolError):
            async for _ in lines:
                pass
        await response.aclose()


# -- script files and the CLI --------------------------------------------------------------------------------


def test_reply_from_json_forms(tmp_path: Path) -> None:
    stream = reply_from_json({"type": "stream", "text": "hi", "delay": 0.1, "disconnect_after": 1})
    assert isinstance(stream, StreamReply) and stream.delay == 0.1 and stream.disconnect_after == 1
    raw = reply_from_json({"type": "stream", "chunks": [{"a": 1}, ": c\n\n"]})
    assert isinstance(raw, StreamReply) and raw.frames == (b'data: {"a":1}\n\n', b": c\n\n")
    assert reply_from_json({"type": "json", "body": {"e": 1}, "status": 429}) == Reply.json({"e": 1}, 429)
    assert reply_from_json({"type": "raw", "body": "x"}) == Reply.raw(b"x")
    assert reply_from_json({"type": "stall", "seconds": None}) == Reply.stall()
    assert reply_from_json({"type": "drop"}) == Reply.drop()
    (tmp_path / "c.txt").write_bytes(b"HTTP/1.1 503 Service Unavailable\r\nA: b\r\n\r\n{}")
    assert reply_from_json({"type": "capture", "path": "c.txt"}, base=tmp_path) == BodyReply(
        b"{}", 503, (("A", "b"),)
    )
    with pytest.raises(ValueError, match="unknown reply type"):
        reply_from_json({"type": "nope"})


def test_cli_serves_a_script_file(tmp_path: Path) -> None:
    script = {
        "replies": [{"type": "stream", "text": "from the CLI"}, {"type": "json", "body": {"n": 2}}],
        "props": {"default_generation_settings": {"n_ctx": 2048}},
    }
    (tmp_path / "script.json").write_text(json.dumps(script))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "steadyloop.testing.server", "--script", str(tmp_path / "script.json")]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    ) as process:
        try:
            assert process.stdout is not None
            base_url = process.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
            with httpx.Client(base_url=base_url, timeout=10) as http:
                events = _data_events(http.post("/chat/completions", json=CHAT).content)
                deltas = [json.loads(event)["choices"][0]["delta"] for event in events[:-1]]
                assert "".join(delta.get("content") or "" for delta in deltas) == "from the CLI"
                assert http.post("/chat/completions", json=CHAT).json() == {"n": 2}
                assert http.get(base_url.removesuffix("/v1") + "/props").json()["default_generation_settings"]
                assert http.post("/chat/completions", json=CHAT).status_code == 500
        finally:
            process.terminate()
            _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr
