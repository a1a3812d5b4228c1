"""Running a step's tool calls, after the host has heard the message that asked for them.

The host's listeners are a barrier here: the assistant message that makes the calls is handled by every
one of them before any call's preflight starts, so a store never records a result before the call that
produced it, and a ``before_tool_call`` hook reading the host's state finds the message there.
"""

from __future__ import annotations

import contextlib
import math

from ..context.compaction import transcript_tokens
from ..context.room import result_room
from ..errors import ToolLoopDetected
from ..events import LoopDetected
from ..messages import AssistantMessage, Turn
from ..sizing.calibration import chars_per_token_for
from ..sizing.tokens import MESSAGE_OVERHEAD_CHARS, reply_ceiling, request_tokens
from ..tools.approvals import ApprovalPolicy
from ..tools.batch import BatchOutcome
from ..tools.execution import run_tool_calls
from ..turn.assembly import stopped_short
from .prepare import Request
from .state import Cancelled, RunState, cancellable

__all__ = ["run_calls", "stop_if_looping"]

_NO_GATES = ApprovalPolicy()


async def run_calls(run: RunState, turn: Turn, request: Request) -> BatchOutcome | None:
    """Run the turn's calls and add their results to the transcript, in call order; ``None`` without calls.

    Each call is told its share of the room the window has left for the results (``ToolContext``).

    Raises:
        ToolLoopDetected: the model keeps repeating the same calls (after the step is closed).
    """
    if not turn.tool_calls:
        return None
    config, events = run.config, run.events
    ratio = chars_per_token_for(request.endpoint, config.params.model)
    room = _room(run, request, ratio)
    run.tool_steps += 1
    if run.barrier is not None:
        # An abort while waiting still runs the batch below: every call is answered there as not run.
        with contextlib.suppress(Cancelled):
            await cancellable(run.barrier(), run.cancel)
    batch = await run_tool_calls(
        turn.tool_calls,
        run.resolver,
        policy=config.policy.tools,
        hooks=config.hooks.tools,
        approvals=config.approvals,
        approval_policy=config.approval_policy or _NO_GATES,
        emit=events.emit,
        step=events.step,
        truncated=stopped_short(turn.finish_reason),
        cancel=run.cancel,
        interrupt=config.queues.interrupt,
        loop_detector=run.detector,
        recorder=config.hooks.recorder,
        room=room,
        chars_per_token=ratio,
    )
    for result in batch.results:
        run.transcript.append(result)
        events.turn_results.append(result)
        events.announce(result)
    return batch


def _room(run: RunState, request: Request, ratio: float) -> int | None:
    """The tokens the window has left for the step's results: what the request sent (as the server
    counted it, or as estimated, whichever is more), the message that made the calls and a result's
    framing each taken off; ``None`` when the run knows no window."""
    limit = run.keeper.limit if run.keeper is not None else run.limit
    message = run.transcript[-1]
    if not limit or not isinstance(message, AssistantMessage):
        return None
    body = request.last
    ceiling = reply_ceiling(body)
    sent = max(run.last_turn.usage.prompt_tokens, request_tokens(body, chars_per_token=ratio) - ceiling)
    framing = len(message.tool_calls) * MESSAGE_OVERHEAD_CHARS
    used = sent + transcript_tokens([message], ratio) + math.ceil(framing / ratio)
    return result_room(limit=limit, used=used, ceiling=ceiling)


def stop_if_looping(run: RunState, batch: BatchOutcome | None) -> None:
    """Stop the run when the batch found the model repeating itself.

    Raises:
        ToolLoopDetected: it did.
    """
    if batch is None or batch.loop is None:
        return
    loop = batch.loop
    run.events.say(LoopDetected, kind=loop.kind, tool=loop.tool, text=loop.text, step=run.events.step)
    raise ToolLoopDetected(
        f"stopped: {loop.text}",
        reason="loop_detected",
        messages=run.transcript,
        usage=run.totals,
        steps=run.steps,
    )
