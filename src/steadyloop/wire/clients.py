"""A pooled ``AsyncOpenAI`` client per endpoint, kept for the life of the process.

The pool is an LRU (32 by default): an evicted client costs its connection pool and nothing else, since
the next request through that endpoint builds another. Clients are also kept per event loop, because an
HTTP connection pool belongs to the loop that opened it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import httpx2
from openai import AsyncOpenAI, DefaultAioHttpClient

from ..errors import InvalidInput
from .endpoints import Endpoint, endpoint_key

__all__ = ["ClientSettings", "aclose_clients", "configure_clients", "get_client", "reset_clients"]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The pool's settings in force.

    Attributes:
        max_clients: clients kept before the least recently used is dropped.
        listing_miss_s: seconds a model listing that did not name a model is trusted before asking again.
        transport: the SDK's HTTP transport: ``"httpx2"`` (its default) or ``"aiohttp"`` (its optional
            transport, ``pip install 'steadyloop[aiohttp]'``), which holds up far better under hundreds of
            concurrent streams in one process.
    """

    max_clients: int = 32
    listing_miss_s: float = 30.0
    transport: Literal["httpx2", "aiohttp"] = "httpx2"


_DEFAULTS = ClientSettings()
_settings = _DEFAULTS
_PoolKey = tuple[int, str, float | None]
_pool: OrderedDict[_PoolKey, tuple[weakref.ref[asyncio.AbstractEventLoop], AsyncOpenAI]] = OrderedDict()
_closing: set[asyncio.Task[None]] = set()


def configure_clients(
    *,
    max_clients: int | None = None,
    listing_miss_s: float | None = None,
    transport: Literal["httpx2", "aiohttp"] | None = None,
) -> ClientSettings:
    """Move the pool's defaults for this process; returns every setting in force.

    A value left out, or one that is not a number above zero, keeps what was there. Lowering
    ``max_clients`` below the pool's size evicts down to it at once, least recently used first.
    """
    global _settings
    changes: dict[str, Any] = {}
    if isinstance(max_clients, int) and not isinstance(max_clients, bool) and max_clients > 0:
        changes["max_clients"] = max_clients
    if (
        isinstance(listing_miss_s, int | float)
        and not isinstance(listing_miss_s, bool)
        and listing_miss_s > 0
    ):
        changes["listing_miss_s"] = float(listing_miss_s)
    if transport is not None:
        if transport not in ("httpx2", "aiohttp"):
            raise InvalidInput(f"transport must be 'httpx2' or 'aiohttp', not {transport!r}")
        if transport == "aiohttp" and importlib.util.find_spec("aiohttp") is None:
            raise InvalidInput("the aiohttp transport needs aiohttp: pip install 'steadyloop[aiohttp]'")
        changes["transport"] = transport
    if changes:
        _settings = ClientSettings(**{**_settings_dict(), **changes})
        if "transport" in changes:
            _evict_to(0)  # clients built for the other transport
        _evict_to(_settings.max_clients)
    return _settings


def client_settings() -> ClientSettings:
    """The pool's settings in force."""
    return _settings


def _settings_dict() -> dict[str, Any]:
    return {
        "max_clients": _settings.max_clients,
        "listing_miss_s": _settings.listing_miss_s,
        "transport": _settings.transport,
    }


def pool_size() -> int:
    """How many clients the pool holds now."""
    return len(_pool)


def get_client(endpoint: Endpoint) -> AsyncOpenAI:
    """The pooled client for this endpoint on the running event loop (built on first use).

    The SDK's own retries are off: retrying is ``run_turn``'s job, and two retry layers multiply.
    """
    loop = asyncio.get_running_loop()
    key: _PoolKey = (id(loop), endpoint_key(endpoint), endpoint.request_timeout)
    entry = _pool.get(key)
    if entry is not None and entry[0]() is loop:
        _pool.move_to_end(key)
        return entry[1]
    timeout = (
        httpx2.Timeout(endpoint.request_timeout, connect=min(endpoint.request_timeout, 30.0))
        if endpoint.request_timeout
        else httpx2.Timeout(None, connect=30.0)
    )
    http_client = DefaultAioHttpClient(timeout=timeout) if _settings.transport == "aiohttp" else None
    client = AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.key,
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
    )
    _pool[key] = (weakref.ref(loop), client)
    _pool.move_to_end(key)
    _evict_to(_settings.max_clients)
    return client


async def aclose_clients() -> None:
    """Close and drop every pooled client of the running event loop (call before the loop ends).

    A program that runs one loop for its life need not call it; one that starts and stops loops (tests,
    ``asyncio.run`` per request) should, or the sockets of the finished loop are left for the collector.
    """
    loop = asyncio.get_running_loop()
    for key in [k for k, (ref, _) in _pool.items() if ref() is loop]:
        _, client = _pool.pop(key)
        await client.close()
    if _closing:
        await asyncio.gather(*list(_closing), return_exceptions=True)


def reset_clients() -> None:
    """Drop every pooled client and put the defaults back."""
    global _settings
    _settings = _DEFAULTS
    _evict_to(0)


def _evict_to(size: int) -> None:
    while len(_pool) > size:
        _, (loop_ref, client) = _pool.popitem(last=False)
        _close_soon(loop_ref(), client)


def _close_soon(loop: asyncio.AbstractEventLoop | None, client: AsyncOpenAI) -> None:
    # A client can only be closed on the loop that owns its connections; one whose loop is gone has
    # nothing left open to close.
    if loop is None or loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(client.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
    elif loop.is_running():
        asyncio.run_coroutine_threadsafe(client.close(), loop)
