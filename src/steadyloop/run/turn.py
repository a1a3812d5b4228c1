"""Streaming a step's turn: the request sent, recovered, continued, and closed as the assistant's message.

``run_turn`` makes one request survive a real endpoint; this phase adds what only the loop can do: when the
window refused the request, prune and fold and send once more; when the answer was cut at the token
ceiling, carry it on; when the model wrote its tool calls as text, read them. The step's assistant message
then enters the transcript, and its usage is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from ..context.calibration import chars_per_token_for
from ..context.integrity import unique_call_ids
from ..context.keeper import ContextKeeper
from ..context.tokens import tool_schema_tokens
from ..errors import ContextOverflow
from ..events import Notice, UsageReport
from ..messages import AssistantMessage, SignedThinking, ToolCall, Turn
from ..tools.recovery import recover_tool_calls
from ..turn.continuation import can_continue, continue_turn
from ..turn.harmony import mend_harmony
from ..turn.routing import plain_turn, routed_turn
from ..wire.windows import learn_window
from .lifecycle import keeper_for
from .prefix import admit
from .prepare import Request, llm_view, rebuild
from .state import RunState, cancellable

__all__ = ["stream_turn"]


async def stream_turn(run: RunState, request: Request) -> Turn:
    """Send the step's request and close its assistant message; the turn as the transcript keeps it."""
    recorder = run.config.hooks.recorder
    answer = partial(_answer, run, request)
    turn, decided = await (answer() if recorder is None else recorder.model_request(answer))
    events, step = run.events, run.events.step
    run.steps = step
    turn = await mend_harmony(turn, step=step, emit=events.emit, on_leak=run.config.policy.on_harmony_leak)
    if not decided:  # a decided answer is no call
        turn = _recover_calls(run, request, turn)
    calls = unique_call_ids(turn.tool_calls, run.taken_ids)
    thinking = _follow_renames(turn.thinking, turn.tool_calls, calls)
    message = AssistantMessage(
        content=turn.content, reasoning=turn.reasoning, tool_calls=tuple(calls), thinking=thinking
    )
    run.transcript.append(message)
    events.close_message(message)
    run.totals = run.totals + turn.usage
    if run.keeper is not None:
        run.context.reported = (turn.usage.prompt_tokens, turn.usage.completion_tokens, len(run.transcript))
    _report_usage(run, request, turn)
    run.last_turn = Turn(turn.content, turn.reasoning, calls, turn.usage, turn.finish_reason, thinking)
    return run.last_turn


async def _answer(run: RunState, request: Request) -> tuple[Turn, bool]:
    """The model's answer to the request, carried on when it was cut at the token ceiling: what a
    ``StepRecorder`` sees as one model request (the same answer for the same request when it is replayed)."""
    turn, decided = await _send(run, request)
    if turn.finish_reason == "length":
        step = run.events.step
        run.events.say(
            Notice, text="the answer was cut off at the token ceiling (max_tokens)", name="length", step=step
        )
        turn = await _continue(run, request, turn)
    return turn, decided


def _follow_renames(
    thinking: tuple[SignedThinking, ...], before: Sequence[ToolCall], after: Sequence[ToolCall]
) -> tuple[SignedThinking, ...]:
    """Signed thinking that names a call, naming it by the id it was renamed to."""
    renamed = {old.id: new.id for old, new in zip(before, after, strict=True) if old.id != new.id}
    if not renamed or not any(block.call_id in renamed for block in thinking):
        return thinking
    return tuple(
        replace(block, call_id=renamed[block.call_id]) if block.call_id in renamed else block
        for block in thinking
    )


