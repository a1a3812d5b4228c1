"""The Gemini provider: ``models/{model}:streamGenerateContent?alt=sse`` over the REST API.

The request and the chunks are translated in ``shape`` (sans I/O); here is only the sending, over a
pooled ``httpx2`` client per endpoint (reused across requests, closed with the pool), with no retries of its
own (``run_turn`` retries), and failures read into the same kinds as every other wire's.

The REST shape rather than the ``google-genai`` SDK, for three things the SDK cannot give: a thought
signature goes back to the server as the exact text it came in (the SDK decodes it to bytes and sends it
re-encoded in another base64 alphabet); the chunks are read as the server wrote them, in the API's own
spelling; and a stream that ends in an error or is cancelled is closed at once, in order, by the task that
read it (the SDK's nested generators are left to the collector, which closes them out of order).

The base URL names the API version it ends in (``https://generativelanguage.googleapis.com/v1beta``, the
default when it names none). A Vertex AI base URL names its project, location and publisher instead
(``https://aiplatform.googleapis.com/v1beta1/projects/P/locations/global/publishers/google``) and is used as
given; its key is an OAuth access token, sent as ``Authorization: Bearer`` (the Gemini API's key goes in
``x-goog-api-key``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ...errors import EndpointError
from ..endpoints import NO_KEY
from ..interceptors import Interceptors, ResponseInfo, observe, tell_sse_event
from ..sse import SSEDecoder
from ..transport.rest import lease_http, read_failure, transport_error
from .shape import GeminiChunks, gemini_request

if TYPE_CHECKING:
    import httpx2

    from ..endpoints import Endpoint

__all__ = ["GeminiProvider", "gemini_auth", "gemini_body", "gemini_count_body", "gemini_url", "is_vertex"]

_VERSION_SUFFIX = re.compile(r"/(v\d+(?:alpha|beta)?\d*)$")
_VERTEX_PATH = re.compile(r"/v\d+(?:alpha|beta)?\d*/projects/[^/]+/locations/[^/]+/publishers/[^/]+$")
# Request fields that stay at the top of the body; every other field of the config is a generation setting.
_TOP_LEVEL = ("systemInstruction", "tools", "toolConfig", "safetySettings", "cachedContent", "labels")
# What Vertex AI's countTokens takes of a request (no tool config, safety settings, cached content, labels).
_VERTEX_COUNTED = frozenset({"contents", "systemInstruction", "tools", "generationConfig"})


def is_vertex(base_url: str) -> bool:
    """Whether ``base_url`` is a Vertex AI publisher path (``.../projects/P/locations/L/publishers/google``)."""
    return _VERTEX_PATH.search(base_url.rstrip("/")) is not None


def gemini_url(base_url: str, model: str, method: str) -> str:
    """The URL of ``models/{model}:{method}`` under ``base_url`` (``/v1beta`` when it names no version and
    is no Vertex AI publisher path)."""
    url = base_url.rstrip("/")
    if not _VERSION_SUFFIX.search(url) and not is_vertex(url):
        url += "/v1beta"
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    return f"{url}/{quote(name, safe='/-._~')}:{method}"


def gemini_body(contents: list[dict[str, Any]], config: Mapping[str, Any]) -> dict[str, Any]:
    """The REST request body of ``gemini_request``'s contents and flat config."""
    body: dict[str, Any] = {"contents": contents}
    generation = {}
    for key, value in config.items():
        if key in _TOP_LEVEL:
            body[key] = value
        else:
            generation[key] = value
    if generation:
        body["generationConfig"] = generation
    return body


