"""The provider seam: how one streamed turn reaches a model, whatever wire format it speaks.

Everything above this seam speaks one language, the chat-completions request the turn layer builds
(``messages``, ``tools``, parameters, the latches' fields) and the chat-completions chunks the stream
assembler reads. A provider does three things:

- turns that request into its own (``open_turn``),
- reads its own stream back as chat-completions chunks, in batches as the socket delivers them
  (``ProviderStream.batches``), with ``DONE`` where the provider said the reply is complete,
- raises only ``EndpointError``s, its failures read into the same kinds as ``classify_failure``'s.

Assembly, thinking fences, the watchdog, negotiation and retry are shared, so a reply behaves the same
whichever provider carried it. Two things the chat-completions chunk has no field for travel in fields of
its own: ``delta.thinking_blocks`` (reasoning a provider signed, ``SignedThinking.to_dict`` entries,
kept whole so they can be replayed unchanged) and, on a request's messages, ``thinking_blocks`` and a
tool result's ``is_error``; the chat-completions provider drops both before sending.

A caller's own provider (a proxy back end, a recorder) goes on the endpoint, ``Endpoint(...,
transport=provider)``, and is used for every request to it, by ``run_turn``, the loop and the Agent
alike. ``provider_from`` (``custom.py``) makes one from a plain async generator of chat-completions chunks.

Besides sending, a wire answers what the layers above ask of any endpoint in its own API's terms
(``seam.py``), and each is found by ``Endpoint.api`` (``registry.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .interceptors import Interceptors

__all__ = ["Provider", "ProviderStream"]


class ProviderStream(Protocol):
    """One open streamed reply, read as chat-completions chunks."""

    def batches(self) -> AsyncIterator[Sequence[Any]]:
        """The reply's chunks, one batch per read of the socket; ``DONE`` marks a complete reply.

        Raises:
            EndpointError: the provider failed mid-stream (its error event, a dropped connection).
        """
        ...

    def skipped(self) -> str:
        """What of the raw stream could not be read (empty when everything could), for one notice."""
        ...

    def close(self) -> Awaitable[None] | None:
        """Close at once, so the server stops generating; what is returned must still be awaited."""
        ...


@runtime_checkable
class Provider(Protocol):
    """Sends streamed turns to one endpoint in its own wire format."""

    @property
    def endpoint(self) -> str:
        """The endpoint's base URL, for errors and events."""
        ...

    async def open_turn(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        interceptors: Interceptors | None = None,
    ) -> ProviderStream:
        """Send the chat-completions-shaped ``body`` as this provider's request; return once it succeeded.

        ``interceptors`` (passed only when the host set ``on_response`` or ``on_sse_event``): the response's
        status and headers go to ``on_response`` before its body is read, whatever the status, and each
        event as received to ``on_sse_event``.

        Raises:
            EndpointError: the provider refused the request or could not be reached.
            InterceptorFailed: one of ``interceptors`` raised.
        """
        ...
