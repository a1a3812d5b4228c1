"""A provider of the caller's own, made of a plain async generator of chat-completions chunks.

A proxy back end, a recorder or an in-process model goes on the endpoint (``Endpoint(...,
transport=provider_from(backend))``) and is used for every request to it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from .interceptors import Interceptors, tell_sse_event
from .provider import Provider, ProviderStream
from .sse import DONE
from .typed_errors import unreachable_error

__all__ = ["StreamFunction", "provider_from"]


StreamFunction: TypeAlias = Callable[[Mapping[str, Any]], AsyncIterator[Any]]
"""An async generator function: given the chat-completions body, it yields chat-completions chunks."""


def provider_from(stream: StreamFunction, *, name: str = "custom") -> Provider:
    """A provider made of an async generator function, for a back end of the caller's own::

        async def backend(body):
            async for chunk in my_proxy.stream(body):
                yield chunk  # {"choices": [{"delta": {"content": "..."}}]} and so on

        agent = sl.Agent(sl.Endpoint("http://proxy.invalid", transport=provider_from(backend)), "model")

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
