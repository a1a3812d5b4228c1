"""How a streamed chat-completions request is sent: one small interface, one implementation per transport.

``stream_turn`` needs three things of a transport: open a stream for a body, hand back its bytes as they
arrive, and close it at once. Everything else (SSE, assembly, the watchdog) is shared, so every transport
reads a stream the same way. Each implementation raises only ``EndpointError``s, whatever its library
raises, so a caller never needs to know which one sent the request.

- ``AiohttpChatClient`` (``steadyloop.wire.transport.aiohttp_chat``, the default) sends straight through aiohttp:
  the SDK's request building costs more per request than reading the whole stream, and httpx2's pool
  slows down with hundreds of waiting requests, which matters to a process running many agents at once.
- ``SdkChatClient`` (``steadyloop.wire.transport.sdk_chat``, ``configure_clients(transport="httpx2")``) sends through
  the official SDK's ``AsyncOpenAI`` over httpx2.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..interceptors import ResponseInterceptor

__all__ = ["ChatClient", "ChatStream"]


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

    async def open_stream(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        on_response: ResponseInterceptor | None = None,
    ) -> ChatStream:
        """Send ``body`` and return the response once its headers say it succeeded.

        ``on_response`` is told the status and headers of the response, whatever its status, before its
        body is read (an ``InterceptorFailed`` it raises is raised from here, the response closed).

        Raises:
            EndpointError: the endpoint refused (its status and words classified), or could not be reached.
        """
        ...

    async def aclose(self) -> None:
        """Release what this client holds of its own (its connection pool)."""
        ...
