"""More endpoints than the pool holds, all busy at once: no client is closed under a request."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.fault_proxy import FaultProxy
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport import clients
from steadyloop.wire.transport.clients import (
    configure_clients,
    get_chat_client,
    lease_client,
    open_entries,
    pool_size,
)

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
WORDS = [f"w{i} " for i in range(12)]
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("by", ["key", "base_url"])
async def test_busy_endpoints_beyond_the_pool_size_all_finish(transport: Transport, by: str) -> None:
    # Every stream is slow enough that all of them are open together, so each new endpoint evicts one
    # whose stream is still being read. Endpoints differ by key, or by base URL: per-tenant prefixes on
    # a proxy that forwards them all to the same server.
    reply = Reply.stream(text_chunks(WORDS), delay=0.01)
    configure_clients(transport=transport)
    size = clients.client_settings().max_clients
    count = size * 2 + 8
    async with (
        ScriptedServer(default_reply=reply) as server,
        FaultProxy(server.base_url, rate=0.0) as proxy,
    ):
        if by == "key":
            endpoints = [Endpoint(server.base_url, api_key=f"sk-user-{i}") for i in range(count)]
        else:
            endpoints = [Endpoint(proxy.tenant_base_url(f"tenant-{i}")) for i in range(count)]
        turns = await asyncio.wait_for(asyncio.gather(*(run_turn(e, BODY) for e in endpoints)), 60)
    assert [turn.content for turn in turns] == ["".join(WORDS)] * count
    assert pool_size() <= size
    # Every evicted client that was in use has been closed since its stream ended.
    assert open_entries() == pool_size()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_evicted_client_in_use_closes_only_when_its_stream_is_closed(transport: Transport) -> None:
    reply = Reply.stream(text_chunks(["a", "b"]), stall_after=2)  # holds the stream open
    configure_clients(transport=transport, max_clients=1)
    async with ScriptedServer(reply, Reply.stream(text_chunks(["c"]))) as server:
        first, second = Endpoint(server.base_url, api_key="one"), Endpoint(server.base_url, api_key="two")
        stream = await get_chat_client(first).open_stream(BODY, connect_timeout=5)
        pieces = stream.aiter_bytes()
        assert b"data:" in await pieces.__anext__()
        held = clients._entry(first)
        # The second endpoint takes the only place in the pool; the first is in use, so it stays open.
        other = await get_chat_client(second).open_stream(BODY, connect_timeout=5)
        assert b"".join([data async for data in other.aiter_bytes()]).endswith(b"[DONE]\n\n")
        closing = other.close()
        if closing is not None:
            await closing
        assert pool_size() == 1 and open_entries() == 2 and held.chat is not None
        closing = stream.close()
        if closing is not None:
            await closing
        await asyncio.gather(*clients._closing)
        assert open_entries() == 1 and held.chat is None


async def test_a_lease_keeps_the_sdk_client_open_and_a_handle_outlives_eviction() -> None:
    configure_clients(max_clients=1)
    reply = Reply.stream(text_chunks(["ok"]))
    async with ScriptedServer(reply, reply) as server:
        first, second = Endpoint(server.base_url, api_key="one"), Endpoint(server.base_url, api_key="two")
        handle = get_chat_client(first)
        with lease_client(first) as sdk:
            clients.get_client(second)  # evicts the first endpoint, which is leased
            assert open_entries() == 2 and not sdk.is_closed()
            models = await sdk.models.list()
            assert [m.id for m in models.data] == ["scripted"]
        await asyncio.gather(*clients._closing)
        assert open_entries() == 1 and sdk.is_closed()
        # The handle leases whatever entry is live for its endpoint when it sends.
        stream = await handle.open_stream(BODY, connect_timeout=5)
        try:
            assert b"ok" in b"".join([data async for data in stream.aiter_bytes()])
        finally:
            closing = stream.close()
            if closing is not None:
                await closing
