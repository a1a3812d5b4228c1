"""One attempt under the watchdog: one streamed request read back into a ``Turn``.

``stream_attempt`` sends a chat-completions body through a provider and reads the reply into a ``Turn``
(``assembly.py``), the watchdog (``watchdog.py``) measuring the silence. ``Attempt`` says what one such
request needs besides its body; ``stream_turn`` is the same with the settings as keywords, over a provider
or a client of the caller's.

A stream is read whatever it carries: an event that is not JSON (a proxy's junk line) or a chunk of the
wrong shape is skipped, and the turn ends with one notice saying what was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import EndpointError, EndpointSilent, EndpointUnavailable, ModelRefusal, redact_url
from ..events import Event, MessageUpdate, Notice, RequestSent
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
from ..wire.transport.sending import listening_for_sent
from ..wire.typed_errors import error_for_failure
from .assembly import Produced, StreamAssembler, TextCallback
from .capabilities import ModelCapabilities
from .fences import DEFAULT_FENCES, Fence
from .request import TurnSink
from .watchdog import Probe, Watchdog

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["Attempt", "Produced", "stream_attempt", "stream_turn"]

_NO_INTERCEPTORS = Interceptors()
_NO_SINK = TurnSink()


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """What one streamed request needs besides its body.

    Attributes:
        provider: what sends it.
        sink: who hears the answer text, the reasoning and the notices.
        idle_timeout: seconds of silence allowed between chunks; ``None`` or 0 waits forever.
        first_token_timeout: seconds allowed before the first chunk that carries something; ``None``
            means five times ``idle_timeout``.
        fences: thinking fences to take out of content; ``()`` reads content as all answer.
        start_in_reasoning: the chat template opened a thinking block in the prompt.
        include_usage: ask for a usage chunk (``stream_options.include_usage``).
        step: the step number stamped on notices.
        latches: the model's latches: whether its replies start in reasoning is read from them, and
            latched on them when a reply shows it.
        probe: asks whether the endpoint answers at all, and after how many seconds of silence before the
            first token (and again as often while it answers): given up on when it does not answer.
        interceptors: the host's interceptors (see ``stream_turn``).
    """

    provider: Provider
    sink: TurnSink = _NO_SINK
    idle_timeout: float | None = None
    first_token_timeout: float | None = None
    fences: Sequence[Fence] = DEFAULT_FENCES
    start_in_reasoning: bool = False
    include_usage: bool = False
    step: int = 0
    latches: ModelCapabilities | None = None
    probe: Probe | None = None
    interceptors: Interceptors | None = None


async def stream_attempt(attempt: Attempt, body: Mapping[str, Any], produced: Produced | None = None) -> Turn:
    """Send ``body`` as one streamed request and read the answer into a ``Turn``.

    ``produced`` is set once text or reasoning has been shown; read it after a failure to decide whether
    the request may be sent again.

    Raises:
        EndpointSilent: the watchdog ran out.
        EndpointError: the endpoint refused or failed (``ContextOverflow``, ``EndpointRefused``,
            ``EndpointUnavailable``), carrying the server's words.
        InterceptorFailed: one of the interceptors raised (the request is closed).
    """
    request = _streamed(body, attempt.include_usage)
    box = produced if produced is not None else Produced()
    hooks = attempt.interceptors or _NO_INTERCEPTORS
    latches = attempt.latches if attempt.latches is not None and _free_reply(request) else None
    assembler = _assembler(attempt, hooks, box, latches)
    if hooks.on_payload is not None:
        # Before the watchdog starts: the time the host takes is not the endpoint's silence.
        request = await intercept_payload(hooks.on_payload, request)
    reading = _Reading(attempt, request, assembler, box)
    turn, response = await reading.read(hooks)
    for name, text in _notices(assembler, response.skipped() if response is not None else "", latches):
        attempt.sink.emit(Notice(text=text, name=name, step=attempt.step))
    declined = _declined(turn, assembler.refusal, reading.endpoint, reading.model)
    if declined is not None:
        raise declined
    return turn


def _streamed(body: Mapping[str, Any], include_usage: bool) -> dict[str, Any]:
    """``body`` asked as a stream, with a usage chunk or without."""
    request: dict[str, Any] = dict(body)
    request["stream"] = True
    if include_usage:
        request["stream_options"] = {"include_usage": True}
    else:
        request.pop("stream_options", None)
    return request


def _assembler(
    attempt: Attempt, hooks: Interceptors, box: Produced, latches: ModelCapabilities | None
) -> StreamAssembler:
    """The assembler of one reply, telling the sink (through ``on_assistant_event`` first) what it shows."""
    on_output, on_thinking = attempt.sink.on_output, attempt.sink.on_thinking
    if hooks.on_assistant_event is not None:
        on_output = _shown_through(hooks.on_assistant_event, "text", on_output, attempt.step)
        on_thinking = _shown_through(hooks.on_assistant_event, "thinking", on_thinking, attempt.step)
    return StreamAssembler(
        on_output=on_output,
        on_thinking=on_thinking,
        produced=box,
        fences=attempt.fences,
        start_in_reasoning=attempt.start_in_reasoning,
        guessed_reasoning_start=latches is not None and not latches.answer_first,
        # A hook that was told the text has seen it: only a holder's text may be asked for again.
        output_held=attempt.sink.output_held and hooks.on_assistant_event is None,
        enough=attempt.sink.enough() if attempt.sink.enough is not None else None,
    )


class _Reading:
    """One request's stream read under its watchdog."""

    __slots__ = ("assembler", "attempt", "box", "endpoint", "idle", "model", "request")

    def __init__(
        self, attempt: Attempt, request: dict[str, Any], assembler: StreamAssembler, box: Produced
    ) -> None:
        self.attempt = attempt
        self.request = request
        self.assembler = assembler
        self.box = box
        self.endpoint = attempt.provider.endpoint
        model = request.get("model")
        self.model = model if isinstance(model, str) else None
        self.idle = attempt.idle_timeout or None

    async def read(self, hooks: Interceptors) -> tuple[Turn, ProviderStream | None]:
        """The turn the stream carried, and the stream (closed) for what it skipped."""
        task = asyncio.current_task()
        assert task is not None, "stream_attempt runs inside a task"
        idle = self.idle
        first = self.attempt.first_token_timeout or (idle * 5 if idle else None)
        watchdog = Watchdog(task, idle, first, self.attempt.probe)
        started = time.perf_counter()  # the first token's time counts the connection too
        response: ProviderStream | None = None
        sink = self.attempt.sink
        sent = (
            _SentTeller(sink.on_event, self.endpoint, self.model, self.attempt.step)
            if sink.on_event
            else None
        )
        watchdog.start()
        try:
            connect_timeout = min(idle, 30.0) if idle else 30.0
            provider = self.attempt.provider
            with listening_for_sent(sent):
                if hooks.on_response is None and hooks.on_sse_event is None:
                    response = await provider.open_turn(self.request, connect_timeout=connect_timeout)
                else:
                    response = await provider.open_turn(
                        self.request, connect_timeout=connect_timeout, interceptors=hooks
                    )
            if sent is not None:
                sent()  # a transport that could not tell when it sent: the answer began
            first_token_ms = await self._chunks(response, watchdog, started)
        except asyncio.CancelledError:
            if watchdog.fired is not None and task.uncancel() == 0:
                raise self._silent(watchdog) from None
            raise
        finally:
            watchdog.stop()
            if response is not None:
                # Closing at once is what makes cancellation reach the server: it stops generating.
                closing = response.close()
                if closing is not None:
                    await asyncio.shield(closing)
        return self.assembler.finish(first_token_ms=first_token_ms), response

    async def _chunks(self, response: ProviderStream, watchdog: Watchdog, started: float) -> float | None:
        """Feed the reply's chunks to the assembler; the time to its first token from ``started``, in
        milliseconds."""
        assembler = self.assembler
        first_token_ms: float | None = None
        saw_done = False
        loop = asyncio.get_running_loop()
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
                raise _stream_error(assembler.error, self.endpoint, self.model)
            if not watchdog.talking and assembler.active:
                first_token_ms = (time.perf_counter() - started) * 1000
                watchdog.begin_talking()
            if assembler.looping is not None:
                self._stop_loop(assembler.looping)
                return first_token_ms
            if assembler.enough is not None:
                self._stop_enough(assembler.enough)
                return first_token_ms
        if not saw_done and not assembler.finish_reason:
            raise EndpointUnavailable(
                "the stream ended before the endpoint said it was finished",
                endpoint=self.endpoint,
                model=self.model,
                kind="transient",
            )
        return first_token_ms

    def _stop_loop(self, period: int) -> None:
        """The reply fell into a loop: its end is the turn's (closing the stream stops the server), and a
        notice says why it ended there."""
        self.assembler.finish_reason = "repetition"
        sink = self.attempt.sink
        sink.emit(
            Notice(
                text=f"the reply fell into a loop (it said one piece of {period:,} characters again and "
                "again, or only its numbers changed); it was stopped there",
                name="repetition",
                step=self.attempt.step,
            )
        )

    def _stop_enough(self, why: str) -> None:
        """The sink's watch says the reply has said enough: its end is the turn's, as with a loop."""
        self.assembler.finish_reason = "enough"
        self.attempt.sink.emit(Notice(text=why, name="enough", step=self.attempt.step))

    def _silent(self, watchdog: Watchdog) -> EndpointSilent:
        waited = watchdog.fired or 0.0
        phase = "between chunks" if watchdog.talking else "before the first token"
        if watchdog.unanswered:
            phase += " and did not answer a probe"
        return EndpointSilent(
            f"{self.endpoint} sent nothing for {waited:.1f}s {phase}",
            waited=waited,
            produced=self.box.value,
            endpoint=self.endpoint,
            model=self.model,
            kind="silent",
        )


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

    ``stream_attempt`` with its settings as keywords.

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
        on_event: told ``RequestSent`` once the request went out on a connection, and one ``Notice``
            when parts of the stream were skipped, and when the model's replies turned out to start
            inside a thinking block.
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
    attempt = Attempt(
        provider=client if isinstance(client, Provider) else provider_over(client),
        sink=TurnSink(on_output=on_output, on_thinking=on_thinking, on_event=on_event),
        idle_timeout=idle_timeout,
        first_token_timeout=first_token_timeout,
        fences=fences,
        start_in_reasoning=start_in_reasoning,
        include_usage=include_usage,
        step=step,
        latches=latches,
        probe=(probe, probe_after) if probe is not None and probe_after is not None else None,
        interceptors=interceptors,
    )
    return await stream_attempt(attempt, body, produced)


class _SentTeller:
    """Tells ``RequestSent`` once, whichever says it first: the transport, or the answer beginning."""

    __slots__ = ("endpoint", "model", "on_event", "step", "told")

    def __init__(
        self, on_event: Callable[[Event], object], endpoint: str, model: str | None, step: int
    ) -> None:
        self.on_event = on_event
        self.endpoint = redact_url(endpoint)
        self.model = model or ""
        self.step = step
        self.told = False

    def __call__(self) -> None:
        if not self.told:
            self.told = True
            self.on_event(RequestSent(endpoint=self.endpoint, model=self.model, step=self.step))


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
