"""A kept-alive connection the server closed while it sat in the pool is not a failure the person sees.

llama-server drops idle keep-alive connections after a few seconds; a request that lands on one meets a
closed socket before any answer. The aiohttp transport sends it again at once on a fresh connection.
"""

from __future__ import annotations

import asyncio

import pytest

from steadyloop.wire.aiohttp_chat import AiohttpChatClient
from steadyloop.wire.endpoints import Endpoint

pytestmark = pytest.mark.timeout(30)

_BODY = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\n"
    b"Content-Length: " + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY
)


class _DropsKeptConnections:
    """Answers the first request on each connection, then closes it when a second one arrives."""

    def __init__(self) -> None:
        self.connections = 0
        self.answered = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                if served:
                    return  # the keep-alive timeout fired as this request arrived: closed, unanswered
                writer.write(_ANSWER)
                await writer.drain()
                served += 1
                self.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


async def _read_all(client: AiohttpChatClient) -> bytes:
    stream = await client.open_stream({"model": "m", "messages": []}, connect_timeout=5)
    try:
        return b"".join([chunk async for chunk in stream.aiter_bytes()])
    finally:
        closing = stream.close()
        if closing is not None:
            await closing


async def test_a_request_on_a_connection_the_server_closed_goes_again_on_a_fresh_one() -> None:
    handler = _DropsKeptConnections()
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = AiohttpChatClient(Endpoint(f"http://127.0.0.1:{port}/v1"))
    try:
        for _ in range(3):
            assert b"[DONE]" in await _read_all(client)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert handler.answered == 3
    assert handler.connections >= 3  # every request after the first met a closed one and went again


async def test_a_server_that_is_not_there_is_not_sent_to_again_silently() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    client = AiohttpChatClient(Endpoint(f"http://127.0.0.1:{port}/v1"))
    try:
        from steadyloop.errors import EndpointUnavailable

        with pytest.raises(EndpointUnavailable):
            await client.open_stream({"model": "m", "messages": []}, connect_timeout=5)
    finally:
        await client.aclose()
