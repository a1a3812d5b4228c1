"""The chat-completions provider: the body goes out as it is, the SSE comes back as it is.

What chat completions has no field for is taken out before sending: signed thinking and a tool result's
error flag on the messages (kept for the native wires that read them), and the fields other wires read of
their own (in a failover chain one request is built for every candidate).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..interceptors import Interceptors, SseEvent, SseEventInterceptor, observe
from ..provider import ProviderStream
from ..sse import SSEDecoder

if TYPE_CHECKING:
    from ..transport.chat_client import ChatClient, ChatStream

__all__ = ["OpenAIChatProvider", "chat_request"]


class OpenAIChatProvider:
    """The chat-completions wire: the body goes out as it is, the SSE comes back as it is.

    Args:
        client: what sends the request.
        others: request fields other wires read of their own, taken out before sending.
    """

    __slots__ = ("_client", "_others")

    def __init__(self, client: ChatClient, others: frozenset[str] = frozenset()) -> None:
        self._client = client
        self._others = others

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
        sent = chat_request(body, self._others)
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


# Fields the transcript carries for native providers that no chat-completions server reads.
_NATIVE_ONLY = ("thinking_blocks", "is_error")


def chat_request(body: Mapping[str, Any], others: frozenset[str]) -> Mapping[str, Any]:
    """The body without what only native providers read: their own settings (``others``: in a failover
    chain one request is built for every candidate, so it carries the Anthropic beta names or Gemini's
    own settings meant for one of them), signed thinking, a result's error flag.

    A transcript that moved from Anthropic to a chat-completions server still carries them, and a chain's
    request carries every candidate's settings; no chat-completions server reads them and a strict one
    refuses the unknown fields.
    """
    if not others.isdisjoint(body):
        body = {k: v for k, v in body.items() if k not in others}
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