async def _send(run: RunState, request: Request) -> tuple[Turn, bool]:
    """The request, sent (routed where the policy asks); after a refusal as too big, pruned and folded and
    sent once more. Also says whether a routing decision stood behind the turn."""
    config, events = run.config, run.events
    send = partial(routed_turn, gate=config.policy.tool_gate) if config.policy.tool_routing else plain_turn
    recovered = False
    while True:
        try:
            routed = await cancellable(
                send(
                    request.endpoint,
                    request,
                    model=config.params.model,
                    policy=config.policy.retry,
                    context_limit=run.limit,
                    droppable=run.droppable,
                    on_output=events.on_output,
                    on_thinking=events.on_thinking,
                    on_event=events.emit,
                    fences=config.policy.fences,
                    start_in_reasoning=config.policy.start_in_reasoning,
                    step=events.step,
                    interceptors=config.wire_interceptors,
                    on_answered=request.answer_from,
                ),
                run.cancel,
            )
            return routed.turn, routed.decided
        except ContextOverflow as overflow:
            keeper = run.keeper
            if keeper is None and overflow.limit and not recovered and not events.opened:
                keeper = _learn_window(run, request, overflow.limit)
            if keeper is None or recovered or events.opened:
                raise
            recovered = True
            ratio = chars_per_token_for(request.endpoint, config.params.model)
            changed = await keeper.recover(
                request.view, request.index, chars_per_token=ratio, step=events.step, limit=overflow.limit
            )
            run.limit = min(run.limit or keeper.limit, keeper.limit)
            if not changed:
                raise
            rebuild(run, request, await llm_view(run, run.transcript))
            admit(run, request.messages, sanctioned=True)


def _learn_window(run: RunState, request: Request, limit: int) -> ContextKeeper | None:
    """The window an overflow stated where nothing named it before: kept for later runs, and, with context
    keeping on, a keeper for this run so the request is folded to fit and sent again."""
    config = run.config
    learn_window(request.endpoint, config.params.model, limit)
    if config.policy.context is None:
        return None
    run.keeper = keeper_for(run, limit)
    run.limit = limit
    run.events.say(
        Notice,
        text=f"the endpoint says the window is {limit} tokens; folding the conversation to fit",
        name="compaction",
        step=run.events.step,
    )
    return run.keeper


async def _continue(run: RunState, request: Request, turn: Turn) -> Turn:
    policy, events = run.config.policy, run.events
    if policy.max_continuations <= 0 or not can_continue(turn):
        return turn
    # The model that wrote the answer carries it on, at its own endpoint and with no fallback: another
    # model's continuation would be a stitched answer.
    answered = request.answered
    endpoint = answered.endpoint if answered is not None else request.endpoint
    body = request.last  # the body as last sent, latches applied
    if answered is not None and answered.model is not None:
        body = {**body, "model": answered.model}
    return await cancellable(
        continue_turn(
            endpoint,
            body,
            turn,
            max_continuations=policy.max_continuations,
            policy=policy.retry,
            droppable=run.droppable,
            on_output=events.on_output,
            on_thinking=events.on_thinking,
            on_event=events.emit,
            fences=policy.fences,
            step=events.step,
            interceptors=run.config.wire_interceptors,
        ),
        run.cancel,
    )


def _recover_calls(run: RunState, request: Request, turn: Turn) -> Turn:
    """Calls the model wrote as text, read where the server's parser did not."""
    if (
        turn.tool_calls
        or not turn.content.strip()
        or not request.declared
        or not run.config.policy.recover_tool_calls
    ):
        return turn
    found = recover_tool_calls(turn.content, [t.name for t in request.declared] + run.loader.loaded)
    if not found.calls:
        return turn
    run.events.say(
        Notice,
        text=f"recovered {len(found.calls)} tool call(s) the model wrote as text; the server's tool-call "
        "parser did not read them",
        name="recovery",
        step=run.events.step,
    )
    return Turn(found.content, turn.reasoning, found.calls, turn.usage, turn.finish_reason)


def _report_usage(run: RunState, request: Request, turn: Turn) -> None:
    body = request.last
    expected, broken, reason = run.cache.judge(body, turn.usage)
    declared = body.get("tools", [])
    run.events.say(
        UsageReport,
        turn=turn.usage,
        totals=run.totals,
        finish_reason=turn.finish_reason,
        tools_declared=len(declared),
        tool_schema_tokens=tool_schema_tokens(
            declared, chars_per_token=chars_per_token_for(request.endpoint, run.config.params.model)
        ),
        cache_expected=expected,
        cache_broken=broken,
        cache_break_reason=reason,
        step=run.events.step,
    )
