"""A TLS endpoint on loopback: both transports trust the certificates the SDK's client trusts, and no others.

The endpoint's certificate is signed by a test authority that only ``SSL_CERT_FILE`` names, so a transport
that read its own idea of the trusted certificates (aiohttp's default reads only OpenSSL's paths) would
answer differently from the other.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import pytest
import trustme

from steadyloop.errors import EndpointUnreachable
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import sse_frame
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import configure_clients, get_chat_client

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def body_of_the_answer() -> bytes:
    return b"".join(sse_frame(chunk) for chunk in text_chunks("trusted")) + sse_frame("data: [DONE]\n\n")


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        body = body_of_the_answer()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
    except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
        pass  # the client refused the certificate
    finally:
        writer.close()


@pytest.fixture
async def tls_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Endpoint]:
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    authority_file = tmp_path / "authority.pem"
    authority.cert_pem.write_to_path(str(authority_file))
    monkeypatch.setenv("SSL_CERT_FILE", str(authority_file))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    server = await asyncio.start_server(_answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Endpoint(f"https://127.0.0.1:{port}/v1")
    finally:
        server.close()
        await server.wait_closed()


async def read_all(endpoint: Endpoint) -> bytes:
    stream = await get_chat_client(endpoint).open_stream(BODY, connect_timeout=5)
    try:
        return b"".join([data async for data in stream.aiter_bytes()])
    finally:
        closing = stream.close()
        if closing is not None:
            await closing


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_endpoint_signed_by_the_named_authority_is_trusted(
    tls_endpoint: Endpoint, transport: Transport
) -> None:
    configure_clients(transport=transport)
    assert await read_all(tls_endpoint) == body_of_the_answer()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_endpoint_signed_by_anyone_else_is_unreachable_and_not_retried(
    tls_endpoint: Endpoint, transport: Transport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stranger = tmp_path / "stranger.pem"
    trustme.CA().cert_pem.write_to_path(str(stranger))
    monkeypatch.setenv("SSL_CERT_FILE", str(stranger))
    configure_clients(transport=transport)
    with pytest.raises(EndpointUnreachable) as caught:
        await read_all(tls_endpoint)
    # Not retried: the same certificate fails the same check however often it is sent.
    assert (caught.value.connection, caught.value.kind) == ("tls", "unreachable")
    assert str(caught.value).startswith("TLS: certificate verify failed for 127.0.0.1:"), str(caught.value)
