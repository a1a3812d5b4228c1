"""Models, windows and liveness of a chat-completions server, asked in the terms such servers answer.

The window that matters is the one the server is serving the model in, not the one it was trained
for: a 256k model started with ``-c 16384`` refuses anything past 16k. So ``served_window`` asks, in
order, and takes the first number it gets (after the operator's own number, which ``context_limit_for``
takes first):

1. the served window: llama.cpp's ``GET /props`` (``default_generation_settings.n_ctx``, the window of
   one slot, which is what one request gets), then LM Studio's ``GET /api/v0/models``
   (``loaded_context_length``, else ``max_context_length``). A server that has neither route is
   latched, per endpoint and route, and not asked again;
2. the ``/v1/models`` listing: vLLM's ``max_model_len``, OpenRouter's ``context_length``, LM Studio's and
   others' ``context_length`` / ``max_context_length``, and for llama.cpp ``meta.n_ctx`` (newer builds)
   or, as a last resort, ``meta.n_ctx_train``, which is only the trained window.

Ollama names no window on any of these routes (and truncates an over-long prompt rather than refusing
it), so on Ollama the operator's number is the only guard there is.

A model is found in a listing by its exact id or by one of its ``aliases``. A llama.cpp server serving a
single model answers for any name, because it ignores the request's ``model`` field; ``/props`` is read
the same way. Listings are kept per endpoint; one that does not name the model is fetched again, but at
most once every ``client_settings().listing_miss_s`` seconds (30 by default) for that model, so a typo
does not cost a listing per call while a model pulled onto a long-running server is still picked up.

Every request goes through the endpoint's pooled client with no retries, bounded by the endpoint's
request timeout (30 s when it has none). Network I/O; call it before a run, not before every request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...errors import EndpointRefused, EndpointUnavailable
from ..connection_failures import unreachable
from ..endpoints import Endpoint, endpoint_key
from ..seam import LISTING_TIMEOUT, ModelInfo
from ..transport.clients import client_settings, lease_client
from ..web_pages import is_web_page, page_words, web_page_words

if TYPE_CHECKING:
    import httpx2

__all__ = ["answers", "forget_windows", "list_models", "served_window"]

#: Statuses that mean the route is not there at all, as opposed to not there right now.
_ABSENT_STATUSES = frozenset({404, 405, 501})

_PROPS = "props"
_LMSTUDIO = "lmstudio"


class _Missing:
    """A reply that was not usable JSON; ``absent`` when the route does not exist."""

    __slots__ = ("absent",)

    def __init__(self, absent: bool) -> None:
        self.absent = absent


_ABSENT = _Missing(absent=True)
_FAILED = _Missing(absent=False)

# The clock misses are timed on; a seam so tests can move time without moving the event loop's.
_clock: Callable[[], float] = time.monotonic

_no_route: dict[str, set[str]] = {}
_listings: dict[str, list[ModelInfo]] = {}
_misses: dict[tuple[str, str], float] = {}


def forget_windows() -> None:
    """Forget every cached listing, remembered miss and latched route."""
    _no_route.clear()
    _listings.clear()
    _misses.clear()


async def served_window(endpoint: Endpoint, model: str) -> int | None:
    """The window the server serves ``model`` in, or the one its listing names; ``None`` when it names
    none. Never raises for a server that cannot or will not say."""
    window = await _served_window(endpoint, model)
    if window is not None:
        return window
    info = await _listed(endpoint, model)
    return info.context_length if info is not None else None


async def list_models(endpoint: Endpoint) -> list[ModelInfo]:
    """The models the server lists at ``/v1/models``, fetched now (and kept for ``served_window``).

    Raises:
        EndpointRefused: the endpoint answered with an error status, or with something that is not a
            model listing.
        EndpointUnavailable: it could not be reached, or answered with a transient status.
    """
    import openai

    url = f"{endpoint.base_url}/models"
    try:
        response = await _get(endpoint, url)
    except openai.APIStatusError as exc:
        error = EndpointUnavailable if exc.status_code >= 500 or exc.status_code == 429 else EndpointRefused
        text = _text_of(exc.response)
        said = f"{url} answered HTTP {exc.status_code}"
        if text is not None and is_web_page(text):
            said = f"{url}: {web_page_words(exc.status_code, page_words(text))}"
        raise error(said, endpoint=endpoint.base_url, status=exc.status_code, body=text) from exc
    except openai.APIError as exc:
        timed_out = isinstance(exc, openai.APITimeoutError)
        raise unreachable(
            exc,
            endpoint=endpoint.base_url,
            model=None,
            timeout_s=endpoint.request_timeout or LISTING_TIMEOUT,
            timed_out=timed_out,
        ) from exc
    try:
        models = _parse_listing(response.json())
    except ValueError:
        models = None
    if models is None:
        raise EndpointRefused(
            f"{url} did not answer with a model listing",
            endpoint=endpoint.base_url,
            status=response.status_code,
            body=_text_of(response),
        )
    _listings[endpoint_key(endpoint)] = models
    return models


def _root(endpoint: Endpoint) -> str:
    # llama.cpp's and LM Studio's own routes hang off the server root, not the OpenAI prefix.
    url = endpoint.base_url
    return url.removesuffix("/v1")


async def _get(endpoint: Endpoint, url: str) -> httpx2.Response:
    # The SDK sends an absolute URL as it is, so the pooled client (auth, headers, connection pool)
    # serves the server-root routes too.
    import httpx2

    # Leased: with more endpoints than the pool holds, an unleased client could be closed mid-request.
    with lease_client(endpoint) as client:
        response: httpx2.Response = await client.get(
            url,
            cast_to=httpx2.Response,
            options={"max_retries": 0, "timeout": endpoint.request_timeout or LISTING_TIMEOUT},
        )
    return response


async def _get_json(endpoint: Endpoint, url: str) -> Any:
    """The JSON at ``url``, or ``_ABSENT`` / ``_FAILED`` when there is none to read."""
    import openai

    try:
        response = await _get(endpoint, url)
    except openai.APIStatusError as exc:
        return _ABSENT if exc.status_code in _ABSENT_STATUSES else _FAILED
    except openai.APIError:
        # A server that could not be reached said nothing about its routes: one started after us
        # must still be asked once it is up, so nothing is latched.
        return _FAILED
    try:
        return response.json()
    except ValueError:
        # A web page or a plain-text 404 answered with 200: whatever is there, it is not this route.
        return _ABSENT


def _text_of(response: httpx2.Response) -> str | None:
    try:
        return response.text
    except Exception:
        return None


def _positive(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _latch_if_absent(latched: set[str], route: str, reply: Any, expected: str) -> bool:
    """Latch ``route`` when the reply says it is not there; True when it was latched.

    Not there: a 404/405/501, a body that is not JSON or not an object, or an object carrying an error
    and not ``expected`` (LM Studio answers routes it does not have with 200 and ``{"error": ...}``).
    """
    if isinstance(reply, _Missing):
        absent = reply.absent
    else:
        absent = not isinstance(reply, Mapping) or ("error" in reply and expected not in reply)
    if absent:
        latched.add(route)
    return absent


async def _served_window(endpoint: Endpoint, model: str) -> int | None:
    latched = _no_route.setdefault(endpoint_key(endpoint), set())
    if _PROPS not in latched:
        reply = await _get_json(endpoint, f"{_root(endpoint)}/props")
        absent = _latch_if_absent(latched, _PROPS, reply, "default_generation_settings")
        if not absent and isinstance(reply, Mapping):
            settings = reply.get("default_generation_settings")
            window = _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
            # Older builds put the window at the top level.
            window = window or _positive(reply.get("n_ctx"))
            if window is not None:
                return window
    if _LMSTUDIO not in latched:
        reply = await _get_json(endpoint, f"{_root(endpoint)}/api/v0/models")
        absent = _latch_if_absent(latched, _LMSTUDIO, reply, "data")
        if not absent and isinstance(reply, Mapping):
            entries = reply.get("data")
            if not isinstance(entries, list):
                # Some other server's JSON at this path: whatever it is, it is not LM Studio's listing.
                latched.add(_LMSTUDIO)
            elif (entry := _lmstudio_entry(entries, model)) is not None:
                return _positive(entry.get("loaded_context_length")) or _positive(
                    entry.get("max_context_length")
                )
    return None


def _lmstudio_entry(entries: list[Any], model: str) -> Mapping[str, Any] | None:
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("id") == model:
            return entry
    return None


def _listed_window(entry: Mapping[str, Any]) -> int | None:
    for name in ("max_model_len", "context_length", "loaded_context_length", "max_context_length"):
        window = _positive(entry.get(name))
        if window is not None:
            return window
    provider = entry.get("top_provider")
    if isinstance(provider, Mapping) and (window := _positive(provider.get("context_length"))):
        return window
    meta = entry.get("meta")
    if isinstance(meta, Mapping):
        # n_ctx is what the server was started with; n_ctx_train only what the model was trained for.
        return _positive(meta.get("n_ctx")) or _positive(meta.get("n_ctx_train"))
    return None


def _parse_listing(reply: Any) -> list[ModelInfo] | None:
    data = reply.get("data") if isinstance(reply, Mapping) else None
    if not isinstance(data, list):
        return None
    models: list[ModelInfo] = []
    for entry in data:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        aliases = entry.get("aliases")
        owned_by = entry.get("owned_by")
        models.append(
            ModelInfo(
                id=entry["id"],
                context_length=_listed_window(entry),
                owned_by=owned_by if isinstance(owned_by, str) else None,
                aliases=tuple(a for a in aliases if isinstance(a, str)) if isinstance(aliases, list) else (),
            )
        )
    return models


def _find(models: list[ModelInfo], model: str) -> ModelInfo | None:
    for info in models:
        if info.id == model:
            return info
    for info in models:
        if model in info.aliases:
            return info
    # A single-model llama.cpp server serves whatever the request names.
    if len(models) == 1 and models[0].owned_by == "llamacpp":
        return models[0]
    return None


async def _listed(endpoint: Endpoint, model: str) -> ModelInfo | None:
    key = endpoint_key(endpoint)
    models = _listings.get(key)
    if models is not None:
        found = _find(models, model)
        if found is not None:
            return found
        missed = _misses.get((key, model))
        if missed is not None and _clock() - missed < client_settings().listing_miss_s:
            return None
    reply = await _get_json(endpoint, f"{endpoint.base_url}/models")
    if reply is _FAILED:
        return None
    # A server with no listing at all is kept as an empty one, so the miss window bounds it too.
    models = _listings[key] = _parse_listing(reply) or []
    found = _find(models, model)
    if found is None:
        _misses[(key, model)] = _clock()
    else:
        _misses.pop((key, model), None)
    return found


async def answers(endpoint: Endpoint, within_s: float) -> bool:
    """Whether ``GET {base_url}/models`` gets any HTTP answer within ``within_s`` seconds."""
    # Imported here: the SDK is loaded only by what sends through it (about a third of a second).
    import httpx2
    import openai

    try:
        async with asyncio.timeout(within_s):
            with lease_client(endpoint) as client:
                await client.get(
                    "/models", cast_to=httpx2.Response, options={"max_retries": 0, "timeout": within_s}
                )
    except openai.APIStatusError:
        return True
    except (openai.APIError, httpx2.HTTPError, OSError, TimeoutError):
        return False
    return True
