"""``stream_turn``: one streamed chat-completions request read back into a ``Turn``, under a watchdog.

The watchdog measures silence, not a deadline. Until the first chunk that carries something arrives it
allows ``first_token_timeout`` (prefill on a CPU takes minutes, and an empty ``{"role": "assistant"}``
opener says nothing about progress); after that it allows ``idle_timeout`` between chunks, re-armed on every
parsed event, so a model still talking is never cut off however long it takes. Keep-alive comments do not
re-arm it: a proxy keeping a dead upstream's socket open is still silence.

A stream is read whatever it carries: an event that is not JSON (a proxy's junk line) or a chunk of the
wrong shape is skipped, and the turn ends with one notice saying what was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import EndpointError, EndpointSilent, EndpointUnavailable, ModelRefusal
from ..events import Event, MessageUpdate, Notice
from ..messages import Turn
from ..wire.failures import classify_failure
from ..wire.interceptors import (
    AssistantEventInterceptor,
    Interceptors,
    intercept_assistant_event,
    intercept_payload,
)
from ..wire.provider import Provider, ProviderStream
from ..wire.registry import provider_over
from ..wire.sse import DONE
from ..wire.transport.chat_client import ChatClient
from ..wire.typed_errors import error_for_failure
from .assembly import Produced, StreamAssembler, TextCallback
from .capabilities import ModelCapabilities
from .fences import DEFAULT_FENCES, Fence

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["Produced", "stream_turn"]


class _Watchdog:
    """Cancels the streaming task after too long a silence; one timer per silence, not per chunk.

    With a probe, silence before the first token past ``probe_after`` asks whether the endpoint is there
    at all: one that does not answer is given up on then; one that does is allowed to go on thinking up to
    ``first``, asked again every ``probe_after``.
    """

    __slots__ = (
        "_first",
        "_handle",
        "_idle",
        "_loop",
        "_next_probe",
        "_probe",
        "_probe_after",
        "_probing",
        "_started",
        "_task",
        "fired",
        "last",
        "talking",
        "unanswered",
    )

    def __init__(
        self,
        task: asyncio.Task[Any],
        idle: float | None,
        first: float | None,
        probe: Callable[[], Awaitable[bool]] | None = None,
        probe_after: float | None = None,
    ) -> None:
        self._task = task
        self._idle = idle
        self._first = first
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self.last = self._started
        self.talking = False
        self.fired: float | None = None
        self.unanswered = False
        self._handle: asyncio.TimerHandle | None = None
        self._probe = probe if probe_after is not None else None
        self._probe_after = probe_after
        self._next_probe: float | None = None
        self._probing: asyncio.Task[bool] | None = None

    def start(self) -> None:
        allowance = self._first if self._first is not None else self._idle
        deadline = None if allowance is None else self._started + allowance
        if self._probe is not None and self._probe_after is not None:
            at = self._started + self._probe_after
            if deadline is None or at < deadline:
                self._next_probe = at
        self._arm(deadline)

    def _arm(self, deadline: float | None) -> None:
        at = deadline
        if self._next_probe is not None and (at is None or self._next_probe < at):
            at = self._next_probe
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if at is not None:
            self._handle = self._loop.call_at(at, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        if self.talking:
            if self._idle is None:
                return
            deadline: float | None = self.last + self._idle
        else:
            allowance = self._first if self._first is not None else self._idle
            deadline = None if allowance is None else self._started + allowance
        if deadline is not None and now >= deadline:
            self.fired = now - (self.last if self.talking else self._started)
            self._task.cancel()
            return
        if self._next_probe is not None and now >= self._next_probe and self._probe is not None:
            self._next_probe = None
            self._probing = probing = asyncio.ensure_future(self._probe())
            probing.add_done_callback(self._answered)
        self._arm(deadline)

    def _answered(self, probing: asyncio.Future[bool]) -> None:
        self._probing = None
        if self.talking or self.fired is not None or self._task.done() or probing.cancelled():
            return
        if probing.exception() is None and probing.result():
            assert self._probe_after is not None
            self._next_probe = self._loop.time() + self._probe_after
            allowance = self._first if self._first is not None else self._idle
            self._arm(None if allowance is None else self._started + allowance)
            return
        self.unanswered = True
        self.fired = self._loop.time() - self._started
        self._task.cancel()

    def begin_talking(self) -> None:
        # The first chunk that carried something: from here on, silence is measured between chunks.
        self.talking = True
        self._next_probe = None
        self._stop_probing()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._idle is not None:
            self._handle = self._loop.call_at(self.last + self._idle, self._check)

    def _stop_probing(self) -> None:
        probing, self._probing = self._probing, None
        if probing is not None:
            probing.cancel()

    def stop(self) -> None:
        self._stop_probing()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


async def stream_turn(
    client: AsyncOpenAI | ChatClient | Provider,
    body: Mapping[str, Any],
    *,
    on_output: TextCallback | None = None,
    on_thinking: TextCallback | None = None,
    produced: Produced | None = None,
    idle_timeout: float | None = None,
    first_token_timeout: float | None = None,
    fences: Sequence[Fence] = DEFAULT_FENCES,
    start_in_reasoning: bool = False,
    include_usage: bool = False,
    on_event: Callable[[Event], object] | None = None,
    step: int = 0,
    latches: ModelCapabilities | None = None,
    probe: Callable[[], Awaitable[bool]] | None = None,
    probe_after: float | None = None,
    interceptors: Interceptors | None = None,
) -> Turn:
    """Send one streamed chat-completions request and read the answer into a ``Turn``.

    Args:
        client: what sends the request: a provider (``provider_for(endpoint)``, or one of the caller's
            own), ``get_chat_client(endpoint)``, or an SDK client (``get_client(endpoint)``).
        body: the request body; ``stream`` is set here.
        on_output: told each piece of answer text as soon as it is known to be answer.
        on_thinking: told each piece of reasoning.
        produced: set once text or reasoning has been shown (see ``Produced``); read it after a failure to
            decide whether the request may be sent again.
        idle_timeout: seconds of silence allowed between chunks; ``None`` or 0 waits forever.
        first_token_timeout: seconds allowed before the first chunk that carries something; ``None``
            means five times ``idle_timeout``.
        fences: thinking fences to take out of content; ``()`` reads content as all answer.
        start_in_reasoning: the chat template opened a thinking block in the prompt.
        include_usage: ask for a usage chunk (``stream_options.include_usage``).
        on_event: told one ``Notice`` when parts of the stream were skipped, and when the model's replies
            turned out to start inside a thinking block.
        step: the step number stamped on those notices.
        latches: the model's latches: whether its replies start in reasoning is read from them, and
            latched on them when a reply shows it.
        probe: asks whether the endpoint answers at all (any HTTP response); with ``probe_after``, silence
            before the first token past ``probe_after`` seconds is given up on when the endpoint does not
            answer, and allowed on up to ``first_token_timeout`` while it does.
        probe_after: seconds of silence before the first token after which ``probe`` is asked, and how
            often again while the endpoint answers.
        interceptors: the host's interceptors: the body goes through ``on_payload`` just before it is
            sent, the response's status and headers to ``on_response``, each raw event to
            ``on_sse_event`` before it is read, and each text or reasoning piece, as a ``MessageUpdate``,
            through ``on_assistant_event`` before ``on_output`` or ``on_thinking`` hear it.

    Raises:
        EndpointSilent: the watchdog ran out.
        EndpointError: the endpoint refused or failed (``ContextOverflow``, ``EndpointRefused``,
            ``EndpointUnavailable``), carrying the server's words.
        InterceptorFailed: one of ``interceptors`` raised (the request is closed).
    """
    request: dict[str, Any] = dict(body)
    request["stream"] = True
    if include_usage:
        request["stream_options"] = {"include_usage": True}
    else:
        request.pop("stream_options", None)
    model = request.get("model") if isinstance(request.get("model"), str) else None
    sender = _provider_of(client)
    endpoint = sender.endpoint
    idle = idle_timeout or None
    first = first_token_timeout or (idle * 5 if idle else None)
    box = produced if produced is not None else Produced()
    hooks = interceptors or _NO_INTERCEPTORS
    if hooks.on_assistant_event is not None:
        on_output = _shown_through(hooks.on_assistant_event, "text", on_output, step)
        on_thinking = _shown_through(hooks.on_assistant_event, "thinking", on_thinking, step)
    if latches is not None and not _free_reply(request):
        latches = None  # a continued answer or a reply held to a schema says nothing of how replies start
    assembler = StreamAssembler(
        on_output=on_output,
        on_thinking=on_thinking,
        produced=box,
        fences=fences,
        start_in_reasoning=start_in_reasoning,
        guessed_reasoning_start=latches is not None and not latches.answer_first,
    )
    if hooks.on_payload is not None:
        # Before the watchdog starts: the time the host takes is not the endpoint's silence.
        request = await intercept_payload(hooks.on_payload, request)
        model = request.get("model") if isinstance(request.get("model"), str) else None
    task = asyncio.current_task()
    assert task is not None, "stream_turn runs inside a task"
    watchdog = _Watchdog(task, idle, first, probe, probe_after)
    started = time.perf_counter()
    first_token_ms: float | None = None
    response: ProviderStream | None = None
    saw_done = False
    watchdog.start()
    loop = asyncio.get_running_loop()
    try:
        connect_timeout = min(idle, 30.0) if idle else 30.0
        if hooks.on_response is None and hooks.on_sse_event is None:
            response = await sender.open_turn(request, connect_timeout=connect_timeout)
        else:
            response = await sender.open_turn(request, connect_timeout=connect_timeout, interceptors=hooks)
        async for events in response.batches():
            if not events:
                continue
            watchdog.last = loop.time()
            chunks = [e for e in events if e is not DONE]
            if len(chunks) != len(events):
                saw_done = True
            assembler.feed_many(chunks)
            # Dropped now rather than when the next read replaces them: a stream waiting on its socket
            # would otherwise hold its last read's decoded chunks long enough for the cyclic collector to
            # promote them to its oldest generation, where every run in the process pays to scan them.
            del events, chunks
            if assembler.error is not None:
                raise _stream_error(assembler.error, endpoint, model)
            if not watchdog.talking and assembler.active:
                first_token_ms = (time.perf_counter() - started) * 1000
                watchdog.begin_talking()
        if not saw_done and not assembler.finish_reason:
            raise EndpointUnavailable(
                "the stream ended before the endpoint said it was finished",
                endpoint=endpoint,
                model=model,
                kind="transient",
            )
    except asyncio.CancelledError:
        if watchdog.fired is not None and task.uncancel() == 0:
            waited = watchdog.fired
            phase = "between chunks" if watchdog.talking else "before the first token"
            if watchdog.unanswered:
                phase += " and did not answer a probe"
            raise EndpointSilent(
                f"{endpoint} sent nothing for {waited:.1f}s {phase}",
                waited=waited,
                produced=box.value,
                endpoint=endpoint,
                model=model,
                kind="silent",
            ) from None
        raise
    finally:
        watchdog.stop()
        if response is not None:
            # Closing at once is what makes cancellation reach the server: it stops generating.
            closing = response.close()
            if closing is not None:
                await asyncio.shield(closing)
    turn = assembler.finish(first_token_ms=first_token_ms)
    for notice in _notices(assembler, response.skipped() if response is not None else "", latches):
        if on_event is not None:
            on_event(Notice(text=notice[1], name=notice[0], step=step))
    declined = _declined(turn, assembler.refusal, endpoint, model)
    if declined is not None:
        raise declined
    return turn


def _declined(turn: Turn, refusal: list[str], endpoint: str, model: str | None) -> ModelRefusal | None:
    """A reply that only declined (a refusal field, a content filter) as the typed refusal it is, rather
    than a blank answer."""
    if turn.content.strip() or turn.tool_calls:
        return None
    said = "".join(refusal).strip()
    if said:
        return ModelRefusal(
            f"the model declined to answer (refusal, category not given): {said}",
            endpoint=endpoint,
            model=model,
            body=said,
        )
    if turn.finish_reason == "content_filter":
        return ModelRefusal(
            "the model declined to answer (finish reason content_filter, category content_filter)",
            category="content_filter",
            endpoint=endpoint,
            model=model,
        )
    return None


_NO_INTERCEPTORS = Interceptors()


def _shown_through(
    hook: AssistantEventInterceptor, kind: Literal["text", "thinking"], told: TextCallback | None, step: int
) -> TextCallback:
    """A text callback that shows each piece to ``on_assistant_event`` first, and tells ``told`` what it
    lets through."""

    def shown(text: str) -> None:
        event = intercept_assistant_event(hook, MessageUpdate(kind=kind, delta=text, step=step))
        if told is not None and isinstance(event, MessageUpdate):
            told(event.delta)

    return shown


def _free_reply(request: Mapping[str, Any]) -> bool:
    """Whether the reply starts where a model's replies start: not a continued prefill, not held to a schema."""
    if request.get("response_format") or request.get("grammar") or request.get("json_schema"):
        return False
    messages = request.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    return not (isinstance(last, Mapping) and last.get("role") == "assistant")


