"""The Anthropic Messages provider: sends through the official ``anthropic`` SDK, reads its stream events.

The request and the events are translated in ``anthropic_shape`` and ``anthropic_events`` (sans I/O); here is only the sending:
one SDK client per request (closed with its stream), no SDK retries (``run_turn`` retries), failures read
into the same kinds as every other wire's. A reply that stops with ``pause_turn`` is continued at once
with what it said so far, into the same turn.

Needs ``pip install 'steadyloop[anthropic]'``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import EndpointError, InvalidInput
from .anthropic_events import AnthropicEvents
from .anthropic_shape import anthropic_request
from .failures import classify_failure
from .openai_chat import error_for_failure, unreachable_error

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from .endpoints import Endpoint

__all__ = ["AnthropicProvider"]

#: How many times one turn continues a paused reply before it gives the reply back as it is.
MAX_CONTINUATIONS = 8

# The HTTP status each Anthropic error type is sent with, for the same error arriving inside a stream.
_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicProvider:
    """Streams turns from an Anthropic Messages endpoint (``Endpoint(url, key, api="anthropic")``).

    The base URL may end in ``/v1`` or not: ``https://api.anthropic.com`` and
    ``https://api.anthropic.com/v1`` are the same endpoint.
    """

    __slots__ = ("_endpoint",)

    def __init__(self, endpoint: Endpoint) -> None:
        try:
            import anthropic  # noqa: F401
        except ImportError:
            raise InvalidInput(
                "the anthropic wire needs the anthropic SDK: pip install 'steadyloop[anthropic]'"
            ) from None
        self._endpoint = endpoint

    @property
    def endpoint(self) -> str:
        return self._endpoint.base_url

    async def open_turn(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> _AnthropicStream:
        request = anthropic_request(body)
        client = _client(self._endpoint, connect_timeout)
        stream = _AnthropicStream(client, request, self._endpoint.shown_url)
        try:
            await stream.open()
        except BaseException:
            await client.close()
            raise
        return stream


def _client(endpoint: Endpoint, connect_timeout: float | None) -> AsyncAnthropic:
    import httpx2
    from anthropic import AsyncAnthropic

    base = endpoint.base_url.removesuffix("/v1")
    # The watchdog bounds silence; the SDK bounds only the connection.
    timeout = httpx2.Timeout(None, connect=connect_timeout or 30.0)
    return AsyncAnthropic(api_key=endpoint.key, base_url=base, timeout=timeout, max_retries=0)


class _AnthropicStream:
    __slots__ = ("_client", "_events", "_request", "_stream", "_where")

    def __init__(self, client: AsyncAnthropic, request: dict[str, Any], where: str) -> None:
        self._client = client
        self._request = request
        self._where = where
        self._stream: Any = None
        self._events = AnthropicEvents(endpoint=where, model=str(request.get("model") or "") or None)

    async def open(self) -> None:
        try:
            self._stream = await self._client.messages.create(**self._request, stream=True)
        except BaseException as exc:
            raise self._error(exc) from None

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        events = self._events
        for _ in range(MAX_CONTINUATIONS + 1):
            try:
                async for event in self._stream:
                    # Unknown block types (a beta's) are read as they came; the SDK's typed model of them is
                    # a guess, and re-serialising the guess is not an error.
                    chunks = events.feed(event.to_dict(mode="json", warnings=False))
                    # An empty batch still says the stream is alive (a ping, a signature).
                    yield chunks
            except EndpointError:
                raise
            except Exception as exc:
                raise self._error(exc) from None
            if not events.paused:
                return
            # pause_turn: the reply so far goes back as the assistant's turn, and the model carries on.
            await self._stream.close()
            request = dict(self._request)
            request["messages"] = [*request["messages"], {"role": "assistant", "content": events.content}]
            self._request = request
            await self.open()

    def skipped(self) -> str:
        n = self._events.skipped
        return f"{n} Anthropic event(s) of a shape not read" if n else ""

    def close(self) -> Awaitable[None] | None:
        return self._aclose()

    async def _aclose(self) -> None:
        try:
            if self._stream is not None:
                await self._stream.close()
        finally:
            await self._client.close()

    def _error(self, exc: BaseException) -> EndpointError:
        import anthropic
        import httpx2

        if isinstance(exc, EndpointError):
            return exc
        model = self._events.model
        if isinstance(exc, anthropic.APIStatusError):
            body = exc.body
            status: int | None = exc.status_code
            if status == 200:
                # An error event inside a stream that began with a success: the type says what it was.
                error = body.get("error") if isinstance(body, Mapping) else None
                kind = error.get("type") if isinstance(error, Mapping) else None
                status = _STATUS_OF_TYPE.get(kind) if isinstance(kind, str) else None
            try:
                headers: Mapping[str, str] | None = dict(exc.response.headers)
            except Exception:
                headers = None
            words = body if isinstance(body, str | Mapping) else exc.message
            failure = classify_failure(status, words, headers)
            prefix = "in the stream: " if exc.status_code == 200 else ""
            return error_for_failure(failure, endpoint=self._where, model=model, prefix=prefix)
        if isinstance(exc, anthropic.APIError | httpx2.HTTPError | OSError | TimeoutError):
            # Covers a stream cut mid-reply too: the transport's error comes through the SDK unwrapped.
            timed_out = isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException)
            return unreachable_error(exc, endpoint=self._where, model=model, timed_out=timed_out)
        raise exc
