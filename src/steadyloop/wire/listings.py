"""Model listings, windows and liveness asked of a native API (Anthropic, Gemini) over plain HTTP.

Both native APIs list their models alike: a paged ``GET`` of the listing, a ``GET`` of one model, and a
window named on each entry. What differs (where the listing is, how a page names the next, which field
holds the window) is a ``NativeListing`` each wire keeps in its own folder; the asking is here, through
the same pooled HTTP client the wire's turns use.

A model's window, once read, is kept per endpoint and model; one the server would not name is asked again
at most once every ``client_settings().listing_miss_s`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import EndpointRefused, EndpointUnavailable
from .connection_failures import unreachable
from .endpoints import Endpoint, endpoint_key
from .provider import Provider
from .seam import LISTING_TIMEOUT, ModelInfo, TokenCounter, Wire
from .transport.clients import client_settings
from .transport.rest import lease_http

__all__ = [
    "MAX_PAGES",
    "NativeListing",
    "forget_native_windows",
    "listed_models",
    "listing_answers",
    "named_window",
    "native_wire",
]

#: Pages of a listing read at most: a listing that never ends must not hold a run forever.
MAX_PAGES = 20

_clock: Callable[[], float] = time.monotonic
_windows: dict[tuple[str, str], int] = {}
_misses: dict[tuple[str, str], float] = {}


@dataclass(frozen=True, slots=True)
class NativeListing:
    """How one native API lists its models.

    Attributes:
        headers: the headers that authenticate a request to the endpoint.
        listing_url: where the endpoint lists its models.
        model_url: where it describes one model.
        entries: the field of a listing page that holds its entries.
        first_page: the query of the first page.
        next_page: the query of the page after this one (a page's reply); ``None`` on the last.
        info: one entry read as a ``ModelInfo``; ``None`` for an entry that names no model.
        window: the window an entry (or a model's own reply) names; ``None`` when it names none.
    """

    headers: Callable[[Endpoint], dict[str, str]]
    listing_url: Callable[[Endpoint], str]
    model_url: Callable[[Endpoint, str], str]
    entries: str
    first_page: Mapping[str, str]
    next_page: Callable[[Mapping[str, Any]], dict[str, str] | None]
    info: Callable[[Any], ModelInfo | None]
    window: Callable[[Any], int | None]


def forget_native_windows() -> None:
    """Forget every window read and every miss."""
    _windows.clear()
    _misses.clear()


async def _get(
    listing: NativeListing, endpoint: Endpoint, url: str, params: Mapping[str, str], within_s: float
) -> tuple[int, Any]:
    """The status and the JSON of a GET (None when the body is not JSON).

    Raises:
        EndpointUnavailable: the endpoint could not be reached within ``within_s``.
    """
    import httpx2

    client, release = lease_http(endpoint)
    try:
        async with asyncio.timeout(within_s):
            response = await client.get(url, params=params, headers=listing.headers(endpoint))
    except (httpx2.HTTPError, OSError, TimeoutError) as exc:
        timed_out = isinstance(exc, TimeoutError | httpx2.TimeoutException)
        raise unreachable(
            exc, endpoint=endpoint.shown_url, model=None, timeout_s=within_s, timed_out=timed_out
        ) from exc
    finally:
        release()
    try:
        return response.status_code, response.json()
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
        return response.status_code, None


async def listed_models(listing: NativeListing, endpoint: Endpoint) -> list[ModelInfo]:
    """The models the endpoint lists, every page of them.

    Raises:
        EndpointRefused: the endpoint answered with an error status, or with something that is not a
            model listing.
        EndpointUnavailable: it could not be reached, or answered with a transient status.
    """
    url = listing.listing_url(endpoint)
    timeout = endpoint.request_timeout or LISTING_TIMEOUT
    models: list[ModelInfo] = []
    params: dict[str, str] = dict(listing.first_page)
    for _ in range(MAX_PAGES):
        status, reply = await _get(listing, endpoint, url, params, timeout)
        if status != 200:
            error = EndpointUnavailable if status >= 500 or status == 429 else EndpointRefused
            raise error(f"{url} answered HTTP {status}", endpoint=endpoint.shown_url, status=status)
        entries = reply.get(listing.entries) if isinstance(reply, Mapping) else None
        if not isinstance(entries, list):
            raise EndpointRefused(
                f"{url} did not answer with a model listing", endpoint=endpoint.shown_url, status=status
            )
        models.extend(info for info in (listing.info(entry) for entry in entries) if info is not None)
        following = listing.next_page(reply)
        if following is None or all(params.get(k) == v for k, v in following.items()):
            break  # the last page, or a cursor that does not move (the API reference's own example)
        params = {**params, **following}
    unique: dict[str, ModelInfo] = {}
    for info in models:  # a page read twice lists its models twice: the first of each id stands
        unique.setdefault(info.id, info)
    for info in unique.values():
        if info.context_length is not None:
            _windows[(endpoint_key(endpoint), info.id)] = info.context_length
    return list(unique.values())


async def named_window(listing: NativeListing, endpoint: Endpoint, model: str) -> int | None:
    """The window the API names for ``model``; None when it names none or cannot be asked. Never raises
    for a server that cannot or will not say."""
    key = (endpoint_key(endpoint), model)
    window = _windows.get(key)
    if window is not None:
        return window
    missed = _misses.get(key)
    if missed is not None and _clock() - missed < client_settings().listing_miss_s:
        return None
    try:
        status, reply = await _get(
            listing,
            endpoint,
            listing.model_url(endpoint, model),
            {},
            endpoint.request_timeout or LISTING_TIMEOUT,
        )
    except EndpointUnavailable:
        return None  # a server that could not be reached said nothing: ask again next time
    window = listing.window(reply) if status == 200 else None
    if window is None:
        _misses[key] = _clock()
        return None
    _misses.pop(key, None)
    _windows[key] = window
    return window


async def listing_answers(listing: NativeListing, endpoint: Endpoint, within_s: float) -> bool:
    """Whether the endpoint's model listing gets any HTTP answer within ``within_s`` seconds."""
    try:
        await _get(listing, endpoint, listing.listing_url(endpoint), {}, within_s)
    except EndpointUnavailable:
        return False
    return True


def positive(value: Any) -> int | None:
    """``value`` when it is a positive int (not a bool), else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def native_wire(
    api: str,
    provider: Callable[[Endpoint], Provider],
    listing: NativeListing,
    *,
    token_counter: Callable[[Endpoint, str | None], TokenCounter],
    own_fields: frozenset[str],
) -> Wire:
    """The wire of a native API whose models, windows and liveness are asked of ``listing``.

    ``provider`` builds its request from the fields it knows, so the other wires' fields need no removing.
    """

    def make(endpoint: Endpoint, _others: frozenset[str]) -> Provider:
        return provider(endpoint)

    async def list_models(endpoint: Endpoint) -> list[ModelInfo]:
        return await listed_models(listing, endpoint)

    async def window(endpoint: Endpoint, model: str) -> int | None:
        return await named_window(listing, endpoint, model)

    async def answers(endpoint: Endpoint, within_s: float) -> bool:
        return await listing_answers(listing, endpoint, within_s)

    return Wire(
        api=api,
        provider=make,
        list_models=list_models,
        window=window,
        answers=answers,
        forget=forget_native_windows,
        token_counter=token_counter,
        own_fields=own_fields,
    )
