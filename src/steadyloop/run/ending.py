"""How a run ends, on every path: what it opened is closed, the error says why, one ``AgentEnd``.

A stop mid-step first closes what the step opened: an assistant message cut off after showing something
enters the transcript as far as it was shown (an abort, a stream that broke, a timeout), and its
``MessageEnd`` goes out; the step's ``TurnEnd`` follows with the reason. The error raised then carries that
transcript. Whatever stopped the run is a ``RunError`` (see ``steadyloop.errors``): a failed request is
the ``RunEndpointError`` of its kind, so it is also the endpoint's error.
"""

from __future__ import annotations

import time

from ..errors import (
    EndpointError,
    InterceptorFailed,
    RunCancelled,
    RunEndpointError,
    RunError,
    RunInterceptorFailed,
    RunTimedOut,
    SteadyloopError,
    error_code,
    error_type,
    run_error_for,
)
from ..events import AgentEnd, Outcome
from ..tools._call import describe
from .state import Cancelled, RunState

__all__ = ["announce_end", "close_open", "stop_for"]

_OUTCOMES: dict[str, Outcome] = {
    "cancelled": "cancelled",
    "timeout": "timeout",
    "max_iterations": "max_iterations",
    "max_turns": "max_turns",
    "loop_detected": "loop_detected",
    "hook_denied": "hook_denied",
    "invalid_output": "invalid_output",
}


def close_open(run: RunState, why: str, cause: BaseException | None = None) -> None:
    """Close the step's open message (keeping what it showed) and the step itself.

    ``cause`` is what ended the step: for a failed request, the endpoint's error rather than the run's.
    """
    events = run.events
    shown = events.shown()
    if shown is not None:
        run.transcript.append(shown)
        events.close_message(shown)
    if events.turn_open:
        if isinstance(cause, RunEndpointError):
            cause = cause.cause
        events.end_turn(finish_reason="", error=why, cause=cause)


def stop_for(run: RunState, exc: BaseException) -> RunError:
    """The ``RunError`` a run raises for what stopped it, after closing what was open."""
    run.cancel_timer()
    if isinstance(exc, Cancelled):
        timeout = run.config.policy.run_timeout
        if run.timed_out and timeout is not None:
            error: RunError = RunTimedOut(
                f"the run took longer than run_timeout ({timeout:g}s)", timeout=timeout
            )
        else:
            error = RunCancelled("the run was cancelled", reason="cancelled")
    elif isinstance(exc, RunError):
        error = exc
    elif isinstance(exc, EndpointError):
        error = run_error_for(exc, f"the run stopped: {exc}", messages=(), usage=None, steps=0)
    elif isinstance(exc, InterceptorFailed):
        error = RunInterceptorFailed(f"the run stopped: {exc}", interceptor=exc.interceptor)
    elif isinstance(exc, SteadyloopError):
        error = RunError(f"the run stopped: {exc}", reason="error")
    else:
        # A host callback or a bug: still a typed stop that keeps the transcript, the cause chained.
        error = RunError(f"the run stopped: {describe(exc)}", reason="error")
    close_open(run, str(error), error)
    run.stopped_by = error
    error.messages = list(run.transcript)
    error.usage = run.totals
    error.steps = run.steps
    run.outcome = _OUTCOMES.get(error.reason, "error")
    run.error_text = str(error)
    return error


def announce_end(run: RunState) -> None:
    """The run's one ``AgentEnd``, after closing anything still open (an outer cancellation)."""
    run.cancel_timer()
    if run.events.opened or run.events.turn_open:
        run.outcome = "cancelled" if run.outcome == "error" and run.error_text is None else run.outcome
        close_open(run, run.error_text or "cancelled")
    failed = run.outcome != "completed" and run.outcome != "stopped"
    cause = run.stopped_by if failed else None
    run.events.say(
        AgentEnd,
        outcome=run.outcome,
        error=run.error_text if failed else None,
        usage=run.totals,
        steps=run.steps,
        at=time.time(),
        error_type=error_type(cause) if cause is not None else None,
        error_code=error_code(cause) if cause is not None else None,
    )
