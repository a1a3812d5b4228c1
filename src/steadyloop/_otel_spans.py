"""Spans built from a run's events (internal: imported by ``steadyloop.telemetry`` once telemetry is on).

Each event is read as it is emitted. The run and tool spans are live: opened when their start event arrives
and made current, so a run started inside a tool nests under that tool's span. A model request has no
start event: its span is closed when the step's usage report arrives and starts the request's own wall time
earlier; a request that failed, which never reports usage, is timed from the last thing that happened in its
step before it (the step's start, or a fold).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextvars import Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

from ._otel_attributes import (
    ServerFacts,
    SpanFailure,
    as_json,
    fail,
    now_ns,
    output_messages,
    request_attributes,
    run_usage,
    tracer_for,
    usage_attributes,
)
from .events import (
    AgentEnd,
    AgentStart,
    ContextCompacted,
    ContextPruned,
    Downgrade,
    Event,
    MessageEnd,
    MessageUpdate,
    Notice,
    Retry,
    SideTask,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
    UsageReport,
)
from .messages import AssistantMessage, text_of
from .usage import Usage
from .wire.endpoints import Endpoint

if TYPE_CHECKING:
    from .request_body import ModelParams
    from .telemetry import Telemetry

__all__ = ["RunTracer", "SideTaskTracer"]

_log = logging.getLogger("steadyloop.telemetry")
_FAILED_OUTCOMES = frozenset({"error", "cancelled", "timeout"})


@dataclass(slots=True)
class _Step:
    """One step's request, until its span is made."""

    number: int
    mark: int  # when the request could have started at the earliest: the step start, or a fold since
    retries: list[Retry] = field(default_factory=list)
    retry_times: list[int] = field(default_factory=list)
    downgrades: list[tuple[int, Downgrade]] = field(default_factory=list)
    answer: AssistantMessage | None = None
    reported: bool = False


class SideTaskTracer:
    """Traces side tasks (``SideTask`` events) under whatever span is current when each one ends."""

    def __init__(
        self, settings: Telemetry, endpoint: Endpoint, downstream: Callable[[Event], object] | None
    ) -> None:
        self._tracer = tracer_for(settings)
        self._server = ServerFacts.of(endpoint, settings)
        self._downstream = downstream

    def __call__(self, event: Event) -> None:
        if isinstance(event, SideTask):
            try:
                _side_task_span(self._tracer, self._server, event, None)
            except Exception:  # tracing is never worth failing the work it watches
                _log.debug("could not trace a side task", exc_info=True)
        if self._downstream is not None:
            self._downstream(event)


def _side_task_span(
    tracer: Tracer, server: ServerFacts, event: SideTask, parent: otel_context.Context | None
) -> None:
    end = now_ns()
    wall = event.usage.wall_ms or 0.0
    start = end - int(wall * 1_000_000)
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": event.model,
        "steadyloop.side_task": event.kind,
        **server.attributes(),
        **usage_attributes(event.usage),
    }
    if event.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [event.finish_reason]
    if event.response_id:
        attributes["gen_ai.response.id"] = event.response_id
    if event.response_model:
        attributes["gen_ai.response.model"] = event.response_model
    span = tracer.start_span(
        f"chat {event.model}".strip(),
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=start,
    )
    if event.error is not None:
        failure = SpanFailure.of("side_task_failed", event.error, event.error_type, event.error_code)
        failure.mark(span, server.redact)
    span.end(end_time=end)


