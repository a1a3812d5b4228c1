"""Pooled clients per endpoint, kept for the life of the process.

Each endpoint has an ``AsyncOpenAI`` client (listings and other plain calls) and a ``ChatClient`` for its
streamed turns: by default a direct aiohttp session for the turns and the SDK over its aiohttp transport
for the rest, or, with ``configure_clients(transport="httpx2")``, the SDK over httpx2 for both. Entries are
kept per event loop, because an HTTP connection pool belongs to the loop that opened it.

The pool keeps at most ``max_clients`` entries (32 by default), dropping the least recently used idle one
first. A client is never closed under a request: every streamed request holds a lease on its entry from the
moment it is sent until its stream is closed, and an entry evicted while leased is closed only when its last
lease goes. A process with more endpoints than the pool holds (per-user keys, per-tenant base URLs) therefore
opens more clients than ``max_clients`` while they are all busy, and drops back to it as they go idle.

``get_chat_client`` hands out a handle rather than the transport's client: each request through it leases
whatever entry is live for the endpoint at that moment, so a handle kept across an eviction keeps working.
``get_client`` hands out the SDK client itself, unleased; hold ``lease_client`` around calls that must not
be cut. The native wires (Anthropic, Gemini) keep their own clients in the same entries (``lease_native``),
so they are reused, evicted and closed like the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

from ...errors import InvalidInput, SteadyloopError
from ..endpoints import Endpoint, endpoint_key
from .chat_client import ChatClient, ChatStream
from .environment import check_environment

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from ..interceptors import ResponseInterceptor

__all__ = [
    "ClientSettings",
    "aclose_clients",
    "chat_client_for",
    "configure_clients",
    "get_chat_client",
    "get_client",
    "lease_client",
    "lease_native",
    "reset_clients",
]


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """The pool's settings in force.

    Attributes:
        max_clients: entries kept before the least recently used idle one is dropped; entries in use are
            never closed, so more than this may be open while more endpoints than this are busy.
        listing_miss_s: seconds a model listing that did not name a model is trusted before asking again.
        transport: how requests are sent. ``"aiohttp"`` (the default): streamed turns go straight
            through aiohttp and everything else through the SDK's aiohttp transport, which holds up far
            better under hundreds of concurrent streams in one process. ``"httpx2"``: everything through
            the SDK's own httpx2 client. Both send the same requests and raise the same typed errors.
    """

    max_clients: int = 32
    listing_miss_s: float = 30.0
    transport: Literal["httpx2", "aiohttp"] = "aiohttp"


class NativeClient(Protocol):
    """A native wire's client, kept in the pool: all the pool asks of it is to close."""

    async def aclose(self) -> None: ...


_Native = TypeVar("_Native", bound=NativeClient)
_Client = TypeVar("_Client")

_DEFAULTS = ClientSettings()
_settings = _DEFAULTS
_PoolKey = tuple[int, str, float | None, str]


class _Entry:
    """One endpoint's clients on one event loop, each built on first use, and who is using them.

    The SDK client is not built until something asks for it: with the aiohttp transport a process that
    only streams turns never needs it, and building one loads the system's certificates.
    """

    __slots__ = ("_sdk", "chat", "endpoint", "evicted", "key", "loop", "natives", "transport", "users")

    def __init__(self, loop: asyncio.AbstractEventLoop, endpoint: Endpoint, key: _PoolKey) -> None:
        self.loop = weakref.ref(loop)
        self.endpoint = endpoint
        self.key = key
        self.transport = _settings.transport
        self._sdk: AsyncOpenAI | None = None
        self.chat: ChatClient | None = None
        # A native wire's clients, by what they were built with beyond the endpoint (a connect timeout).
        self.natives: dict[Hashable, NativeClient] = {}
        # Leases held: requests in flight and callers inside ``lease_client``.
        self.users = 0
        # Out of the pool: closed when the last lease goes (or at once, with none).
        self.evicted = False

    @property
    def sdk(self) -> AsyncOpenAI:
        if self._sdk is None:
            self._sdk = _built(self.endpoint, lambda: _sdk_client(self.endpoint, self.transport))
        return self._sdk

    def chat_client(self) -> ChatClient:
        chat = self.chat
        if chat is None:
            if self.transport == "aiohttp":
                from .aiohttp_chat import AiohttpChatClient

                chat = _built(self.endpoint, lambda: AiohttpChatClient(self.endpoint))
            else:
                from .sdk_chat import SdkChatClient

                chat = SdkChatClient(self.sdk)
            self.chat = chat
        return chat

    async def aclose(self) -> None:
        chat, self.chat = self.chat, None
        sdk, self._sdk = self._sdk, None
        natives, self.natives = list(self.natives.values()), {}
        try:
            if chat is not None:
                await chat.aclose()
            if sdk is not None:
                await sdk.close()
        finally:
            for native in natives:
                await native.aclose()


