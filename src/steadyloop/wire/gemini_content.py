"""The Gemini provider: ``streamGenerateContent?alt=sse`` through the official ``google-genai`` SDK.

The request and the chunks are translated in ``gemini_shape`` (sans I/O); each streamed response the SDK
parses is read back in the API's own JSON spelling, so the same reader serves captures and live streams.
One SDK client per request (closed with its stream), no SDK retries (``run_turn`` retries), failures read
into the same kinds as every other wire's.

The base URL names the API version it ends in (``https://generativelanguage.googleapis.com/v1beta``, the
default when it names none). Needs ``pip install 'steadyloop[gemini]'``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import EndpointError, InvalidInput
from .failures import classify_failure
from .gemini_shape import GeminiChunks, gemini_request
from .openai_chat import error_for_failure, unreachable_error

if TYPE_CHECKING:
    import httpx2
    from google.genai import Client

    from .endpoints import Endpoint

__all__ = ["GeminiProvider"]

_VERSION_SUFFIX = re.compile(r"/(v\d+(?:alpha|beta)?\d*)$")


class GeminiProvider:
    """Streams turns from the Gemini API (``Endpoint(url, key, api="gemini")``)."""

    __slots__ = ("_endpoint",)

    def __init__(self, endpoint: Endpoint) -> None:
        try:
            from google import genai  # noqa: F401
        except ImportError:
            raise InvalidInput(
                "the gemini wire needs the google-genai SDK: pip install 'steadyloop[gemini]'"
            ) from None
        self._endpoint = endpoint

    @property
    def endpoint(self) -> str:
        return self._endpoint.base_url

    async def open_turn(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> _GeminiStream:
        model, contents, config = gemini_request(body)
        client, http = _client(self._endpoint, connect_timeout)
        stream = _GeminiStream(client, http, model, contents, config, self._endpoint.shown_url)
        try:
            await stream.open()
        except BaseException:
            await stream.aclose()
            raise
        return stream


def _client(endpoint: Endpoint, connect_timeout: float | None) -> tuple[Client, httpx2.AsyncClient]:
    import httpx2
    from google import genai
    from google.genai import types

    url = endpoint.base_url
    match = _VERSION_SUFFIX.search(url)
    version = match.group(1) if match else "v1beta"
    base = url[: match.start()] if match else url
    # Our own httpx client: the SDK's aiohttp session subclasses a class aiohttp asks not to be
    # subclassed (a warning per request), and with a client of ours it closes what we close. Its timeout
    # bounds only the connection: the watchdog bounds silence.
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(None, connect=connect_timeout or 30.0))
    options = types.HttpOptions(base_url=base + "/", api_version=version, httpx_async_client=http)
    return genai.Client(api_key=endpoint.key, http_options=options), http


class _GeminiStream:
    __slots__ = ("_chunks", "_client", "_config", "_contents", "_http", "_iterator", "_model", "_where")

    def __init__(
        self,
        client: Client,
        http: httpx2.AsyncClient,
        model: str,
        contents: list[dict[str, Any]],
        config: dict[str, Any],
        where: str,
    ) -> None:
        self._client = client
        self._http = http
        self._model = model
        self._contents = contents
        self._config = config
        self._where = where
        self._iterator: Any = None
        self._chunks = GeminiChunks(endpoint=where, model=model or None)

    async def open(self) -> None:
        try:
            self._iterator = await self._client.aio.models.generate_content_stream(
                model=self._model,
                contents=self._contents,
                config=self._config,  # type: ignore[arg-type]
            )
        except BaseException as exc:
            raise self._error(exc) from None

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        reader = self._chunks
        try:
            async for response in self._iterator:
                yield reader.feed(response.model_dump(mode="json", by_alias=True, exclude_none=True))
        except EndpointError:
            raise
        except Exception as exc:
            raise self._error(exc) from None

    def skipped(self) -> str:
        n = self._chunks.skipped
        return f"{n} part(s) of Gemini chunks of a shape not read" if n else ""

    def close(self) -> Awaitable[None] | None:
        return self.aclose()

    async def aclose(self) -> None:
        try:
            closing = getattr(self._iterator, "aclose", None)
            if closing is not None:
                await closing()
        finally:
            try:
                await self._client.aio.aclose()
            finally:
                await self._http.aclose()

    def _error(self, exc: BaseException) -> EndpointError:
        from google.genai import errors

        if isinstance(exc, EndpointError):
            return exc
        model = self._model or None
        if isinstance(exc, errors.APIError):
            headers: Mapping[str, str] | None
            try:
                headers = dict(exc.response.headers) if exc.response is not None else None
            except Exception:
                headers = None
            body = exc.details if isinstance(exc.details, Mapping | str) else exc.message
            failure = classify_failure(exc.code, body, headers)
            return error_for_failure(failure, endpoint=self._where, model=model)
        if isinstance(exc, Exception) and _is_transport_error(exc):
            return unreachable_error(
                exc, endpoint=self._where, model=model, timed_out=isinstance(exc, TimeoutError)
            )
        raise exc


def _is_transport_error(exc: Exception) -> bool:
    """A failure of the connection, whichever HTTP library the SDK chose (aiohttp when installed)."""
    if isinstance(exc, OSError | TimeoutError):
        return True
    module = type(exc).__module__.split(".", 1)[0]
    return module in ("aiohttp", "httpx", "httpx2", "h11", "httpcore")
