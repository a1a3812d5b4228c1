"""Models, windows and liveness for the native wires, each in its own API's terms.

``context_limit_for``, ``list_models`` and the liveness probe ask an OpenAI-shaped server its
``/v1/models``; an Anthropic or Gemini endpoint is asked here instead, through the same pooled HTTP client
its turns use:

- Anthropic: ``GET /v1/models`` (``data``, paged by ``after_id``) and ``GET /v1/models/{id}``; a model's
  window is its ``max_input_tokens`` where the API names one.
- Gemini: ``GET {version}/models`` (``models``, paged by ``pageToken``) and ``GET {version}/models/{model}``;
  a model's window is its ``inputTokenLimit``.

A model's window, once read, is kept per endpoint and model; one the server would not name is asked again
at most once every ``client_settings().listing_miss_s`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from ..errors import EndpointRefused, EndpointUnavailable
from .endpoints import NO_KEY, Endpoint, endpoint_key
from .gemini.provider import gemini_auth, gemini_url
from .transport.clients import client_settings
from .transport.rest import lease_http
from .windows import LISTING_TIMEOUT, ModelInfo

__all__ = ["native_answers", "native_list_models", "native_window"]

#: Pages of a listing read at most: a listing that never ends must not hold a run forever.
MAX_PAGES = 20
ANTHROPIC_VERSION = "2023-06-01"

_clock: Callable[[], float] = time.monotonic
_windows: dict[tuple[str, str], int] = {}
_misses: dict[tuple[str, str], float] = {}


def reset_native_windows() -> None:
    """Forget every window read and every miss."""
    _windows.clear()
    _misses.clear()


def _headers(endpoint: Endpoint) -> dict[str, str]:
    key = endpoint.key if endpoint.key and endpoint.key != NO_KEY else None
    if endpoint.api == "anthropic":
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers
    return gemini_auth(endpoint)


def _listing_url(endpoint: Endpoint) -> str:
    if endpoint.api == "anthropic":
        return endpoint.base_url.removesuffix("/v1") + "/v1/models"
    return gemini_url(endpoint.base_url, "", "").rsplit("/", 1)[0]


def _model_url(endpoint: Endpoint, model: str) -> str:
    if endpoint.api == "anthropic":
        return f"{_listing_url(endpoint)}/{quote(model, safe='-._~')}"
    return gemini_url(endpoint.base_url, model, "").removesuffix(":")


async def _get(endpoint: Endpoint, url: str, params: Mapping[str, str], within_s: float) -> tuple[int, Any]:
    """The status and the JSON of a GET (None when the body is not JSON).

    Raises:
        EndpointUnavailable: the endpoint could not be reached within ``within_s``.
    """
    import httpx2

    client, release = lease_http(endpoint)
    try:
        async with asyncio.timeout(within_s):
            response = await client.get(url, params=params, headers=_headers(endpoint))
    except (httpx2.HTTPError, OSError, TimeoutError) as exc:
        raise EndpointUnavailable(
            f"could not reach {url}: {exc or type(exc).__name__}",
            endpoint=endpoint.shown_url,
            kind="transient",
        ) from exc
    finally:
        release()
    try:
        return response.status_code, response.json()
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
        return response.status_code, None


def _window(entry: Any, api: str) -> int | None:
    value = (
        entry.get("max_input_tokens" if api == "anthropic" else "inputTokenLimit")
        if isinstance(entry, Mapping)
        else None
    )
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _info(entry: Any, api: str) -> ModelInfo | None:
    if not isinstance(entry, Mapping):
        return None
    if api == "anthropic":
        name = entry.get("id")
        owner = "anthropic"
    else:
        raw = entry.get("name")
        name = raw.removeprefix("models/") if isinstance(raw, str) else None
        owner = "google"
    if not isinstance(name, str) or not name:
        return None
    return ModelInfo(id=name, context_length=_window(entry, api), owned_by=owner)


async def native_list_models(endpoint: Endpoint) -> list[ModelInfo]:
    """The models an Anthropic or Gemini endpoint lists, every page of them.

    Raises:
        EndpointRefused: the endpoint answered with an error status, or with something that is not a
            model listing.
        EndpointUnavailable: it could not be reached, or answered with a transient status.
    """
    api = endpoint.api
    url = _listing_url(endpoint)
    timeout = endpoint.request_timeout or LISTING_TIMEOUT
    models: list[ModelInfo] = []
    params: dict[str, str] = {"limit": "1000"} if api == "anthropic" else {"pageSize": "1000"}
    for _ in range(MAX_PAGES):
        status, reply = await _get(endpoint, url, params, timeout)
        if status != 200:
            error = EndpointUnavailable if status >= 500 or status == 429 else EndpointRefused
            raise error(f"{url} answered HTTP {status}", endpoint=endpoint.shown_url, status=status)
        entries = (
            reply.get("data" if api == "anthropic" else "models") if isinstance(reply, Mapping) else None
        )
        if not isinstance(entries, list):
            raise EndpointRefused(
                f"{url} did not answer with a model listing", endpoint=endpoint.shown_url, status=status
            )
        models.extend(info for info in (_info(entry, api) for entry in entries) if info is not None)
        following = _next_page(reply, api)
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


def _next_page(reply: Mapping[str, Any], api: str) -> dict[str, str] | None:
    if api == "anthropic":
        last = reply.get("last_id")
        return (
            {"after_id": last} if reply.get("has_more") is True and isinstance(last, str) and last else None
        )
    token = reply.get("nextPageToken")
    return {"pageToken": token} if isinstance(token, str) and token else None


async def native_window(endpoint: Endpoint, model: str) -> int | None:
    """The window the API names for ``model`` (``max_input_tokens``, ``inputTokenLimit``); None when it
    names none or cannot be asked. Never raises for a server that cannot or will not say."""
    key = (endpoint_key(endpoint), model)
    window = _windows.get(key)
    if window is not None:
        return window
    missed = _misses.get(key)
    if missed is not None and _clock() - missed < client_settings().listing_miss_s:
        return None
    try:
        status, reply = await _get(
            endpoint, _model_url(endpoint, model), {}, endpoint.request_timeout or LISTING_TIMEOUT
        )
    except EndpointUnavailable:
        return None  # a server that could not be reached said nothing: ask again next time
    window = _window(reply, endpoint.api) if status == 200 else None
    if window is None:
        _misses[key] = _clock()
        return None
    _misses.pop(key, None)
    _windows[key] = window
    return window


async def native_answers(endpoint: Endpoint, within_s: float) -> bool:
    """Whether the endpoint's model listing gets any HTTP answer within ``within_s`` seconds."""
    try:
        await _get(endpoint, _listing_url(endpoint), {}, within_s)
    except EndpointUnavailable:
        return False
    return True