_pool: OrderedDict[_PoolKey, _Entry] = OrderedDict()
# Evicted while leased, by key: a request for the same endpoint takes the entry back rather than opening
# a second connection pool beside one that is still open.
_draining: dict[_PoolKey, _Entry] = {}
_closing: set[asyncio.Task[None]] = set()


def configure_clients(
    *,
    max_clients: int | None = None,
    listing_miss_s: float | None = None,
    transport: Literal["httpx2", "aiohttp"] | None = None,
) -> ClientSettings:
    """Move the pool's defaults for this process; returns every setting in force.

    A value left out, or one that is not a number above zero, keeps what was there. Lowering
    ``max_clients`` below the pool's size evicts down to it at once, least recently used first (a client
    in use is closed when its requests end).
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
    """How many entries the pool holds now (evicted ones still finishing a request are not counted)."""
    return len(_pool)


def open_entries() -> int:
    """How many entries are open now: the pool's, and evicted ones whose requests have not ended."""
    return len(_pool) + len(_draining)


def get_client(endpoint: Endpoint) -> AsyncOpenAI:
    """The pooled SDK client for this endpoint on the running event loop (built on first use).

    It is not leased: once more endpoints than ``max_clients`` are used, the pool may close it. Hold
    ``lease_client`` around calls that must not be cut. The SDK's own retries are off: retrying is
    ``run_turn``'s job, and two retry layers multiply.
    """
    return _entry(endpoint).sdk


@contextlib.contextmanager
def lease_client(endpoint: Endpoint) -> Iterator[AsyncOpenAI]:
    """The pooled SDK client for this endpoint, kept open until the block ends however the pool churns.

    Use it in a coroutine on the loop the client belongs to::

        with lease_client(endpoint) as client:
            listing = await client.models.list()
    """
    entry = _acquire(endpoint)
    try:
        yield entry.sdk
    finally:
        _release(entry)


def get_chat_client(endpoint: Endpoint) -> ChatClient:
    """A client that sends this endpoint's streamed turns through the pool, by the transport in force.

    Each request leases the endpoint's live entry for as long as its stream is open, so the client under
    it is never closed mid-stream, and the handle may be kept for as long as the caller likes.
    """
    # Built now, not at the first request: building an SDK client loads the SDK and the certificates,
    # which must not eat into the first request's first-token allowance.
    _entry(endpoint).chat_client()
    return _PooledChat(endpoint)


def chat_client_for(client: AsyncOpenAI | ChatClient) -> ChatClient:
    """A ``ChatClient`` for what a caller handed over: an SDK client is wrapped, a chat client kept."""
    if hasattr(client, "open_stream"):
        return client  # type: ignore[return-value]
    from .sdk_chat import SdkChatClient

    return SdkChatClient(client)


def lease_native(
    endpoint: Endpoint, slot: Hashable, build: Callable[[], _Native]
) -> tuple[_Native, Callable[[], None]]:
    """A native wire's pooled client for this endpoint and ``slot``, built by ``build`` on first use, and
    the function that gives the lease back.

    The client stays open until the lease is given back however the pool churns; give it back once, when
    the request that uses it has ended (its stream closed).
    """
    entry = _acquire(endpoint)
    try:
        kept = entry.natives.get(slot)
        if kept is None:
            client = _built(endpoint, build)
            entry.natives[slot] = client
        else:
            client = cast(_Native, kept)
    except BaseException:
        _release(entry)
        raise
    held: list[_Entry] = [entry]

    def release() -> None:
        if held:
            _release(held.pop())

    return client, release


class _PooledChat:
    """A ``ChatClient`` that leases the endpoint's pooled entry per request."""

    __slots__ = ("_endpoint",)

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    @property
    def endpoint(self) -> str:
        return self._endpoint.base_url

    async def open_stream(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        on_response: ResponseInterceptor | None = None,
    ) -> ChatStream:
        entry = _acquire(self._endpoint)
        try:
            stream = await entry.chat_client().open_stream(
                body, connect_timeout=connect_timeout, on_response=on_response
            )
        except BaseException:
            _release(entry)
            raise
        return _LeasedStream(stream, entry)

    async def aclose(self) -> None:
        """Nothing: the clients under it belong to the pool (``aclose_clients`` closes them)."""


