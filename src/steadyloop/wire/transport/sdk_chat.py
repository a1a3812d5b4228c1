"""Streamed turns sent through the official SDK's ``AsyncOpenAI`` client (its auth, headers, transport).

Imported only when something sends through the SDK: loading it takes about a third of a second.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from contextvars import ContextVar
from typing import Any, NoReturn

import httpx2
import openai
from openai import AsyncOpenAI

from ...errors import EndpointError
from ..interceptors import ResponseInfo, ResponseInterceptor, observe
from ..typed_errors import error_from_exception
from .chat_client import ChatStream
from .sending import request_sent
from .stream_body import settle

__all__ = ["SdkChatClient", "open_chat_stream", "trace_connections"]


class _ConnectionTrace:
    """httpx2's trace of one request (its ``trace`` extension): whether a connection was opened for it."""

    __slots__ = ("connected", "traced")

    def __init__(self) -> None:
        self.traced = False
        self.connected = False

    @property
    def reused(self) -> bool:
        """Whether the request went on a connection taken from the pool."""
        return self.traced and not self.connected

    async def __call__(self, name: str, _info: Mapping[str, Any]) -> None:
        self.traced = True
        if ".connect_" in name:  # connect_tcp, connect_unix_socket
            self.connected = True
        elif name.endswith(".send_request_headers.complete"):  # http11. or http2.
            request_sent()


# The trace of the request ``open_stream`` is sending in this task, for the client's request hook to attach.
_current_trace: ContextVar[_ConnectionTrace | None] = ContextVar("steadyloop_connection_trace", default=None)


async def trace_connections(request: httpx2.Request) -> None:
    """An httpx2 ``request`` event hook that lets ``SdkChatClient`` tell a pooled connection from a new one.

    The pool's SDK clients carry it; a client built without it never has a request sent again.
    """
    trace = _current_trace.get()
    if trace is not None:
        request.extensions["trace"] = trace


def _closed_unanswered(exc: BaseException) -> bool:
    """Whether the connection was closed under the request before any answer came (see aiohttp_chat)."""
    cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
    if isinstance(cause, httpx2.RemoteProtocolError):
        return "without sending a response" in str(cause)  # not a response cut or malformed
    return isinstance(cause, httpx2.WriteError | httpx2.ReadError)


async def open_chat_stream(
    client: AsyncOpenAI, body: Mapping[str, Any], *, connect_timeout: float | None
) -> httpx2.Response:
    """Send a streamed chat-completions request and return the response with its body unread.

    The SDK's read timeout is off: a live stream is watched by the caller's watchdog instead, which
    knows the difference between a model still thinking and a server that went away.
    """
    timeout = httpx2.Timeout(None, connect=connect_timeout)
    response: httpx2.Response = await client.post(
        "/chat/completions",
        cast_to=httpx2.Response,
        body=dict(body),
        options={"timeout": timeout, "max_retries": 0, "headers": {"Accept": "text/event-stream"}},
        stream=True,
    )
    return response


class _SdkStream:
    __slots__ = ("_endpoint", "_key", "_model", "_response")

    def __init__(self, response: httpx2.Response, endpoint: str, model: str | None, key: str) -> None:
        self._response = response
        self._endpoint = endpoint
        self._model = model
        self._key = key

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        response = self._response
        reads = response.aiter_bytes()

        async def read_more() -> bytes:
            return await anext(reads, b"")

        try:
            data = await read_more()
            if not data:
                return
            # The first read tells a stream from a page or a whole JSON answer (see stream_body).
            data, ended = await settle(
                data,
                read_more,
                response.headers.get("content-type", ""),
                status=response.status_code,
                endpoint=self._endpoint,
                model=self._model,
                secrets=(self._key,),
            )
            yield data
            if ended:
                return
            async for data in reads:
                yield data
        except (openai.OpenAIError, httpx2.HTTPError, OSError) as exc:
            raise error_from_exception(exc, endpoint=self._endpoint, model=self._model) from exc

    def close(self) -> Awaitable[None]:
        return self._response.aclose()


class SdkChatClient:
    """Sends through the official SDK's client (its auth, headers and transport)."""

    __slots__ = ("_endpoint", "sdk")

    def __init__(self, sdk: AsyncOpenAI) -> None:
        self.sdk = sdk
        self._endpoint = str(sdk.base_url).rstrip("/")

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def open_stream(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        on_response: ResponseInterceptor | None = None,
    ) -> ChatStream:
        model = body.get("model") if isinstance(body.get("model"), str) else None
        trace = _ConnectionTrace()
        try:
            response = await self._send(body, connect_timeout, trace)
        except EndpointError:
            raise
        except (openai.OpenAIError, httpx2.HTTPError, OSError) as exc:
            if not (trace.reused and _closed_unanswered(exc)):
                await self._fail(exc, model, on_response, connect_timeout)
            # A kept-alive connection the server closed in the pool, nothing answered: sent again at once,
            # once, as the aiohttp transport does (see there). A new connection that fails is a failure.
            try:
                response = await self._send(body, connect_timeout, _ConnectionTrace())
            except EndpointError:
                raise
            except (openai.OpenAIError, httpx2.HTTPError, OSError) as again:
                await self._fail(again, model, on_response, connect_timeout)
        if on_response is not None:
            try:
                await self._tell(on_response, response, model)
            except BaseException:
                await response.aclose()
                raise
        return _SdkStream(response, self._endpoint, model, self.sdk.api_key)

    async def _send(
        self, body: Mapping[str, Any], connect_timeout: float | None, trace: _ConnectionTrace
    ) -> httpx2.Response:
        token = _current_trace.set(trace)
        try:
            return await open_chat_stream(self.sdk, body, connect_timeout=connect_timeout)
        finally:
            _current_trace.reset(token)

    async def _fail(
        self,
        exc: openai.OpenAIError | httpx2.HTTPError | OSError,
        model: str | None,
        on_response: ResponseInterceptor | None,
        connect_timeout: float | None,
    ) -> NoReturn:
        error = error_from_exception(exc, endpoint=self._endpoint, model=model, timeout_s=connect_timeout)
        if on_response is not None and isinstance(exc, openai.APIStatusError):
            # The SDK raised for the status: the response it raised for is still the response.
            await self._tell(on_response, exc.response, model)
        raise error from exc

    async def _tell(self, hook: ResponseInterceptor, response: httpx2.Response, model: str | None) -> None:
        info = ResponseInfo(response.status_code, dict(response.headers), self._endpoint, model)
        await observe("on_response", hook, info)

    async def aclose(self) -> None:
        """Nothing: the SDK client belongs to whoever built it (the pool, or the caller)."""