def _provider_of(client: AsyncOpenAI | ChatClient | Provider) -> Provider:
    if isinstance(client, Provider):
        return client
    return provider_over(client)


def _notices(
    assembler: StreamAssembler, unread: str, latches: ModelCapabilities | None
) -> list[tuple[str, str]]:
    """What a finished stream has to say, as (name, text): what was skipped, and what was latched."""
    notices: list[tuple[str, str]] = []
    skipped = []
    if unread:
        skipped.append(unread)
    shapes = assembler.skipped_notice()
    if shapes:
        skipped.append(shapes.removeprefix("skipped "))
    if skipped:
        notices.append(
            ("stream-skipped", "skipped what could not be read and finished the turn: " + "; ".join(skipped))
        )
    if latches is not None and assembler.opened_before_reply and latches.answer_first:
        latches.answer_first = False
        notices.append(
            (
                "reasoning-start",
                "the reply closed a thinking block it never opened (its template opens one in the prompt): "
                "the text shown before the closing tag was reasoning, and this model's later replies are "
                "read as reasoning until their closing tag",
            )
        )
    if latches is not None and assembler.guess_was_wrong:
        latches.answer_first = True
        notices.append(
            (
                "reasoning-start",
                "the reply had no closing thinking tag, so it was all answer: this model's replies are "
                "no longer read as starting in reasoning",
            )
        )
    return notices


def _stream_error(event: Mapping[str, Any], endpoint: str, model: str | None) -> EndpointError:
    """An error the server sent inside the stream, after a 200."""
    error = event.get("error")
    status = error.get("code") if isinstance(error, Mapping) else None
    failure = classify_failure(status if isinstance(status, int) else None, dict(event), None)
    return error_for_failure(failure, endpoint=endpoint, model=model, prefix="in the stream: ")
