"""OpenTelemetry spans for runs, following the GenAI semantic conventions (``pip install 'steadyloop[otel]'``) (public).

Off until ``set_telemetry`` is called; nothing here imports OpenTelemetry before then, so the core install
stays small. Once on, every run that starts afterwards is traced (a run in flight keeps what it started
with):

- ``invoke_agent`` for the run, under whatever span is current when it starts, so a run started inside a
  tool (a sub-agent) sits under that tool's span;
- ``chat {model}`` per model request: model, provider, server, the reply's id and the model that answered
  (``gen_ai.response.id``, ``gen_ai.response.model``, where the endpoint said), tokens in and out, cached
  tokens, finish reason, time to first chunk, retries (with a span event per retry) and downgrades;
- ``execute_tool {name}`` per tool call: the tool's description, outcome and duration, its arguments and
  result only with ``capture_content``;
- ``chat {model}`` for each side task (a fold's summary, a preselection, a branch summary, ``Agent.branch_to``'s
  included), tagged with ``steadyloop.side_task``; prunes, folds and notices as span events on the run.

Usage adds up: a run's ``gen_ai.usage.*`` counts its own requests and its side tasks together, so it is the
sum of the run's ``chat`` spans; ``steadyloop.side_tasks.input_tokens`` and ``..output_tokens`` give the side
tasks' part. (``AgentEnd.usage`` and ``result.usage`` count the run's own requests alone: the run's total
less that part.) A sub-agent's run is counted on its own ``invoke_agent`` span, not its caller's.

A failed span has ``error.type`` and an ``exception`` event. ``error.type`` is the code the endpoint
answered with when a failed request got one (its HTTP status, ``"429"``), else the class of the error by
its canonical name (``steadyloop.errors.EndpointUnreachable``, ``ZeroDivisionError`` for a tool that raised
it); a run or step that stopped with no error to name (a cancellation from outside) has its outcome. The
``exception`` event has ``exception.type`` (the class) and ``exception.message``: on a failed request's
span the endpoint's error, on the run's the ``RunError`` it raised.

The spans are built from the run's events, so the loop knows nothing of OpenTelemetry; times come from when
each event arrived and from the timings the events carry. No attribute carries a credential: the API key
and any ``user:password@`` in the base URL are replaced wherever they would appear.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import InvalidInput
from .events import Event
from .wire.endpoints import Endpoint

if TYPE_CHECKING:
    from types import ModuleType

    from opentelemetry.trace import TracerProvider

    from ._otel_spans import RunTracer, SideTaskTracer
    from .request_body import ModelParams

__all__ = ["Telemetry", "get_telemetry", "set_telemetry", "trace_run", "trace_side_tasks"]

EventSink = Callable[[Event], object]


@dataclass(frozen=True, slots=True)
class Telemetry:
    """How runs are traced.

    Attributes:
        tracer_provider: where spans go; ``None`` uses OpenTelemetry's global provider.
        capture_content: record tool arguments and results and the model's answers on spans. They may
            hold anything a user or a tool wrote, so it is off unless asked for.
        agent_name: ``gen_ai.agent.name`` on run spans (and in their name).
        provider_name: ``gen_ai.provider.name``; by default read off the endpoint's host (``openai`` for
            an OpenAI-compatible server it does not know).
    """

    tracer_provider: TracerProvider | None = None
    capture_content: bool = False
    agent_name: str | None = None
    provider_name: str | None = None


_active: Telemetry | None = None


def set_telemetry(telemetry: Telemetry | None) -> None:
    """Trace the runs that start from now on (``None`` stops tracing them).

    Raises:
        InvalidInput: OpenTelemetry is not installed (``pip install 'steadyloop[otel]'``).
    """
    global _active
    if telemetry is not None:
        _spans()  # fail here, where the caller asked, rather than at the next run
    _active = telemetry


def get_telemetry() -> Telemetry | None:
    """The settings runs starting now are traced with, or ``None`` when they are not traced."""
    return _active


def trace_run(
    on_event: EventSink | None,
    *,
    endpoint: Endpoint,
    params: ModelParams,
    run_id: str,
    session_id: str | None = None,
) -> EventSink | None:
    """The run's event sink with tracing in front of it; ``on_event`` itself when telemetry is off.

    The loop calls this once per run; a host driving its own loop can too. Tracing never fails the run: a
    span that cannot be made is skipped.
    """
    settings = _active
    if settings is None:
        return on_event
    tracer: type[RunTracer] = _spans().RunTracer
    return tracer(settings, endpoint, params, run_id, session_id, on_event)


def trace_side_tasks(endpoint: Endpoint, on_event: EventSink | None = None) -> EventSink | None:
    """An event sink that traces side tasks run outside any run (a branch summary), under the current span.

    Pass it as the side task's ``on_event`` (``summariser(..., on_event=trace_side_tasks(endpoint))``);
    ``on_event`` still gets every event. ``on_event`` itself when telemetry is off.
    """
    settings = _active
    if settings is None:
        return on_event
    tracer: type[SideTaskTracer] = _spans().SideTaskTracer
    return tracer(settings, endpoint, on_event)


def _spans() -> ModuleType:
    try:
        spans = importlib.import_module(f"{__package__}._otel_spans")
    except ImportError as error:
        raise InvalidInput(
            "OpenTelemetry spans need the otel extra: pip install 'steadyloop[otel]'"
        ) from error
    return spans