class _LeasedStream:
    """A stream that gives its entry's lease back when it is closed."""

    __slots__ = ("_entry", "_stream")

    def __init__(self, stream: ChatStream, entry: _Entry) -> None:
        self._stream = stream
        self._entry: _Entry | None = entry

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        # The transport's own iterator, not a wrapper: nothing is added per chunk.
        return self._stream.aiter_bytes()

    def close(self) -> Awaitable[None] | None:
        closing = self._stream.close()
        if closing is None:
            self._release()
            return None
        return self._closed(closing)

    async def _closed(self, closing: Awaitable[None]) -> None:
        try:
            await closing
        finally:
            self._release()

    def _release(self) -> None:
        entry, self._entry = self._entry, None
        if entry is not None:
            _release(entry)


def _key(loop: asyncio.AbstractEventLoop, endpoint: Endpoint) -> _PoolKey:
    return (id(loop), endpoint_key(endpoint), endpoint.request_timeout, _settings.transport)


def _entry(endpoint: Endpoint) -> _Entry:
    loop = asyncio.get_running_loop()
    key = _key(loop, endpoint)
    entry = _pool.get(key)
    if entry is not None and entry.loop() is loop:
        _pool.move_to_end(key)
        return entry
    entry = _draining.pop(key, None)
    if entry is None or entry.loop() is not loop:
        entry = _Entry(loop, endpoint, key)
    entry.evicted = False
    _pool[key] = entry
    _pool.move_to_end(key)
    _evict_to(_settings.max_clients, keep=entry)
    return entry


def _acquire(endpoint: Endpoint) -> _Entry:
    entry = _entry(endpoint)
    entry.users += 1
    return entry


def _release(entry: _Entry) -> None:
    entry.users -= 1
    if entry.users <= 0 and entry.evicted:
        if _draining.get(entry.key) is entry:
            del _draining[entry.key]
        _close_soon(entry)


def _built(endpoint: Endpoint, build: Callable[[], _Client]) -> _Client:
    """What ``build`` makes for ``endpoint``, or ``InvalidInput`` when the environment or the HTTP library
    refuses what it was given.

    The environment is checked first, so a setting neither transport can use gives the same error on both.
    Building a client opens no connection, so whatever else the library raises while building it is about
    the configuration too (a SOCKS proxy without its extra, a certificate file that holds no certificate).
    """
    check_environment(endpoint.base_url)
    try:
        return build()
    except SteadyloopError:
        raise
    except Exception as exc:
        raise InvalidInput(
            f"no HTTP client can be built for {endpoint.base_url} with the environment's proxy and "
            f"certificate settings: {type(exc).__name__}: {exc}"
        ) from exc


def _sdk_client(endpoint: Endpoint, transport: str) -> AsyncOpenAI:
    # Imported here: the SDK takes about a third of a second to load, and a process that streams over
    # the aiohttp transport never needs it.
    import httpx2
    from openai import AsyncOpenAI, DefaultAioHttpClient

    timeout = (
        httpx2.Timeout(endpoint.request_timeout, connect=min(endpoint.request_timeout, 30.0))
        if endpoint.request_timeout
        else httpx2.Timeout(None, connect=30.0)
    )
    http_client: httpx2.AsyncClient
    if transport == "aiohttp":
        http_client = DefaultAioHttpClient(timeout=timeout)
    else:
        from openai import DefaultAsyncHttpxClient

        from .sdk_chat import trace_connections

        # The hook lets a streamed turn tell a kept-alive connection the server closed from a new one.
        http_client = DefaultAsyncHttpxClient(timeout=timeout, event_hooks={"request": [trace_connections]})
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
    Clients still in use are closed too: the loop is ending.
    """
    loop = asyncio.get_running_loop()
    for key in [k for k, entry in _pool.items() if entry.loop() is loop]:
        entry = _pool.pop(key)
        entry.evicted = True
        await entry.aclose()
    for key in [k for k, entry in _draining.items() if entry.loop() is loop]:
        await _draining.pop(key).aclose()
    if _closing:
        await asyncio.gather(*list(_closing), return_exceptions=True)


def reset_clients() -> None:
    """Drop every pooled client and put the defaults back (a client in use closes when its requests end)."""
    global _settings
    _settings = _DEFAULTS
    _evict_to(0)


def _evict_to(size: int, keep: _Entry | None = None) -> None:
    """Drop entries until ``size`` are left: the least recently used idle one first, else the least
    recently used in use, which closes when its last request ends."""
    while len(_pool) > size:
        victim = next((e for e in _pool.values() if e.users == 0 and e is not keep), None)
        if victim is None:
            victim = next((e for e in _pool.values() if e is not keep), None)
            if victim is None:
                return
        del _pool[victim.key]
        victim.evicted = True
        if victim.users > 0:
            _draining[victim.key] = victim
        else:
            _close_soon(victim)


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
