"""How a streamed chat-completions request is sent: one small interface, one implementation per transport.

``stream_turn`` needs three things of a transport: open a stream for a body, hand back its bytes as they
arrive, and close it at once. Everything else (SSE, assembly, the watchdog) is shared, so every transport
reads a stream the same way. Each implementation raises only ``EndpointError``s, whatever its library
raises, so a caller never needs to know which one sent the request.

- ``SdkChatClient`` sends through the official SDK's ``AsyncOpenAI`` (httpx2 by default).
- ``AiohttpChatClient`` (``steadyloop.wire.aiohttp_chat``) sends straight through aiohttp: the SDK's request
  building costs more per request than reading the whole stream, and httpx2's pool slows down with hundreds
  of waiting requests, which matters to a process running many agents at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, Protocol

import httpx2
import openai
from openai import AsyncOpenAI

from ..errors import EndpointError
from .openai_chat import error_from_exception, open_chat_stream

__all__ = ["ChatClient", "ChatStream", "SdkChatClient", "chat_client_for"]


class ChatStream(Protocol):
    """An open streamed response whose status was a success."""

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive; raises ``EndpointError`` when the connection fails."""
        ...

    def close(self) -> Awaitable[None] | None:
        """Close at once; the server sees the connection go and stops generating.

        Returns what must still be awaited to finish closing, or ``None`` when nothing is left: a caller
        that is being cancelled shields it, and a transport that closes synchronously costs no task.
        """
        ...


class ChatClient(Protocol):
    """Opens streamed chat-completions requests to one endpoint."""

    @property
    def endpoint(self) -> str:
        """The endpoint's base URL, for errors and events."""
        ...

    async def open_stream(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> ChatStream:
        """Send ``body`` and return the response once its headers say it succeeded.

        Raises:
            EndpointError: the endpoint refused (its status and words classified), or could not be reached.
        """
        ...

    async def aclose(self) -> None:
        """Release what this client holds of its own (its connection pool)."""
        ...


class _SdkStream:
    __slots__ = ("_endpoint", "_model", "_response")

    def __init__(self, response: httpx2.Response, endpoint: str, model: str | None) -> None:
        self._response = response
        self._endpoint = endpoint
        self._model = model

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._response.aiter_bytes():
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

    async def open_stream(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> ChatStream:
        model = body.get("model") if isinstance(body.get("model"), str) else None
        try:
            response = await open_chat_stream(self.sdk, body, connect_timeout=connect_timeout)
        except EndpointError:
            raise
        except (openai.OpenAIError, httpx2.HTTPError, OSError) as exc:
            raise error_from_exception(exc, endpoint=self._endpoint, model=model) from exc
        return _SdkStream(response, self._endpoint, model)

    async def aclose(self) -> None:
        """Nothing: the SDK client belongs to whoever built it (the pool, or the caller)."""


def chat_client_for(client: AsyncOpenAI | ChatClient) -> ChatClient:
    """A ``ChatClient`` for what a caller handed over: an SDK client is wrapped, a chat client kept."""
    if isinstance(client, AsyncOpenAI):
        return SdkChatClient(client)
    return client
