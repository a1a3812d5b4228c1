"""The Anthropic Messages provider: sends through the official ``anthropic`` SDK, reads its stream events.

The request and the events are translated in ``shape`` and ``events`` (sans I/O); here is only the sending:
one pooled SDK client per endpoint (reused across requests, closed with the pool; ``lease_anthropic``), no
SDK retries (``run_turn`` retries), failures read into the same kinds as every other wire's. A reply that stops with ``pause_turn`` is continued at once
with what it said so far, into the same turn.

Needs ``pip install 'steadyloop[anthropic]'``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import EndpointError, EndpointUnreadable, InvalidInput, SteadyloopError
from ..failures import classify_failure
from ..interceptors import Interceptors, ResponseTap, tell_sse_event
from ..transport.clients import lease_native
from ..typed_errors import error_for_failure, unreachable_error
from .events import AnthropicEvents
from .shape import anthropic_request

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from ..endpoints import Endpoint

__all__ = ["AnthropicProvider", "lease_anthropic"]

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

    async def open_turn(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        interceptors: Interceptors | None = None,
    ) -> _AnthropicStream:
        request = anthropic_request(body)
        where = self._endpoint.shown_url
        tap = None
        if interceptors is not None and interceptors.on_response is not None:
            tap = ResponseTap(where, str(request.get("model") or "") or None)
        import httpx2

        client, done = _client(self._endpoint, tap)
        # The watchdog bounds silence; the SDK bounds only the connection.
        timeout = httpx2.Timeout(None, connect=connect_timeout or 30.0)
        stream = _AnthropicStream(client, done, request, timeout, where, interceptors, tap)
        try:
            await stream.open()
        except BaseException:
            await stream.aclose()
            raise
        return stream


class _Pooled:
    """An SDK client kept in the pool for one endpoint; each request brings its own timeout."""

    __slots__ = ("client",)

    def __init__(self, client: AsyncAnthropic) -> None:
        self.client = client

    async def aclose(self) -> None:
        await self.client.close()


def lease_anthropic(endpoint: Endpoint) -> tuple[AsyncAnthropic, Callable[[], None]]:
    """The endpoint's pooled SDK client (no SDK retries) and the function that gives its lease back."""
    import httpx2
    from anthropic import AsyncAnthropic

    def build() -> _Pooled:
        base = endpoint.base_url.removesuffix("/v1")
        timeout = httpx2.Timeout(None, connect=30.0)
        return _Pooled(AsyncAnthropic(api_key=endpoint.key, base_url=base, timeout=timeout, max_retries=0))

    pooled, release = lease_native(endpoint, "anthropic-sdk", build)
    return pooled.client, release


def _client(
    endpoint: Endpoint, tap: ResponseTap | None
) -> tuple[AsyncAnthropic, Callable[[], Awaitable[None]]]:
    """The client a request goes out on, and what to do once its stream is closed."""
    if tap is None:
        client, release = lease_anthropic(endpoint)

        async def give_back() -> None:
            release()

        return client, give_back
    import httpx2
    from anthropic import AsyncAnthropic

    # A client of its own when on_response must see the responses: its event hook notes this request's.
    base = endpoint.base_url.removesuffix("/v1")
    timeout = httpx2.Timeout(None, connect=30.0)
    http = httpx2.AsyncClient(timeout=timeout, event_hooks={"response": [tap]})
    own = AsyncAnthropic(
        api_key=endpoint.key, base_url=base, timeout=timeout, max_retries=0, http_client=http
    )
    return own, own.close


class _AnthropicStream:
    __slots__ = (
        "_client",
        "_done",
        "_events",
        "_hooks",
        "_request",
        "_stream",
        "_tap",
        "_timeout",
        "_where",
    )

    def __init__(
        self,
        client: AsyncAnthropic,
        done: Callable[[], Awaitable[None]],
        request: dict[str, Any],
        timeout: Any,
        where: str,
        hooks: Interceptors | None = None,
        tap: ResponseTap | None = None,
    ) -> None:
        self._client = client
        self._done: Callable[[], Awaitable[None]] | None = done
        self._request = request
        self._timeout = timeout
        self._where = where
        self._hooks = hooks
        self._tap = tap
        self._stream: Any = None
        self._events = AnthropicEvents(endpoint=where, model=str(request.get("model") or "") or None)

    async def open(self) -> None:
        try:
            self._stream = await self._client.messages.create(
                **self._request, stream=True, timeout=self._timeout
            )
        except SteadyloopError:
            raise
        except Exception as exc:
            error = self._error(exc)
            if self._tap is not None:
                await self._tap.tell(self._hooks)
            raise error from None
        if self._tap is not None:
            await self._tap.tell(self._hooks)

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        events = self._events
        for _ in range(MAX_CONTINUATIONS + 1):
            try:
                async for event in self._stream:
                    # Unknown block types (a beta's) are read as they came; the SDK's typed model of them is
                    # a guess, and re-serialising the guess is not an error.
                    payload = event.to_dict(mode="json", warnings=False)
                    if self._hooks is not None and self._hooks.on_sse_event is not None:
                        await tell_sse_event(self._hooks, str(payload.get("type", "")), json.dumps(payload))
                    chunks = events.feed(payload)
                    # An empty batch still says the stream is alive (a ping, a signature).
                    yield chunks
            except SteadyloopError:  # ours already: an in-stream failure, an interceptor that raised
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
        return self.aclose()

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        done, self._done = self._done, None
        try:
            if stream is not None:
                await stream.close()
        finally:
            if done is not None:
                await done()

    def _error(self, exc: Exception) -> EndpointError:
        """Whatever the SDK raised, as a typed error (total): cancellation never comes here."""
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
        if isinstance(
            exc, anthropic.APIError | httpx2.HTTPError | httpx2.InvalidURL | OSError | TimeoutError
        ):
            # Covers a stream cut mid-reply too: the transport's error comes through the SDK unwrapped.
            timed_out = isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException)
            return unreachable_error(exc, endpoint=self._where, model=model, timed_out=timed_out)
        # The SDK's own decoding gave up (an event whose data is no JSON raises ``JSONDecodeError``), or
        # the client refused something on the way (a header it cannot encode).
        return EndpointUnreadable(
            f"the Anthropic client failed reading {self._where}: {type(exc).__name__}: {exc}"[:2000],
            endpoint=self._where,
            model=model,
        )