def gemini_count_body(
    base_url: str, model: str, contents: list[dict[str, Any]], config: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``countTokens`` body of ``gemini_request``'s contents and config, as the API at ``base_url`` takes it.

    The Gemini API counts a whole request wrapped as ``generateContentRequest`` (naming its model). Vertex
    AI's count takes ``contents``, ``systemInstruction``, ``tools`` and ``generationConfig`` side by side
    and refuses any other field, the wrapper among them.
    """
    body = gemini_body(contents, config)
    if is_vertex(base_url):
        return {k: v for k, v in body.items() if k in _VERTEX_COUNTED}
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    return {"generateContentRequest": {"model": name, **body}}


def gemini_auth(endpoint: Endpoint) -> dict[str, str]:
    """The header that carries the endpoint's key: a Vertex AI access token as a bearer, else the Gemini
    API key; none without a key."""
    key = endpoint.key
    if not key or key == NO_KEY:
        return {}
    return {"authorization": f"Bearer {key}"} if is_vertex(endpoint.base_url) else {"x-goog-api-key": key}


def _headers(endpoint: Endpoint) -> dict[str, str]:
    return {"content-type": "application/json", "accept": "text/event-stream", **gemini_auth(endpoint)}


class GeminiProvider:
    """Streams turns from the Gemini API (``Endpoint(url, key, api="gemini")``)."""

    __slots__ = ("_endpoint",)

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint

    @property
    def endpoint(self) -> str:
        return self._endpoint.base_url

    async def open_turn(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        interceptors: Interceptors | None = None,
    ) -> _GeminiStream:
        import httpx2

        model, contents, config = gemini_request(body)
        where = self._endpoint.shown_url
        named = model or None
        url = gemini_url(self._endpoint.base_url, model, "streamGenerateContent")
        content = json.dumps(gemini_body(contents, config), separators=(",", ":")).encode()
        client, release = lease_http(self._endpoint)
        response: httpx2.Response | None = None
        try:
            try:
                # Bounds only the connection: the watchdog bounds silence.
                request = client.build_request(
                    "POST",
                    url,
                    params={"alt": "sse"},
                    headers=_headers(self._endpoint),
                    content=content,
                    timeout=httpx2.Timeout(None, connect=connect_timeout or 30.0),
                )
                response = await client.send(request, stream=True)
            except Exception as exc:
                raise transport_error(exc, endpoint=where, model=named) from None
            if interceptors is not None and interceptors.on_response is not None:
                info = ResponseInfo(
                    status=response.status_code, headers=dict(response.headers), endpoint=where, model=named
                )
                await observe("on_response", interceptors.on_response, info)
            if response.status_code != 200:
                try:
                    raw = await response.aread()
                except Exception as exc:
                    raise transport_error(exc, endpoint=where, model=named) from None
                raise read_failure(response.status_code, raw, response.headers, endpoint=where, model=named)
        except BaseException:
            try:
                if response is not None:
                    await response.aclose()
            finally:
                release()
            raise
        return _GeminiStream(response, release, where, named, interceptors)


class _GeminiStream:
    __slots__ = (
        "_chunks",
        "_decoder",
        "_events",
        "_hooks",
        "_model",
        "_release",
        "_response",
        "_where",
    )

    def __init__(
        self,
        response: httpx2.Response,
        release: Callable[[], None],
        where: str,
        model: str | None,
        hooks: Interceptors | None = None,
    ) -> None:
        self._response = response
        self._release = release
        self._where = where
        self._model = model
        self._hooks = hooks if hooks is not None and hooks.on_sse_event is not None else None
        self._decoder = SSEDecoder(keep_raw=self._hooks is not None, keep_stray=True)
        self._events = 0
        self._chunks = GeminiChunks(endpoint=where, model=model)

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        decoder = self._decoder
        reader = self._chunks
        # Closed here, by the task that reads, whatever ends the loop: nothing is left to the collector.
        async with contextlib.aclosing(self._response.aiter_raw()) as received:
            while True:
                try:
                    data = await anext(received, None)
                except Exception as exc:
                    raise transport_error(exc, endpoint=self._where, model=self._model) from None
                payloads = decoder.feed(data) if data is not None else decoder.flush()
                if self._hooks is not None:
                    await self._tell_raw()
                if payloads:
                    self._events += len(payloads)
                    batch: list[Any] = []
                    failure: EndpointError | None = None
                    for payload in payloads:
                        try:
                            batch.extend(reader.feed(payload))
                        except EndpointError as error:
                            # What came before the error in the same read is shown before it fails the
                            # turn: else whether it was shown (and so whether a chain may hop) would
                            # depend on how the bytes were cut into reads.
                            failure = error
                            break
                    # Empty when every chunk was usage alone: it still says the stream is alive.
                    if batch or failure is None:
                        yield batch
                    if failure is not None:
                        raise failure
                if data is None:
                    # Bare JSON outside any event (an error written into a 200 without SSE framing):
                    # read once the body is whole, since it spans lines.
                    stray = decoder.stray
                    if stray:
                        cut, streamed = decoder.stray_cut, self._events > 0
                        late = reader.feed_bare(bytes(stray), cut=cut, streamed=streamed)
                        if late:
                            yield late
                    return

    async def _tell_raw(self) -> None:
        raw = self._decoder.raw
        if not raw:
            return
        taken = list(raw)
        raw.clear()
        for name, data in taken:
            await tell_sse_event(
                self._hooks, name.decode("utf-8", "replace"), data.decode("utf-8", "replace")
            )

    def skipped(self) -> str:
        parts = []
        if self._chunks.skipped:
            parts.append(f"{self._chunks.skipped} part(s) of Gemini chunks of a shape not read")
        if self._decoder.unreadable:
            first = self._decoder.first_unreadable
            parts.append(f"{self._decoder.unreadable} event(s) that were not JSON (first: {first!r})")
        return "; ".join(parts)

    def close(self) -> Awaitable[None] | None:
        return self._aclose()

    async def _aclose(self) -> None:
        try:
            await self._response.aclose()
        finally:
            release, self._release = self._release, _nothing
            release()


def _nothing() -> None:
    pass
