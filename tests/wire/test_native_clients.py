"""The native wires keep one client per endpoint in the shared pool: reused across requests, never closed
under a stream, usable again after a cancelled one, and closed with the pool."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport import clients
from steadyloop.wire.transport.clients import aclose_clients, configure_clients

from .provider_doubles import DOUBLES, Double

pytestmark = pytest.mark.timeout(60)
ONCE = RetryPolicy(max_retries=0)


@pytest.fixture(params=["anthropic", "gemini"])
def double(request: pytest.FixtureRequest) -> Double:
    return DOUBLES[request.param]()


def endpoint_for(server: ScriptedServer, double: Double) -> Endpoint:
    base = server.base_url if double.api == "anthropic" else server.base_url.removesuffix("/v1") + "/v1beta"
    return Endpoint(base, "test-key", api=double.api)


def body(double: Double) -> dict[str, Any]:
    return {"model": double.model, "messages": [{"role": "user", "content": "Hi"}]}


def first_text(double: Double) -> int:
    """How many events of the plain answer carry its first text: the stream stalls after them."""
    return 4 if double.api == "anthropic" else 1  # message_start, content_block_start, ping, the text


def natives(endpoint: Endpoint) -> list[Any]:
    return list(clients._entry(endpoint).natives.values())


def closed(native: Any) -> bool:
    inner = native.client
    return bool(inner.is_closed() if callable(inner.is_closed) else inner.is_closed)


async def test_one_client_serves_every_request_and_closes_with_the_pool(double: Double) -> None:
    async with ScriptedServer(double.plain, double.plain, double.plain) as server:
        endpoint = endpoint_for(server, double)
        for _ in range(3):
            turn = await run_turn(endpoint, body(double), policy=ONCE)
            assert turn.content == double.plain_text
        kept = natives(endpoint)
        assert len(kept) == 1
        assert not closed(kept[0])
        await aclose_clients()
    assert closed(kept[0])


async def test_a_cancelled_stream_leaves_the_client_open_for_the_next(double: Double) -> None:
    async with ScriptedServer(double.plain_with(stall_after=first_text(double)), double.plain) as server:
        endpoint = endpoint_for(server, double)
        streaming = asyncio.Event()
        task = asyncio.create_task(
            run_turn(endpoint, body(double), policy=ONCE, on_output=lambda _: streaming.set())
        )
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        kept = natives(endpoint)
        assert len(kept) == 1 and not closed(kept[0])
        assert clients._entry(endpoint).users == 0  # the cancelled stream gave its lease back
        turn = await run_turn(endpoint, body(double), policy=ONCE)
        assert turn.content == double.plain_text
        assert natives(endpoint) == kept


async def test_a_client_evicted_mid_stream_closes_when_the_stream_ends(double: Double) -> None:
    async with ScriptedServer(double.plain_with(stall_after=first_text(double))) as server:
        endpoint = endpoint_for(server, double)
        streaming = asyncio.Event()
        task = asyncio.create_task(
            run_turn(endpoint, body(double), policy=ONCE, on_output=lambda _: streaming.set())
        )
        await streaming.wait()
        kept = natives(endpoint)
        configure_clients(max_clients=1)
        clients._entry(Endpoint("http://127.0.0.1:9/v1"))  # pushes the busy entry out of the pool
        assert not closed(kept[0])  # never under a stream
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await aclose_clients()
    assert closed(kept[0])
