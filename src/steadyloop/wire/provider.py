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

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from .anthropic.shape import ANTHROPIC_SETTINGS
from .gemini.shape import GEMINI_SETTINGS
from .interceptors import Interceptors, ResponseInfo, SseEvent, SseEventInterceptor, observe
from .sse import DONE, SSEDecoder
from .typed_errors import unreachable_error

if TYPE_CHECKING:
    from .endpoints import Endpoint
    from .transport.chat_client import ChatClient, ChatStream

__all__ = [
    "OpenAIChatProvider",
    "Provider",
    "ProviderStream",
    "ResponseTap",
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


class OpenAIChatProvider:
    """The chat-completions wire: the body goes out as it is, the SSE comes back as it is."""

    __slots__ = ("_client",)

    def __init__(self, client: ChatClient) -> None:
        self._client = client

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    async def open_turn(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        interceptors: Interceptors | None = None,
    ) -> ProviderStream:
        sent = _chat_request(body)
        if interceptors is None or interceptors.on_response is None:
            response = await self._client.open_stream(sent, connect_timeout=connect_timeout)
        else:
            response = await self._client.open_stream(
                sent, connect_timeout=connect_timeout, on_response=interceptors.on_response
            )
        return _SSEStream(response, interceptors.on_sse_event if interceptors is not None else None)


class _SSEStream:
    __slots__ = ("_decoder", "_on_sse_event", "_response")

    def __init__(self, response: ChatStream, on_sse_event: SseEventInterceptor | None = None) -> None:
        self._response = response
        self._on_sse_event = on_sse_event
        self._decoder = SSEDecoder(keep_raw=on_sse_event is not None)

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        decoder = self._decoder
        hook = self._on_sse_event
        async for data in self._response.aiter_bytes():
            events = decoder.feed(data)
            if hook is not None:
                await _tell_raw(hook, decoder)
            if events:
                yield events
        tail = decoder.flush()
        if hook is not None:
            await _tell_raw(hook, decoder)
        if tail:
            yield tail

    def skipped(self) -> str:
        decoder = self._decoder
        if not decoder.unreadable:
            return ""
        return f"{decoder.unreadable} event(s) that were not JSON (first: {decoder.first_unreadable!r})"

    def close(self) -> Awaitable[None] | None:
        return self._response.close()


async def _tell_raw(hook: SseEventInterceptor, decoder: SSEDecoder) -> None:
    """Hand ``on_sse_event`` the events the last read completed, as they were received."""
    raw = decoder.raw
    if not raw:
        return
    taken = list(raw)
    raw.clear()
    for name, data in taken:
        await observe(
            "on_sse_event", hook, SseEvent(data.decode("utf-8", "replace"), name.decode("utf-8", "replace"))
        )


class ResponseTap:
    """Notes the status and headers of responses an SDK's HTTP client receives (an ``httpx2`` response
    event hook), so ``on_response`` can be told of them once the SDK call returns or fails.

    The host's hook is not called from inside the SDK: an exception raised there would come back wrapped
    as a connection error and be retried, where an interceptor that fails must end the turn.
    """

    __slots__ = ("_endpoint", "_model", "_seen")

    def __init__(self, endpoint: str, model: str | None) -> None:
        self._endpoint = endpoint
        self._model = model
        self._seen: list[ResponseInfo] = []

    async def __call__(self, response: Any) -> None:
        self._seen.append(
            ResponseInfo(
                status=int(response.status_code),
                headers={str(k): str(v) for k, v in response.headers.items()},
                endpoint=self._endpoint,
                model=self._model,
            )
        )

    async def tell(self, interceptors: Interceptors | None) -> None:
        """Tell ``on_response`` of every response noted since the last call.

        Raises:
            InterceptorFailed: it raised.
        """
        seen = self._seen
        if not seen:
            return
        taken = list(seen)
        seen.clear()
        hook = interceptors.on_response if interceptors is not None else None
        if hook is None:
            return
        for info in taken:
            await observe("on_response", hook, info)


async def tell_sse_event(interceptors: Interceptors | None, event: str, data: str) -> None:
    """Tell ``on_sse_event`` of one event a native SDK read (its type and its data as JSON text).

    Raises:
        InterceptorFailed: it raised.
    """
    if interceptors is not None and interceptors.on_sse_event is not None:
        await observe("on_sse_event", interceptors.on_sse_event, SseEvent(data, event))


# Fields the transcript carries for native providers that no chat-completions server reads.
_NATIVE_ONLY = ("thinking_blocks", "is_error")
# Request fields only a native wire reads: in a failover chain one request is built for every candidate,
# and the Anthropic beta names or Gemini's own settings meant for one are no chat-completions field.
_NATIVE_FIELDS = ANTHROPIC_SETTINGS | GEMINI_SETTINGS


def _chat_request(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The body without what only native providers read: their own settings, signed thinking, a result's
    error flag.

    A transcript that moved from Anthropic to a chat-completions server still carries them, and a chain's
    request carries every candidate's settings; no chat-completions server reads them and a strict one
    refuses the unknown fields.
    """
    if not _NATIVE_FIELDS.isdisjoint(body):
        body = {k: v for k, v in body.items() if k not in _NATIVE_FIELDS}
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
        from .anthropic.provider import AnthropicProvider

        return AnthropicProvider(endpoint)
    if endpoint.api == "gemini":
        from .gemini.provider import GeminiProvider

        return GeminiProvider(endpoint)
    from .transport.clients import get_chat_client

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

    async def open_turn(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        interceptors: Interceptors | None = None,
    ) -> ProviderStream:
        # A generator of chunks has no HTTP response for on_response; on_sse_event sees each chunk as JSON.
        return _FunctionStream(self._stream(body), self._name, body, interceptors)


class _FunctionStream:
    __slots__ = ("_chunks", "_hooks", "_model", "_name")

    def __init__(
        self,
        chunks: AsyncIterator[Any],
        name: str,
        body: Mapping[str, Any],
        hooks: Interceptors | None = None,
    ) -> None:
        self._chunks = chunks
        self._name = name
        self._hooks = hooks if hooks is not None and hooks.on_sse_event is not None else None
        model = body.get("model")
        self._model = model if isinstance(model, str) else None

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        hooks = self._hooks
        try:
            async for chunk in self._chunks:
                if hooks is not None:
                    await tell_sse_event(hooks, "", json.dumps(chunk, default=repr))
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
