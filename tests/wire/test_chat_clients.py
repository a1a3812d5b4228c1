"""Both transports on the same scripted server: what they send, and the same errors for the same replies."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest

from steadyloop.errors import (
    ContextOverflow,
    EndpointError,
    EndpointRefused,
    EndpointUnavailable,
    EndpointUnreachable,
    InvalidInput,
)
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport import clients
from steadyloop.wire.transport.aiohttp_chat import AiohttpChatClient
from steadyloop.wire.transport.chat_client import ChatClient
from steadyloop.wire.transport.clients import aclose_clients, configure_clients, get_chat_client, pool_size
from steadyloop.wire.transport.sdk_chat import SdkChatClient

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hé ✓"}]}


def client_for(server: ScriptedServer, transport: Transport, key: str | None = "sk-test") -> ChatClient:
    configure_clients(transport=transport)
    return get_chat_client(Endpoint(server.base_url, api_key=key))


async def read_all(client: ChatClient) -> bytes:
    stream = await client.open_stream(BODY, connect_timeout=5)
    try:
        return b"".join([data async for data in stream.aiter_bytes()])
    finally:
        closing = stream.close()
        if closing is not None:
            await closing


async def failure_of(client: ChatClient) -> EndpointError:
    with pytest.raises(EndpointError) as caught:
        await read_all(client)
    return caught.value


def summary(error: EndpointError) -> tuple[Any, ...]:
    return (type(error), str(error), error.status, error.kind, error.body, error.retry_after, error.field)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_request_carries_the_key_the_body_and_asks_for_events(transport: Transport) -> None:
    async with ScriptedServer(Reply.stream(text_chunks("ok"))) as server:
        body = await read_all(client_for(server, transport))
        request = server.chat_requests[0]
    headers = dict(request.headers)
    assert request.path == "/v1/chat/completions" and request.method == "POST"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"].startswith("application/json")
    assert request.json == BODY
    assert body.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_no_key_sends_the_placeholder_bearer(transport: Transport) -> None:
    async with ScriptedServer(Reply.stream(text_chunks("ok"))) as server:
        await read_all(client_for(server, transport, key=None))
        assert dict(server.chat_requests[0].headers)["authorization"] == "Bearer no-key"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_credentials_in_the_url_go_as_basic_auth_in_place_of_the_key(transport: Transport) -> None:
    async with ScriptedServer(Reply.stream(text_chunks("ok"))) as server:
        configure_clients(transport=transport)
        url = server.base_url.replace("http://", "http://bob:s%40cret@")
        body = await read_all(get_chat_client(Endpoint(url, api_key="sk-test")))
        request = server.chat_requests[0]
    assert dict(request.headers)["authorization"] == "Basic " + base64.b64encode(b"bob:s@cret").decode()
    assert request.path == "/v1/chat/completions" and body.endswith(b"data: [DONE]\n\n")


async def test_both_transports_raise_the_same_errors_for_the_same_refusals() -> None:
    overflow = {
        "error": {
            "code": 400,
            "message": "request (1219 tokens) exceeds the available context size (512 tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 1219,
            "n_ctx": 512,
        }
    }
    replies = [
        Reply.json(overflow, status=400),
        Reply.json(
            {"error": {"message": "Rate limit reached", "type": "requests"}}, 429, {"Retry-After": "3"}
        ),
        Reply.json({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}, 503),
        Reply.json({"error": {"message": "Unrecognized request argument supplied: min_p"}}, 400),
        Reply.raw("<html>Bad Gateway</html>", 502),
    ]
    seen: dict[Transport, list[tuple[Any, ...]]] = {}
    for transport in TRANSPORTS:
        async with ScriptedServer(*replies) as server:
            client = client_for(server, transport)
            seen[transport] = [summary(await failure_of(client)) for _ in replies]
        await aclose_clients()
    assert seen["httpx2"] == seen["aiohttp"]
    kinds = [(row[0], row[3]) for row in seen["aiohttp"]]
    assert kinds[0] == (ContextOverflow, "context_overflow")
    assert kinds[1] == (EndpointUnavailable, "rate_limited") and seen["aiohttp"][1][5] == 3
    assert kinds[2] == (EndpointUnavailable, "model_loading")
    assert kinds[3][0] is EndpointRefused and seen["aiohttp"][3][6] == "min_p"
    assert kinds[4] == (EndpointUnavailable, "transient") and seen["aiohttp"][4][2] == 502


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_closed_port_is_unreachable_and_says_nothing_listens(transport: Transport) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    configure_clients(transport=transport)
    client = get_chat_client(Endpoint(f"http://127.0.0.1:{port}/v1"))
    error = await failure_of(client)
    assert isinstance(error, EndpointUnreachable) and error.kind == "unreachable"
    assert (error.connection, error.host, error.port) == ("refused", "127.0.0.1", port)
    assert str(error).startswith(f"nothing listens on 127.0.0.1:{port}: start the server")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connection_dropped_mid_body_is_unavailable(transport: Transport) -> None:
    reply = Reply.stream(text_chunks(["a", "b", "c"]), disconnect_after=2)
    async with ScriptedServer(reply) as server:
        error = await failure_of(client_for(server, transport))
    assert isinstance(error, EndpointUnavailable) and error.kind == "transient"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_closing_an_unfinished_stream_drops_its_connection(transport: Transport) -> None:
    reply = Reply.stream(text_chunks(["a", "b"]), stall_after=1)  # then nothing, until the client leaves
    async with ScriptedServer(reply) as server:
        stream = await client_for(server, transport).open_stream(BODY, connect_timeout=5)
        pieces: AsyncIterator[bytes] = stream.aiter_bytes()
        assert await pieces.__anext__()
        closing = stream.close()
        if closing is not None:
            await asyncio.wait_for(closing, 1.0)
        # The server sees the client leave; a stalled reply would otherwise hold its slot forever.
        for _ in range(100):
            if server.disconnects:
                break
            await asyncio.sleep(0.02)
        assert server.disconnects >= 1


async def test_the_transport_setting_picks_the_client_and_aclose_releases_it() -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1")

    def pooled() -> ChatClient:
        return clients._entry(endpoint).chat_client()

    configure_clients(transport="httpx2")
    assert isinstance(pooled(), SdkChatClient)
    configure_clients(transport="aiohttp")
    chat = pooled()
    assert isinstance(chat, AiohttpChatClient) and pooled() is chat
    assert pool_size() == 1
    await aclose_clients()
    assert pool_size() == 0 and pooled() is not chat


async def test_streamed_turns_go_through_aiohttp_unless_told_otherwise() -> None:
    clients.reset_clients()  # the process's defaults, whatever transport this test run was asked for
    assert clients.client_settings().transport == "aiohttp"
    async with ScriptedServer(Reply.stream(text_chunks("ok"))) as server:
        endpoint = Endpoint(server.base_url, api_key="sk-test")
        body = await read_all(get_chat_client(endpoint))
        assert isinstance(clients._entry(endpoint).chat_client(), AiohttpChatClient)
        assert dict(server.chat_requests[0].headers)["user-agent"].startswith("steadyloop/")
    assert body.endswith(b"data: [DONE]\n\n")


async def test_a_body_that_is_not_json_is_invalid_input() -> None:
    configure_clients(transport="aiohttp")
    client = get_chat_client(Endpoint("http://127.0.0.1:9/v1"))
    with pytest.raises(InvalidInput, match="JSON"):
        await client.open_stream({"model": "m", "messages": [{"content": object()}]}, connect_timeout=1)


def test_bodies_are_compact_json_either_way() -> None:
    from steadyloop.wire.transport import json_codec

    assert json.loads(json_codec.dumps(BODY)) == BODY


def test_proxies_come_from_the_environment_with_their_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from steadyloop.wire.transport.aiohttp_chat import _env_proxy

    for name in (
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    assert _env_proxy("https://api.example.com/v1/chat/completions") == (None, None)
    monkeypatch.setenv("HTTPS_PROXY", "http://ann:s3cret@proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.corp.example")
    proxy, headers = _env_proxy("https://api.example.com/v1/chat/completions")
    assert proxy == "http://proxy.internal:3128"
    assert headers == {"Proxy-Authorization": "Basic " + base64.b64encode(b"ann:s3cret").decode()}
    assert _env_proxy("https://llm.corp.example/v1/chat/completions") == (None, None)
    assert _env_proxy("http://api.example.com/v1/chat/completions") == (None, None)  # no HTTP_PROXY set


async def test_a_request_goes_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The scripted server stands in for a forward proxy: it receives the request meant for the upstream.
    async with ScriptedServer(Reply.stream(text_chunks("via proxy"))) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        configure_clients(transport="aiohttp")
        client = get_chat_client(Endpoint("http://upstream.invalid/v1"))
        body = await read_all(client)
        request = proxy.chat_requests[0]
    assert b"proxy" in body
    assert dict(request.headers)["host"] == "upstream.invalid"
