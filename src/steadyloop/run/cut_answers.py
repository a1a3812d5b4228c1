"""Answers cut off mid-way, carried on from the text shown: at the token ceiling, or where the stream broke.

The retry loop never sends a turn again once output was shown, since the user would read it twice. A
continuation does not repeat it: the transcript goes again with the text so far as a trailing assistant
message (a prefill, ``turn.continuation``) and only what follows is shown. An answer cut at the token
ceiling is carried on where ``LoopPolicy.max_continuations`` allows; one whose stream broke after output
(a dropped connection, silence, a server's error event) where ``RetryPolicy.carry_on_cut_answers`` is on
(off by default: a server that answers a trailing assistant message afresh would stitch two answers).
llama-server ends the streams of all its slots at once when their shared cache fills, most of them
mid-answer: each carry-on waits a backoff first, as a retry does, so the runs it cut do not collide again.
"""

from __future__ import annotations

import asyncio

from ..errors import EndpointError, EndpointRefused, EndpointSilent
from ..events import Notice, Retry
from ..messages import Turn
from ..turn.capabilities import model_capabilities_for
from ..turn.continuation import can_continue, continue_answer
from ..turn.request import TurnRequest, TurnSink
from ..turn.retry import backoff_delay
from .prepare import Request
from .state import RunState, cancellable

__all__ = ["carry_on_cut", "continue_cut"]


def _carried(run: RunState, request: Request) -> TurnRequest:
    """The request that carries the step's answer on: the model that wrote it, at its own endpoint and with
    no fallback (another model's continuation would be a stitched answer), the body as last sent."""
    policy = run.config.policy
    answered = request.answered
    endpoint = answered.endpoint if answered is not None else request.endpoint
    body = request.last  # latches applied
    if answered is not None and answered.model is not None:
        body = {**body, "model": answered.model}
    model = body.get("model")
    return TurnRequest(
        endpoint=endpoint,
        body=body,
        model=model if isinstance(model, str) else None,
        policy=policy.retry,
        droppable=run.droppable,
        fences=policy.fences,
        step=run.events.step,
        interceptors=run.config.wire_interceptors,
    )


async def continue_cut(run: RunState, request: Request, turn: Turn, limit: int) -> Turn:
    """``turn`` carried on with up to ``limit`` requests where it is an answer cut off; else as it is."""
    if limit <= 0 or not can_continue(turn):
        return turn
    events = run.events
    sink = TurnSink(on_output=events.on_output, on_thinking=events.on_thinking, on_event=events.emit)
    return await cancellable(continue_answer(_carried(run, request), sink, turn, limit), run.cancel)


def _can_carry_on(run: RunState, error: EndpointError) -> bool:
    policy = run.config.policy
    return (
        policy.retry.carry_on_cut_answers
        and not policy.tool_routing  # a routed step's answer follows a decision this body does not hold
        and not isinstance(error, EndpointRefused)
        and (error.kind in ("transient", "rate_limited") or isinstance(error, EndpointSilent))
    )


async def carry_on_cut(run: RunState, request: Request, error: EndpointError) -> Turn:
    """The step's answer whose stream broke after part of it was shown, carried on from that part.

    Each attempt waits a backoff first, and there are as many as the retry policy's ``max_retries``.

    Raises:
        EndpointError: ``error`` again where the answer cannot be carried on (nothing shown, a refusal, a
            routed step, the policy says no, a model that does not continue a prefill) or every attempt
            failed (each said why in a notice).
    """
    events = run.events
    shown = events.shown() if events.opened else None
    if shown is None or not shown.content.strip() or not _can_carry_on(run, error):
        raise error
    events.say(
        Notice,
        text=f"the stream broke after part of the answer ({error}); carrying it on from where it stopped",
        name="continuation",
        step=events.step,
    )
    cut = Turn(content=shown.content, reasoning=shown.reasoning, finish_reason="length")
    carried, retry = _carried(run, request), run.config.policy.retry
    latches = model_capabilities_for(carried.endpoint, carried.model)
    for attempt in range(retry.max_retries):
        if not latches.assistant_prefill:
            break
        delay = backoff_delay(attempt, retry, error.retry_after)
        events.say(Retry, attempt=attempt + 1, delay_s=delay, reason=str(error), step=events.step)
        await cancellable(asyncio.sleep(delay), run.cancel)
        turn = await continue_cut(run, request, cut, 1)
        if turn is not cut:
            return turn
    raise error
