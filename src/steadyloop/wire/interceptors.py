"""The host's interceptors: code that sees a request on its way out and its answer on its way in.

``Interceptors`` holds four optional callables, each called at one point:

- ``on_payload`` sees the request body just before it is sent (after the latches were applied), once per
  attempt, retries and downgrades included; it may return a replacement body, or ``None`` to send it as it
  is. It may be async.
- ``on_response`` is told each response's status and headers as soon as they arrive, error statuses
  included, before the body is read. It may be async.
- ``on_sse_event`` is told each server-sent event as it was received (its ``event`` name and raw ``data``
  text, ``[DONE]`` and unreadable ones too), before anything reads it. It may be async. On the native
  Anthropic and Gemini wires the SDK parses the stream, so the event is told as the SDK read it (its type,
  and its payload as JSON text); a ``provider_from`` back end tells each chunk it yields as JSON.
- ``on_assistant_event`` sees each streamed assistant event before any listener does (the loop's
  ``MessageStart``, ``MessageUpdate`` and ``MessageEnd`` of assistant messages; ``run_turn``'s text and
  reasoning pieces as ``MessageUpdate``). It is a plain function: it returns ``None`` to let the event
  through, another ``MessageUpdate`` to show instead, or ``DROP`` to show nothing. Only updates may be
  replaced or dropped: a message's start and end are the record of the transcript.

An interceptor that raises ends the turn with ``InterceptorFailed`` naming it (a run with
``RunInterceptorFailed``), the original exception chained; the request is not retried.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, TypeAlias

from ..errors import InterceptorFailed
from ..events import Event, MessageUpdate

__all__ = [
    "DROP",
    "AssistantEventInterceptor",
    "Interceptors",
    "PayloadInterceptor",
    "ResponseInfo",
    "ResponseInterceptor",
    "ResponseTap",
    "SseEvent",
    "SseEventInterceptor",
    "intercept_assistant_event",
    "intercept_payload",
    "observe",
    "tell_sse_event",
    "wire_only",
]


class ResponseHeaders(Mapping[str, str]):
    """Response headers read without regard to case, as HTTP names are: ``get("x-ratelimit-remaining")``
    finds ``X-RateLimit-Remaining`` whichever transport received it (aiohttp keeps the server's spelling,
    httpx lower-cases). Iteration gives the names as they were received."""

    __slots__ = ("_by_lower", "_names")

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._names = {str(name): str(value) for name, value in headers.items()}
        self._by_lower = {name.lower(): value for name, value in self._names.items()}

    def __getitem__(self, name: str) -> str:
        return self._by_lower[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_lower

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"ResponseHeaders({self._names!r})"


@dataclass(frozen=True, slots=True)
class ResponseInfo:
    """What ``on_response`` is told of a response before its body is read.

    Attributes:
        status: the HTTP status.
        headers: the response headers, looked up without regard to case (a ``ResponseHeaders``).
        endpoint: the base URL the request went to.
        model: the model the request named, when known.
    """

    status: int
    headers: Mapping[str, str]
    endpoint: str
    model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.headers, ResponseHeaders):
            object.__setattr__(self, "headers", ResponseHeaders(self.headers))


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One server-sent event as it was received.

    Attributes:
        data: its data lines joined by newlines, decoded as UTF-8 (``"[DONE]"`` for the end marker).
        event: its ``event:`` name, ``""`` when it had none.
    """

    data: str
    event: str = ""


class _Drop:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DROP"


#: What ``on_assistant_event`` returns to keep an update from every listener.
DROP: Final = _Drop()

PayloadInterceptor: TypeAlias = Callable[
    [dict[str, Any]], "Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None"
]
ResponseInterceptor: TypeAlias = Callable[[ResponseInfo], "Awaitable[None] | None"]
SseEventInterceptor: TypeAlias = Callable[[SseEvent], "Awaitable[None] | None"]
AssistantEventInterceptor: TypeAlias = Callable[[Event], "Event | _Drop | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Interceptors:
    """The host's code at the edges of each request (see the module docstring for when each is called).

    Attributes:
        on_payload: sees, and may replace, each request body just before it is sent.
        on_response: told each response's status and headers, error responses included.
        on_sse_event: told each raw server-sent event before it is read.
        on_assistant_event: sees each streamed assistant event before listeners; may replace or drop
            ``MessageUpdate`` events.
    """

    on_payload: PayloadInterceptor | None = None
    on_response: ResponseInterceptor | None = None
    on_sse_event: SseEventInterceptor | None = None
    on_assistant_event: AssistantEventInterceptor | None = None


def wire_only(interceptors: Interceptors | None) -> Interceptors | None:
    """The interceptors a request is sent with: without ``on_assistant_event``, which a run applies to its
    own events (and a side task's answer is no assistant message of the run)."""
    if interceptors is None or interceptors.on_assistant_event is None:
        return interceptors
    if interceptors == Interceptors(on_assistant_event=interceptors.on_assistant_event):
        return None
    return replace(interceptors, on_assistant_event=None)


def _failed(name: str, exc: BaseException) -> InterceptorFailed:
    return InterceptorFailed(f"the {name} interceptor raised {type(exc).__name__}: {exc}", interceptor=name)


async def observe(name: str, hook: Callable[[Any], object], value: object) -> object:
    """Call one interceptor (awaiting it if it is async) and return what it returned.

    Raises:
        InterceptorFailed: it raised; its exception is chained.
    """
    try:
        outcome = hook(value)
        if inspect.isawaitable(outcome):
            outcome = await outcome
    except Exception as exc:
        raise _failed(name, exc) from exc
    return outcome


async def intercept_payload(hook: PayloadInterceptor, body: dict[str, Any]) -> dict[str, Any]:
    """The body to send: ``on_payload``'s replacement, or ``body`` itself when it returned ``None``.

    Raises:
        InterceptorFailed: it raised, or returned something that is not a mapping.
    """
    replaced = await observe("on_payload", hook, body)
    if replaced is None:
        return body
    if not isinstance(replaced, Mapping):
        raise InterceptorFailed(
            f"the on_payload interceptor returned {type(replaced).__name__}; it must return the body to "
            "send (a mapping) or None to send it as it is",
            interceptor="on_payload",
        )
    return dict(replaced)


def intercept_assistant_event(hook: AssistantEventInterceptor, event: Event) -> Event | None:
    """What listeners are shown for a streamed assistant event: it, its replacement, or nothing (``None``).

    Raises:
        InterceptorFailed: it raised, was async, or replaced or dropped something other than an update.
    """
    name = "on_assistant_event"
    try:
        outcome = hook(event)
    except Exception as exc:
        raise _failed(name, exc) from exc
    if outcome is None or outcome is event:
        return event
    if inspect.isawaitable(outcome):
        if inspect.iscoroutine(outcome):
            outcome.close()
        raise InterceptorFailed(
            f"the {name} interceptor must be a plain function: it runs as each piece streams in",
            interceptor=name,
        )
    if not isinstance(event, MessageUpdate):
        raise InterceptorFailed(
            f"the {name} interceptor may replace or drop only message_update events, not {event.type}: "
            "a message's start and end are the record of the transcript",
            interceptor=name,
        )
    if outcome is DROP:
        return None
    if not isinstance(outcome, MessageUpdate):
        raise InterceptorFailed(
            f"the {name} interceptor returned {type(outcome).__name__}; it must return None, a "
            "MessageUpdate or DROP",
            interceptor=name,
        )
    return outcome


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
