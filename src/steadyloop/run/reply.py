"""Streaming a step's turn: the request sent, recovered, continued, and closed as the assistant's message.

``run_turn`` makes one request survive a real endpoint; this phase adds what only the loop can do: when the
window refused the request, prune, fold and cut tool results and send again (a few times, while something
was shortened); when the answer was cut at the token
ceiling, carry it on; when the model wrote its tool calls as text, read them. The step's assistant message
then enters the transcript, and its usage is reported.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import replace
from functools import partial

from ..context.compaction import transcript_tokens
from ..context.integrity import unique_call_ids
from ..context.keeper import ContextKeeper
from ..context.room import REPLY_SHARE, reply_room
from ..errors import ContextOverflow, EndpointError
from ..events import Notice, UsageReport
from ..messages import AssistantMessage, SignedThinking, ToolCall, Turn
from ..sizing.calibration import chars_per_token_for
from ..sizing.tokens import reply_ceiling, tool_schema_tokens
from ..steering.routing import RoutedTurn, ToolRouting, plain_turn, routed_turn
from ..tools.recovery import recover_tool_calls
from ..turn.harmony import mend_harmony
from ..turn.request import TurnRequest, TurnSink
from ..wire.windows import learn_window
from .cut_answers import carry_on_cut, continue_cut
from .lifecycle import keeper_for
from .prefix import admit
from .prepare import Request, fit_window, llm_view, overage, rebuild
from .state import RunState, cancellable

__all__ = ["step_reply"]

# How many times one step's request may be shrunk after the window refused it.
_RECOVERIES = 3


async def step_reply(run: RunState, request: Request) -> Turn:
    """Send the step's request and close its assistant message; the turn as the transcript keeps it."""
    recorder = run.config.hooks.recorder
    # Only a step that declares tools can have a call read from its text, so only its text is held.
    run.events.hold_calls = bool(request.declared) and run.config.policy.recover_tool_calls
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
    run.last_turn = replace(turn, tool_calls=calls, thinking=thinking)
    return run.last_turn


async def _answer(run: RunState, request: Request) -> tuple[Turn, bool]:
    """The model's answer to the request, carried on when it was cut at the token ceiling or its stream
    broke after output: what a ``StepRecorder`` sees as one model request (the same answer for the same
    request when it is replayed)."""
    try:
        turn, decided = await _send(run, request)
    except EndpointError as error:
        turn, decided = await carry_on_cut(run, request, error), False
    if turn.finish_reason == "length":
        step = run.events.step
        run.events.say(
            Notice, text="the answer was cut off at the token ceiling (max_tokens)", name="length", step=step
        )
        turn = await continue_cut(run, request, turn, run.config.policy.max_continuations)
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
    """The request, sent (routed where the policy asks); after a refusal as too big, shortened
    (``_make_room``) and sent again. Also says whether a routing decision stood behind the turn."""
    events = run.events
    sink = TurnSink(
        on_output=events.on_output,
        on_thinking=events.on_thinking,
        on_event=events.emit,
        on_answered=request.answer_from,
    )
    recoveries = 0
    while True:
        try:
            routed = await cancellable(_routed_or_plain(run, _turn_request(run, request), sink), run.cancel)
            return routed.turn, routed.decided
        except ContextOverflow as overflow:
            # An overflow that states the window where nothing named it: learnt, and kept to if asked.
            if run.keeper is None and overflow.limit and not recoveries and not events.opened:
                _learn_window(run, request, overflow.limit)
            # Each recovery shortens something (a result pruned or cut, history folded), so this ends.
            if run.keeper is None or recoveries >= _RECOVERIES or events.opened:
                raise
            recoveries += 1
            if not await _make_room(run, request, overflow):
                raise
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


def _turn_request(run: RunState, request: Request) -> TurnRequest:
    """The step's model call: its request's body builder, sent as the run's policy says."""
    config = run.config
    policy = config.policy
    return TurnRequest(
        endpoint=request.endpoint,
        body=request,
        model=config.params.model,
        policy=policy.retry,
        context_limit=run.limit,
        droppable=run.droppable,
        fences=policy.fences,
        start_in_reasoning=policy.start_in_reasoning,
        step=run.events.step,
        interceptors=config.wire_interceptors,
    )


def _routed_or_plain(run: RunState, turn: TurnRequest, sink: TurnSink) -> Awaitable[RoutedTurn]:
    """The step sent as a routed decision where ``LoopPolicy.tool_routing`` asks for it, else as usual."""
    policy = run.config.policy
    if not policy.tool_routing:
        return plain_turn(turn, sink)
    routing = policy.tool_routing if isinstance(policy.tool_routing, ToolRouting) else ToolRouting()
    return routed_turn(turn, sink, replace(routing, gate=policy.tool_gate))


async def _make_room(run: RunState, request: Request, overflow: ContextOverflow) -> bool:
    """After the window refused the request: prune and fold, then cut tool results by what the refusal
    says is still too much; whether anything changed (the request is then rebuilt)."""
    keeper = run.keeper
    assert keeper is not None
    ratio = chars_per_token_for(request.endpoint, run.config.params.model)
    before = transcript_tokens(request.messages, ratio)
    changed = await keeper.recover(
        request.view, request.index, chars_per_token=ratio, step=run.events.step, limit=overflow.limit
    )
    run.limit = min(run.limit or keeper.limit, keeper.limit)
    wire = await llm_view(run, run.transcript)
    if changed:
        rebuild(run, request, wire)
    limit = keeper.limit
    if overflow.requested is not None:
        # The refusal's count is the one that matters, less what pruning and folding freed since.
        freed = before - transcript_tokens(request.messages, ratio)
        ceiling = reply_ceiling(request.last)
        over = overflow.requested - freed - (limit - reply_room(limit, ceiling))
    else:
        # Refused without a count, though the estimate fitted: the estimate runs low; free an eighth.
        over = max(overage(run, request, ratio), limit // REPLY_SHARE)
    if fit_window(run, request, ratio, over=over):
        rebuild(run, request, wire)
        changed = True
    return changed


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
    return replace(turn, content=found.content, tool_calls=found.calls)


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
        response_id=turn.response_id or None,
        response_model=turn.response_model or None,
        step=run.events.step,
    )