class RunTracer:
    """One run's spans, built from its events as they are emitted; then the events go on downstream."""

    def __init__(
        self,
        settings: Telemetry,
        endpoint: Endpoint,
        params: ModelParams,
        run_id: str,
        session_id: str | None,
        downstream: Callable[[Event], object] | None,
    ) -> None:
        self._tracer = tracer_for(settings)
        self._settings = settings
        self._server = ServerFacts.of(endpoint, settings)
        self._model = params.model
        self._request = request_attributes(params)
        self._run_id = run_id
        self._session_id = session_id
        self._downstream = downstream
        self._run: Span | None = None
        self._run_context: otel_context.Context | None = None
        self._token: Token[otel_context.Context] | None = None
        self._task: asyncio.Task[Any] | None = None
        self._step: _Step | None = None
        self._tools: dict[str, Span] = {}
        self._side_tasks = Usage()  # what the run's own side tasks spent, for the run's totals

    def __call__(self, event: Event) -> None:
        if type(event) is not MessageUpdate:  # most of a run's events, and nothing to trace
            try:
                self._observe(event)
            except Exception:  # tracing is never worth failing the run it watches
                _log.debug("could not trace %s", event.type, exc_info=True)
        if self._downstream is not None:
            self._downstream(event)

    # -- the run

    def _observe(self, event: Event) -> None:
        if isinstance(event, AgentStart):
            self._start()
        elif self._run is None:
            return
        elif isinstance(event, TurnStart):
            self._close_request(None)
            self._step = _Step(event.step, now_ns())
        elif isinstance(event, Retry):
            if self._step is not None and event.step == self._step.number:
                self._step.retries.append(event)
                self._step.retry_times.append(now_ns())
        elif isinstance(event, Downgrade):
            if self._step is not None and event.step == self._step.number:
                self._step.downgrades.append((now_ns(), event))
        elif isinstance(event, MessageEnd):
            step = self._step
            if step is not None and isinstance(event.message, AssistantMessage) and event.step == step.number:
                step.answer = event.message
        elif isinstance(event, UsageReport):
            self._request_span(event)
        elif isinstance(event, ToolExecutionStart):
            self._tool_start(event)
        elif isinstance(event, ToolExecutionEnd):
            self._tool_end(event)
        elif isinstance(event, SideTask):
            _side_task_span(self._tracer, self._server, event, self._run_context)
            self._side_tasks = self._side_tasks + event.usage
            self._moved()
        elif isinstance(event, ContextPruned | ContextCompacted | Notice):
            self._run_event(self._run, event)
        elif isinstance(event, TurnEnd):
            if event.error:  # a step that ended before its request answered
                self._close_request(SpanFailure.of("error", event.error, event.error_type, event.error_code))
        elif isinstance(event, AgentEnd):
            self._end(event)

    def _run_event(self, run: Span, event: ContextPruned | ContextCompacted | Notice) -> None:
        """What happened to the run's context, and its notices, as events on the run's span."""
        if isinstance(event, Notice):
            attributes: dict[str, AttributeValue] = {
                "steadyloop.notice.name": event.name or "",
                "steadyloop.notice.text": self._server.redact(event.text),
            }
            run.add_event("steadyloop.notice", attributes)
            return
        if isinstance(event, ContextPruned):
            run.add_event(
                "steadyloop.context.pruned",
                {"steadyloop.cleared": event.cleared, "steadyloop.chars": event.chars},
            )
        else:
            run.add_event(
                "steadyloop.context.compacted",
                {
                    "steadyloop.folded": event.folded,
                    "steadyloop.tokens_before": event.tokens_before,
                    "steadyloop.tokens_after": event.tokens_after,
                    "steadyloop.forced": event.forced,
                    "steadyloop.summarised": event.summarised,
                },
            )
        self._moved()

    def _start(self) -> None:
        name = self._settings.agent_name
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.request.model": self._model,
            "steadyloop.run_id": self._run_id,
            **self._server.attributes(),
        }
        if name:
            attributes["gen_ai.agent.name"] = name
        if self._session_id:
            attributes["gen_ai.conversation.id"] = self._session_id
        # Under whatever is current: a caller's span, or the tool span a sub-agent's run was started from.
        self._run = self._tracer.start_span(
            f"invoke_agent {name}" if name else "invoke_agent", kind=SpanKind.INTERNAL, attributes=attributes
        )
        self._run_context = trace.set_span_in_context(self._run)
        self._token = otel_context.attach(self._run_context)
        try:
            self._task = asyncio.current_task()
        except RuntimeError:
            self._task = None

    def _end(self, event: AgentEnd) -> None:
        run = self._run
        assert run is not None
        failure = SpanFailure.of(event.outcome, event.error, event.error_type, event.error_code)
        self._close_request(failure if event.outcome in _FAILED_OUTCOMES else None)
        for call_id, span in list(self._tools.items()):
            fail(span, "unfinished", "the run ended before the call did")
            span.end()
            del self._tools[call_id]
        run.set_attribute("steadyloop.outcome", event.outcome)
        run.set_attribute("steadyloop.steps", event.steps)
        run.set_attributes(run_usage(event.usage, self._side_tasks))
        if event.outcome != "completed" and event.outcome != "stopped":
            failure.mark(run, self._server.redact)
        run.end()
        self._run = None
        if self._token is not None:
            # Detached where it was attached; a run whose end is emitted from another task keeps its
            # span current there until that task ends, which OpenTelemetry reports and survives.
            with contextlib.suppress(Exception):
                otel_context.detach(self._token)
            self._token = None

    def _moved(self) -> None:
        # Something the step did before its request: the request cannot have started earlier.
        step = self._step
        if step is not None and not step.reported:
            step.mark = now_ns()

    # -- model requests

    def _request_span(self, event: UsageReport) -> None:
        step = self._step
        end = now_ns()
        wall = event.turn.wall_ms
        start = end - int(wall * 1_000_000) if wall is not None else (step.mark if step is not None else end)
        span = self._open_request(event.step, start)
        span.set_attributes(usage_attributes(event.turn))
        if event.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
        if event.response_id:
            span.set_attribute("gen_ai.response.id", event.response_id)
        if event.response_model:
            span.set_attribute("gen_ai.response.model", event.response_model)
        if event.tools_declared:
            span.set_attribute("steadyloop.request.tools_declared", event.tools_declared)
        if event.cache_broken:
            span.set_attribute("steadyloop.cache.broken", True)
            span.set_attribute("steadyloop.cache.break_reason", event.cache_break_reason or "unknown")
        if step is not None and step.number == event.step:
            self._step_events(span, step)
            if self._settings.capture_content and step.answer is not None:
                span.set_attribute(
                    "gen_ai.output.messages",
                    self._server.redact(output_messages(step.answer, event.finish_reason)),
                )
            step.reported = True
        span.end(end_time=end)

    def _close_request(self, failure: SpanFailure | None) -> None:
        """End a step whose request never reported usage: as failed when the run says so."""
        step = self._step
        if step is None or step.reported:
            return
        step.reported = True
        if failure is None and not step.retries:
            return  # nothing says a request was made
        span = self._open_request(step.number, step.mark)
        span.set_attribute("steadyloop.request.retries", len(step.retries))
        self._step_events(span, step)
        (failure or SpanFailure("error", "the step ended without an answer")).mark(span, self._server.redact)
        span.end()

    def _open_request(self, step: int, start: int) -> Span:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self._model,
            "steadyloop.step": step,
            **self._server.attributes(),
            **self._request,
        }
        if self._session_id:
            attributes["gen_ai.conversation.id"] = self._session_id
        return self._tracer.start_span(
            f"chat {self._model}",
            context=self._run_context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )

    def _step_events(self, span: Span, step: _Step) -> None:
        redact = self._server.redact
        for at, retry in zip(step.retry_times, step.retries, strict=True):
            span.add_event(
                "steadyloop.retry",
                {
                    "steadyloop.retry.attempt": retry.attempt,
                    "steadyloop.retry.delay_s": retry.delay_s,
                    "steadyloop.retry.reason": redact(retry.reason),
                },
                timestamp=at,
            )
        for at, downgrade in step.downgrades:
            attributes: dict[str, AttributeValue] = {
                "steadyloop.downgrade.field": downgrade.field,
                "steadyloop.downgrade.reason": redact(downgrade.reason),
            }
            if downgrade.value:
                attributes["steadyloop.downgrade.value"] = redact(downgrade.value)
            span.add_event("steadyloop.downgrade", attributes, timestamp=at)

    # -- tool calls

    def _tool_start(self, event: ToolExecutionStart) -> None:
        span = self._tool_span(event.name, event.call_id, event.effect, now_ns())
        if event.description:
            span.set_attribute("gen_ai.tool.description", event.description)
        if self._settings.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", self._server.redact(as_json(event.arguments)))
        self._tools[event.call_id] = span
        # Current for the call's own task, so work the tool does (a sub-agent's run) nests under it; never
        # in the run's task, where it would outlive the call.
        try:
            task = asyncio.current_task()
        except RuntimeError:
            task = None
        if task is not None and task is not self._task:
            otel_context.attach(trace.set_span_in_context(span))

    def _tool_end(self, event: ToolExecutionEnd) -> None:
        end = now_ns()
        span = self._tools.pop(event.call_id, None)
        if span is None:  # never started: refused, blocked, skipped, or a repeat answered from its twin
            span = self._tool_span(event.name, event.call_id, event.effect, end)
        span.set_attribute("steadyloop.tool.outcome", event.disposition)
        if event.duration_ms is not None:
            span.set_attribute("steadyloop.tool.duration_ms", event.duration_ms)
        if self._settings.capture_content:
            span.set_attribute("gen_ai.tool.call.result", self._server.redact(text_of(event.result.content)))
        if event.error_type is not None:  # the tool raised: its words are the result the model was given
            SpanFailure(event.error_type, text_of(event.result.content), event.error_type).mark(
                span, self._server.redact
            )
        elif event.disposition != "completed":
            fail(span, event.disposition, f"the call ended {event.disposition}")
        elif event.result.is_error:
            fail(span, "tool_error", "the tool reported an error")
        span.end(end_time=end)

    def _tool_span(self, name: str, call_id: str, effect: str | None, start: int) -> Span:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if effect:
            attributes["steadyloop.tool.effect"] = effect
        return self._tracer.start_span(
            f"execute_tool {name}",
            context=self._run_context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start,
        )
