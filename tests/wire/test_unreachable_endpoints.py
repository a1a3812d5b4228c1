"""Refused, DNS, TLS and timeout failures on real sockets, each in its own words, the same on both transports.

Each failure is met twice per transport: by a streamed turn (``open_stream``) and by the model listing
(``list_models``, which goes through the SDK's client: on the aiohttp transport that client called every
one of these "Request timed out.").
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Literal

import pytest
import trustme

from steadyloop.errors import EndpointUnreachable
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import configure_clients, get_chat_client
from steadyloop.wire.windows import list_models

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
Way = Literal["stream", "listing"]
WAYS: tuple[Way, ...] = ("stream", "listing")
BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def failure_of(endpoint: Endpoint, transport: Transport, way: Way) -> EndpointUnreachable:
    configure_clients(transport=transport)
    with pytest.raises(EndpointUnreachable) as caught:
        if way == "listing":
            await list_models(endpoint)
        else:
            stream = await get_chat_client(endpoint).open_stream(BODY, connect_timeout=1.0)
            closing = stream.close()
            if closing is not None:
                await closing
    return caught.value


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("way", WAYS)
async def test_a_port_where_nothing_listens(transport: Transport, way: Way) -> None:
    port = closed_port()
    error = await failure_of(Endpoint(f"http://127.0.0.1:{port}/v1"), transport, way)
    assert (error.connection, error.kind, error.port) == ("refused", "unreachable", port)
    assert str(error) == f"nothing listens on 127.0.0.1:{port}: start the server, or check the base URL"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("way", WAYS)
async def test_a_host_name_that_does_not_resolve(transport: Transport, way: Way) -> None:
    # RFC 2606 keeps .invalid from ever resolving; the lookup is all that is tried (no connect).
    error = await failure_of(Endpoint("http://steadyloop-test.invalid/v1"), transport, way)
    assert (error.connection, error.kind, error.host) == ("dns", "unreachable", "steadyloop-test.invalid")
    assert str(error) == "cannot resolve host steadyloop-test.invalid: check the host name in the base URL"


async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # Reads whatever comes and answers nothing, until the client leaves.
    with contextlib.suppress(ConnectionError, ssl.SSLError, OSError):
        while await reader.read(4096):
            pass
    writer.close()


@contextlib.asynccontextmanager
async def serving(context: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    server = await asyncio.start_server(_hold, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("way", WAYS)
async def test_a_certificate_nobody_here_trusts(transport: Transport, way: Way) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    trustme.CA().issue_cert("127.0.0.1").configure_cert(context)  # an authority no trust store names
    async with serving(context) as port:
        error = await failure_of(Endpoint(f"https://127.0.0.1:{port}/v1"), transport, way)
    assert (error.connection, error.kind) == ("tls", "unreachable")
    assert str(error).startswith(f"TLS: certificate verify failed for 127.0.0.1:{port} (")
    assert "SSL_CERT_FILE" in str(error)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_https_to_a_port_that_speaks_plain_http(transport: Transport) -> None:
    async with ScriptedServer(Reply.stream(text_chunks("never read"))) as server:
        url = server.base_url.replace("http://", "https://")
        error = await failure_of(Endpoint(url), transport, "stream")
    assert error.connection == "tls"
    assert "does not speak TLS" in error.problem and "http:// or https://" in str(error)


@contextlib.contextmanager
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops further connection attempts unanswered, so a
    connect hangs until its timeout, as it does behind a firewall that drops packets."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    filling = []
    try:
        for _ in range(3):
            client = socket.socket()
            client.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                client.connect(("127.0.0.1", port))
            filling.append(client)
        yield port
    finally:
        for client in filling:
            client.close()
        listener.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("way", WAYS)
async def test_no_connection_within_the_allowance(transport: Transport, way: Way) -> None:
    with full_backlog() as port:
        error = await failure_of(Endpoint(f"http://127.0.0.1:{port}/v1", request_timeout=1), transport, way)
    assert (error.connection, error.kind) == ("timeout", "transient")
    assert str(error).startswith(f"no connection to 127.0.0.1:{port} within 1 s: check the host and port")


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_that_never_answers_a_listing(transport: Transport) -> None:
    async with serving() as port:
        error = await failure_of(
            Endpoint(f"http://127.0.0.1:{port}/v1", request_timeout=1), transport, "listing"
        )
    assert (error.connection, error.kind) == ("timeout", "transient")
    assert str(error) == f"no answer from 127.0.0.1:{port} within 1 s"


Sending = Callable[[Endpoint], Awaitable[object]]


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
async def test_the_native_wires_say_it_the_same_way(api: Literal["anthropic", "gemini"]) -> None:
    from steadyloop.wire.registry import provider_for

    port = closed_port()
    endpoint = Endpoint(f"http://127.0.0.1:{port}", api_key="k", api=api)
    with pytest.raises(EndpointUnreachable) as caught:
        await provider_for(endpoint).open_turn(
            {"model": "m", "messages": BODY["messages"]}, connect_timeout=1
        )
    assert caught.value.connection == "refused"
    assert str(caught.value).startswith(f"nothing listens on 127.0.0.1:{port}")
