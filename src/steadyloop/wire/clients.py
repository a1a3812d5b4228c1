"""Pooled clients per endpoint, kept for the life of the process.

Each endpoint has an ``AsyncOpenAI`` client (listings and other plain calls) and a ``ChatClient`` for its
streamed turns: the same SDK client over httpx2 by default, or a direct aiohttp session with
``configure_clients(transport="aiohttp")``. The pool is an LRU (32 by default): an evicted entry costs
its connection pools and nothing else, since the next request through that endpoint builds another.
Entries are also kept per event loop, because an HTTP connection pool belongs to the loop that opened it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidInput
from .chat_client import ChatClient
from .endpoints import Endpoint, endpoint_key

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "ClientSettings",
    "aclose_clients",
    "configure_clients",
    "get_chat_client",
    "get_client",
    "reset_clients",
]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The pool's settings in force.

    Attributes:
        max_clients: clients kept before the least recently used is dropped.
        listing_miss_s: seconds a model listing that did not name a model is trusted before asking again.
        transport: how requests are sent: ``"httpx2"`` (the SDK's default) or ``"aiohttp"``
            (``pip install 'steadyloop[fast]'``): streamed turns go straight through aiohttp and everything
            else through the SDK's aiohttp transport, which holds up far better under hundreds of
            concurrent streams in one process.
    """

    max_clients: int = 32
    listing_miss_s: float = 30.0
    transport: Literal["httpx2", "aiohttp"] = "httpx2"


_DEFAULTS = ClientSettings()
_settings = _DEFAULTS
_PoolKey = tuple[int, str, float | None]


class _Entry:
    """One endpoint's clients on one event loop, each built on first use.

    The SDK client is not built until something asks for it: with the aiohttp transport a process that
    only streams turns never needs it, and building one loads the system's certificates.
    """

    __slots__ = ("_sdk", "chat", "endpoint", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, endpoint: Endpoint) -> None:
        self.loop = weakref.ref(loop)
        self.endpoint = endpoint
        self._sdk: AsyncOpenAI | None = None
        self.chat: ChatClient | None = None

    @property
    def sdk(self) -> AsyncOpenAI:
        if self._sdk is None:
            self._sdk = _sdk_client(self.endpoint)
        return self._sdk

    async def aclose(self) -> None:
        chat, self.chat = self.chat, None
        sdk, self._sdk = self._sdk, None
        if chat is not None:
            await chat.aclose()
        if sdk is not None:
            await sdk.close()


_pool: OrderedDict[_PoolKey, _Entry] = OrderedDict()
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
    """The pooled SDK client for this endpoint on the running event loop (built on first use).

    The SDK's own retries are off: retrying is ``run_turn``'s job, and two retry layers multiply.
    """
    return _entry(endpoint).sdk


def get_chat_client(endpoint: Endpoint) -> ChatClient:
    """The pooled client that sends this endpoint's streamed turns, by the transport in force."""
    entry = _entry(endpoint)
    chat = entry.chat
    if chat is None:
        if _settings.transport == "aiohttp":
            from .aiohttp_chat import AiohttpChatClient

            chat = AiohttpChatClient(endpoint)
        else:
            from .sdk_chat import SdkChatClient

            chat = SdkChatClient(entry.sdk)
        entry.chat = chat
    return chat


def _entry(endpoint: Endpoint) -> _Entry:
    loop = asyncio.get_running_loop()
    key: _PoolKey = (id(loop), endpoint_key(endpoint), endpoint.request_timeout)
    entry = _pool.get(key)
    if entry is not None and entry.loop() is loop:
        _pool.move_to_end(key)
        return entry
    entry = _pool[key] = _Entry(loop, endpoint)
    _pool.move_to_end(key)
    _evict_to(_settings.max_clients)
    return entry


def _sdk_client(endpoint: Endpoint) -> AsyncOpenAI:
    # Imported here: the SDK takes about a third of a second to load, and a process that streams over
    # the aiohttp transport never needs it.
    import httpx2
    from openai import AsyncOpenAI, DefaultAioHttpClient

    timeout = (
        httpx2.Timeout(endpoint.request_timeout, connect=min(endpoint.request_timeout, 30.0))
        if endpoint.request_timeout
        else httpx2.Timeout(None, connect=30.0)
    )
    http_client = DefaultAioHttpClient(timeout=timeout) if _settings.transport == "aiohttp" else None
    return AsyncOpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.key,
        timeout=timeout,
        max_retries=0,
        http_client=http_client,
    )


async def aclose_clients() -> None:
    """Close and drop every pooled client of the running event loop (call before the loop ends).

    A program that runs one loop for its life need not call it; one that starts and stops loops (tests,
    ``asyncio.run`` per request) should, or the sockets of the finished loop are left for the collector.
    """
    loop = asyncio.get_running_loop()
    for key in [k for k, entry in _pool.items() if entry.loop() is loop]:
        await _pool.pop(key).aclose()
    if _closing:
        await asyncio.gather(*list(_closing), return_exceptions=True)


def reset_clients() -> None:
    """Drop every pooled client and put the defaults back."""
    global _settings
    _settings = _DEFAULTS
    _evict_to(0)


def _evict_to(size: int) -> None:
    while len(_pool) > size:
        _, entry = _pool.popitem(last=False)
        _close_soon(entry)


def _close_soon(entry: _Entry) -> None:
    # A client can only be closed on the loop that owns its connections; one whose loop is gone has
    # nothing left open to close.
    loop = entry.loop()
    if loop is None or loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(entry.aclose())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
    elif loop.is_running():
        asyncio.run_coroutine_threadsafe(entry.aclose(), loop)
