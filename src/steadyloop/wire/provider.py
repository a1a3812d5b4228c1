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
alike. ``provider_from`` makes one from a plain async generator of chat-completions chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from .openai_chat import DONE, SSEDecoder, unreachable_error

if TYPE_CHECKING:
    from .chat_client import ChatClient, ChatStream
    from .endpoints import Endpoint

__all__ = [
    "OpenAIChatProvider",
    "Provider",
    "ProviderStream",
    "StreamFunction",
    "provider_for",
    "provider_from",
]


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

    async def open_turn(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> ProviderStream:
        """Send the chat-completions-shaped ``body`` as this provider's request; return once it succeeded.

        Raises:
            EndpointError: the provider refused the request or could not be reached.
        """
        ...


class OpenAIChatProvider:
    """The chat-completions wire: the body goes out as it is, the SSE comes back as it is."""

    __slots__ = ("_client",)

    def __init__(self, client: ChatClient) -> None:
        self._client = client

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    async def open_turn(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> ProviderStream:
        return _SSEStream(
            await self._client.open_stream(_without_signed_thinking(body), connect_timeout=connect_timeout)
        )


class _SSEStream:
    __slots__ = ("_decoder", "_response")

    def __init__(self, response: ChatStream) -> None:
        self._response = response
        self._decoder = SSEDecoder()

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        decoder = self._decoder
        async for data in self._response.aiter_bytes():
            events = decoder.feed(data)
            if events:
                yield events
        tail = decoder.flush()
        if tail:
            yield tail

    def skipped(self) -> str:
        decoder = self._decoder
        if not decoder.unreadable:
            return ""
        return f"{decoder.unreadable} event(s) that were not JSON (first: {decoder.first_unreadable!r})"

    def close(self) -> Awaitable[None] | None:
        return self._response.close()


# Fields the transcript carries for native providers that no chat-completions server reads.
_NATIVE_ONLY = ("thinking_blocks", "is_error")


def _without_signed_thinking(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The body without what only native providers read: signed thinking, a result's error flag.

    A transcript that moved from Anthropic to a chat-completions server still carries them; no
    chat-completions server reads them and a strict one refuses the unknown fields.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, Mapping) and ("thinking_blocks" in m or "is_error" in m) for m in messages
    ):
        return body
    out = dict(body)
    out["messages"] = [
        {k: v for k, v in m.items() if k not in _NATIVE_ONLY} if isinstance(m, Mapping) else m
        for m in messages
    ]
    return out


def provider_for(endpoint: Endpoint) -> Provider:
    """The provider that sends this endpoint's turns: the caller's own, else the one its ``api`` names.

    Raises:
        InvalidInput: the ``api`` needs an extra that is not installed (the message names the install).
    """
    if endpoint.transport is not None:
        return endpoint.transport
    if endpoint.api == "anthropic":
        from .anthropic_messages import AnthropicProvider

        return AnthropicProvider(endpoint)
    if endpoint.api == "gemini":
        from .gemini_content import GeminiProvider

        return GeminiProvider(endpoint)
    from .clients import get_chat_client

    return OpenAIChatProvider(get_chat_client(endpoint))


StreamFunction: TypeAlias = Callable[[Mapping[str, Any]], AsyncIterator[Any]]
"""An async generator function: given the chat-completions body, it yields chat-completions chunks."""


def provider_from(stream: StreamFunction, *, name: str = "custom") -> Provider:
    """A provider made of an async generator function, for a back end of the caller's own::

        async def backend(body):
            async for chunk in my_proxy.stream(body):
                yield chunk  # {"choices": [{"delta": {"content": "..."}}]} and so on

        agent = sl.Agent(sl.Endpoint("http://proxy.invalid", transport=sl.provider_from(backend)), "model")

    The reply is complete when the generator returns. It raises ``EndpointError`` for failures the runtime
    should read (retry, overflow recovery); an ``OSError`` or ``TimeoutError`` reads as a dropped connection;
    anything else is the caller's bug and goes through unchanged.

    Args:
        stream: the generator function.
        name: what errors and events call the endpoint.
    """
    return _FunctionProvider(stream, name)


class _FunctionProvider:
    __slots__ = ("_name", "_stream")

    def __init__(self, stream: StreamFunction, name: str) -> None:
        self._stream = stream
        self._name = name

    @property
    def endpoint(self) -> str:
        return self._name

    async def open_turn(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> ProviderStream:
        return _FunctionStream(self._stream(body), self._name, body)


class _FunctionStream:
    __slots__ = ("_chunks", "_model", "_name")

    def __init__(self, chunks: AsyncIterator[Any], name: str, body: Mapping[str, Any]) -> None:
        self._chunks = chunks
        self._name = name
        model = body.get("model")
        self._model = model if isinstance(model, str) else None

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        try:
            async for chunk in self._chunks:
                yield [chunk]
        except (OSError, TimeoutError) as exc:
            raise unreachable_error(exc, endpoint=self._name, model=self._model) from exc
        yield [DONE]

    def skipped(self) -> str:
        return ""

    def close(self) -> Awaitable[None] | None:
        closing = getattr(self._chunks, "aclose", None)
        result: Awaitable[None] | None = closing() if closing is not None else None
        return result
