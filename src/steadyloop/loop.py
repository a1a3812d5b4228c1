"""``run_agent_loop``: a turn, the tools it asked for, repeat, until the model stops asking.

The loop is short on purpose. Everything that makes one request survive a real endpoint is in
``run_turn``; everything that runs a step's calls is in ``run_tool_calls``; the request each step sends is
``build_body``'s. What is left here is the order of things and the events that say so.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._loop_parts import (
    Cancelled,
    RunEvents,
    StepBody,
    ToolResolver,
    cancellable,
    cancelled_error,
    gather_hooks,
    keeper_for,
    stopped_error,
    tell_after_turn,
)
from .context.cache_watch import CacheWatch
from .context.calibration import chars_per_token_for
from .context.compaction import transcript_tokens
from .context.integrity import check_transcript, unique_call_ids
from .context.keeper import ContextKeeper, ContextPolicy
from .context.tokens import reply_ceiling, request_tokens, tool_schema_tokens
from .errors import ContextOverflow, EndpointError, RunCancelled, RunError, SteadyloopError
from .events import (
    AgentEnd,
    AgentStart,
    Event,
    LoopDetected,
    MessageEnd,
    MessageStart,
    Notice,
    TurnEnd,
    TurnStart,
    UsageReport,
)
from .hooks import (
    HookContext,
    HookRunner,
)
from .messages import AssistantMessage, Message, ToolResultMessage, Turn
from .metrics import RunMetrics, run_metrics
from .request_body import ModelParams, ToolBlock, order_tools
from .tools.approvals import ApprovalBroker, ApprovalPolicy
from .tools.definition import Tool
from .tools.execution import ToolHooks, ToolPolicy, run_tool_calls
from .tools.loading import CatalogEntry, ToolLoader
from .tools.loop_detection import LoopDetectorConfig, ToolLoopDetector
from .tools.recovery import recover_tool_calls
from .turn.capabilities import capabilities_for
from .turn.continuation import can_continue, continue_turn
from .turn.fences import DEFAULT_FENCES, Fence
from .turn.routing import plain_turn, routed_turn
from .turn.run import RetryPolicy
from .usage import Usage
from .wire.endpoints import Endpoint
from .wire.windows import context_limit_for

__all__ = ["LoopPolicy", "LoopResult", "run_agent_loop"]

BeforeStep = Callable[[list[Message], int], Awaitable[Sequence[Message] | None]]
MessageSource = Callable[[], Sequence[Message]]
ToolChoiceFn = Callable[[Sequence[Message]], "str | Mapping[str, Any] | None"]


@dataclass(frozen=True, slots=True)
class LoopPolicy:
    """How a run behaves between requests.

    Attributes:
        max_tool_iterations: steps that may end in tool calls before the run stops (``RunError``).
        tools: parallelism, dedupe and timeouts for each step's calls.
        max_continuations: extra requests to carry on an answer cut at the token ceiling.
        tool_discovery: ``"all"`` declares every tool; ``"ondemand"`` declares ``load_tools`` and a catalogue.
        recover_tool_calls: read calls a model wrote as text when the server did not parse them.
        tool_order: declare tools by name (``True``), in the caller's order (``False``), or by a key.
        retry: retries and the loading wait for each request.
        context_limit: the window; a request that cannot fit is refused before sending.
        loop_detection: thresholds for repeated calls; ``None`` turns detection off.
        fences: thinking fences taken out of the answer.
        start_in_reasoning: the chat template opens a thinking block in the prompt.
        context: keep the run inside its window by pruning and folding (``None``: off). The window is
            ``context_limit``, or what the endpoint says it serves.
        tool_routing: ask each step that declares tools as a decision the server holds the model to (one
            tool's call, or an answer), for small models that choose badly (see ``turn/routing.py``);
            latched off per (endpoint, model) where the server does not hold it.
    """

    max_tool_iterations: int = 25
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    max_continuations: int = 0
    tool_discovery: Literal["all", "ondemand"] = "all"
    recover_tool_calls: bool = True
    tool_order: bool | Callable[[Tool], Any] = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    context_limit: int | None = None
    loop_detection: LoopDetectorConfig | None = field(default_factory=LoopDetectorConfig)
    fences: Sequence[Fence] = DEFAULT_FENCES
    start_in_reasoning: bool = False
    context: ContextPolicy | None = None
    tool_routing: bool = False


@dataclass(frozen=True, slots=True)
class LifecycleHooks:
    """The host's lifecycle hooks for one run.

    ``session_start`` (on a conversation's first question) and ``before_turn`` are gathered once, before
    the first request, and their blocks ride on this run's question in every request it sends, never in the
    system prompt and never in the transcript that comes back. ``after_turn`` is told the reply when the
    run completes, without the run waiting on it.

    Attributes:
        run: the host's runner.
        context: what the hooks are told (session, host, extra); the prompt and turn index are filled in.
        max_tokens: this run's shared budget for the blocks (default: ``configure_hooks``).
        preface: said above the blocks (default: ``configure_hooks``).
    """

    run: HookRunner
    context: HookContext = field(default_factory=HookContext)
    max_tokens: int | None = None
    preface: str | None = None


@dataclass(frozen=True, slots=True)
class LoopResult:
    """A finished run.

    Attributes:
        turn: the last turn (the answer).
        messages: the whole transcript, the given messages first.
        usage: tokens the run spent.
        steps: requests made.
        loaded: tools loaded on demand, to carry into the next turn of the conversation.
        metrics: what the run cost, added up from its events.
    """

    turn: Turn
    messages: list[Message]
    usage: Usage
    steps: int
    loaded: list[str]
    metrics: RunMetrics


async def run_agent_loop(
    endpoint: Endpoint,
    params: ModelParams,
    *,
    system: str | None = None,
    messages: Sequence[Message],
    tools: Sequence[Tool] = (),
    policy: LoopPolicy | None = None,
    catalog: Sequence[CatalogEntry] | None = None,
    preselected: Sequence[str] | None = None,
    carried: Sequence[str] = (),
    hooks: ToolHooks | None = None,
    approvals: ApprovalBroker | None = None,
    approval_policy: ApprovalPolicy | None = None,
    before_step: BeforeStep | None = None,
    on_event: Callable[[Event], object] | None = None,
    cancel: asyncio.Event | None = None,
    run_id: str | None = None,
    session_id: str | None = None,
    new_messages: int = 1,
    steering: MessageSource | None = None,
    follow_up: MessageSource | None = None,
    interrupt: Callable[[], bool] | None = None,
    should_stop_after_turn: Callable[[Turn, list[Message]], bool] | None = None,
    max_turns: int | None = None,
    tool_choice: ToolChoiceFn | None = None,
    lifecycle: LifecycleHooks | None = None,
) -> LoopResult:
    """Run the model and its tools until it stops asking for tools.

    Args:
        endpoint: where to send requests.
        params: what to ask the model for.
        system: the system prompt (on-demand mode appends the catalogue, the same text every step).
        messages: the transcript so far, ending in the question; never written to.
        tools: every tool the run may reach.
        policy: how the run behaves between requests.
        catalog: the name-only catalogue for on-demand loading (default: built from ``tools``).
        preselected: tools a preselection chose for the first step.
        carried: tools loaded in earlier turns of the conversation.
        hooks: before/after each tool call, and an arguments transform.
        approvals: where gated calls wait for a decision.
        approval_policy: which effect classes and tools are gated.
        before_step: may return a replacement transcript before each request (compaction goes here).
        on_event: every event of the run, in order.
        cancel: set to abort: the request in flight is closed and running tools are stopped.
        run_id: stamped on every event (default: a fresh id).
        session_id: sent as ``prompt_cache_key`` where the endpoint takes it.
        new_messages: how many trailing messages are new this run (announced as message events).
        steering: polled after each step; messages it returns are added before the next request.
        follow_up: polled when the model stops; messages it returns start another round.
        interrupt: true when steering is waiting: calls not yet started are skipped.
        should_stop_after_turn: asked after each completed step; ``True`` ends the run there.
        max_turns: requests the run may make at most.
        lifecycle: the host's lifecycle hooks (gathered onto the question, told the reply).
        tool_choice: decides ``tool_choice`` per request from the transcript it is about to send (e.g.
            ``"required"`` right after a user message, ``"auto"`` after a tool result); ``None`` from it
            leaves the request without one. Overrides ``params.tool_choice``.

    Raises:
        RunError: the run stopped early (iteration budget, loop detected, a request failure, an overflow);
            it carries the transcript so far, usage and steps. ``RunCancelled`` when ``cancel`` was set.
    """
    policy = policy or LoopPolicy()
    run_id = run_id or uuid.uuid4().hex
    caps = capabilities_for(endpoint)
    latches = caps.model(params.model)
    emitter = RunEvents(run_id, on_event)
    emit = emitter.emit
    events = emitter.events

    transcript: list[Message] = list(messages)
    loader = ToolLoader(
        tools,
        catalog,
        ondemand=policy.tool_discovery == "ondemand",
        preselected=preselected,
        carried=carried,
    )
    detector = ToolLoopDetector(policy.loop_detection) if policy.loop_detection is not None else None
    block = ToolBlock()
    watch = CacheWatch()
    totals = Usage()
    steps = 0
    tool_steps = 0
    last_turn = Turn()
    taken_ids = {c.id for m in transcript if isinstance(m, AssistantMessage) for c in m.tool_calls}
    droppable = frozenset(params.extra_body) | {"prompt_cache_key"}
    names = [t.name for t in tools] + [e.name for e in catalog or ()]
    if policy.tool_discovery == "ondemand":
        names.append("load_tools")
    resolver = ToolResolver(loader, names)
    partial = emitter.partial
    reported: tuple[int, int, int] | None = None  # last prompt, its reply, transcript length after it
    outcome: str = "error"
    error_text: str | None = None

    emit(AgentStart(run_id=run_id))
    limit = policy.context_limit
    keeper: ContextKeeper | None = None
    try:
        if policy.context is not None:
            limit = limit or await context_limit_for(endpoint, params.model)
            if limit:
                keeper = keeper_for(endpoint, params, system, policy, policy.context, limit, emit)
            else:
                emit(
                    Notice(
                        text="context management is on but the window is unknown; set context_limit",
                        name="compaction",
                    )
                )
        announce = transcript[-new_messages:] if new_messages > 0 else []
        question, blocks = await gather_hooks(lifecycle, transcript, cancel, emit)
        while True:
            if cancel is not None and cancel.is_set():
                raise cancelled_error(transcript, totals, steps)
            if max_turns is not None and steps >= max_turns:
                outcome = "stopped"
                break
            step = steps + 1
            emitter.step = step
            emit(TurnStart(step=step, run_id=run_id))
            for message in announce:
                emit(MessageStart(message=message, step=step, run_id=run_id))
                emit(MessageEnd(message=message, step=step, run_id=run_id))
            announce = []
            if before_step is not None:
                replaced = await before_step(list(transcript), step)
                if replaced is not None:
                    transcript = list(replaced)
                    reported = None
            transcript = check_transcript(transcript)
            declared = order_tools(loader.declared(step), policy.tool_order)
            suffix = loader.system_suffix(step)
            prompt = f"{system}\n\n{suffix}" if system and suffix else (system or suffix or None)
            build = StepBody(
                params,
                prompt,
                declared,
                transcript,
                question,
                blocks,
                lifecycle,
                block,
                session_id,
                tool_choice,
            )

            emit(MessageStart(message=AssistantMessage(), step=step, run_id=run_id))

            partial.clear()
            on_output, on_thinking = emitter.on_output, emitter.on_thinking

            ratio = chars_per_token_for(endpoint, params.model)
            if keeper is not None:
                planned = build(caps, latches)
                used = request_tokens(planned, chars_per_token=ratio)
                if reported is not None:
                    # The estimate runs low on purpose (it must not refuse what fits), which is the wrong
                    # way to err when planning a fold. The last prompt and its reply are what the server
                    # counted; only what was added since is a guess.
                    since = transcript_tokens(transcript[reported[2] :], ratio)
                    used = max(used, reported[0] + reported[1] + since + reply_ceiling(planned))
                smaller = await keeper.before_request(transcript, used=used, chars_per_token=ratio, step=step)
                if smaller is not None:
                    transcript = check_transcript(smaller)
                    reported = None  # what the server counted was for the transcript before the fold
            recovered = False
            decided = False
            while True:
                build.wire = transcript
                try:
                    routed = await cancellable(
                        (routed_turn if policy.tool_routing else plain_turn)(
                            endpoint,
                            build,
                            model=params.model,
                            policy=policy.retry,
                            context_limit=limit,
                            droppable=droppable,
                            on_output=on_output,
                            on_thinking=on_thinking,
                            on_event=emit,
                            fences=policy.fences,
                            start_in_reasoning=policy.start_in_reasoning,
                            step=step,
                        ),
                        cancel,
                    )
                    turn, decided = routed.turn, routed.decided
                    break
                except ContextOverflow as overflow:
                    if keeper is None or recovered:
                        raise
                    recovered = True
                    smaller = await keeper.recover(
                        transcript, chars_per_token=ratio, step=step, limit=overflow.limit
                    )
                    limit = min(limit or keeper.limit, keeper.limit)
                    if smaller is None:
                        raise
                    transcript = check_transcript(smaller)
                    reported = None
            # The body as last sent (latches applied), for the cache comparison and a continuation.
            body = build.last
            steps = step
            if turn.finish_reason == "length":
                emit(
                    Notice(
                        text="the answer was cut off at the token ceiling (max_tokens)",
                        name="length",
                        step=step,
                    )
                )
                if policy.max_continuations > 0 and can_continue(turn):
                    turn = await cancellable(
                        continue_turn(
                            endpoint,
                            body,
                            turn,
                            max_continuations=policy.max_continuations,
                            policy=policy.retry,
                            droppable=droppable,
                            on_output=on_output,
                            on_thinking=on_thinking,
                            on_event=emit,
                            fences=policy.fences,
                            step=step,
                        ),
                        cancel,
                    )
            recover = policy.recover_tool_calls and not decided  # a decided answer is no call
            if not turn.tool_calls and turn.content.strip() and declared and recover:
                found = recover_tool_calls(turn.content, [t.name for t in declared] + loader.loaded)
                if found.calls:
                    emit(
                        Notice(
                            text=f"recovered {len(found.calls)} tool call(s) the model wrote as text; the "
                            "server's tool-call parser did not read them",
                            name="recovery",
                            step=step,
                        )
                    )
                    turn = Turn(found.content, turn.reasoning, found.calls, turn.usage, turn.finish_reason)
            calls = unique_call_ids(turn.tool_calls, taken_ids)
            message = AssistantMessage(
                content=turn.content, reasoning=turn.reasoning, tool_calls=tuple(calls)
            )
            transcript.append(message)
            emit(MessageEnd(message=message, step=step, run_id=run_id))
            totals = totals + turn.usage
            reported = (turn.usage.prompt_tokens, turn.usage.completion_tokens, len(transcript))
            expected, broken, reason = watch.judge(body, turn.usage)
            emit(
                UsageReport(
                    turn=turn.usage,
                    totals=totals,
                    finish_reason=turn.finish_reason,
                    tools_declared=len(body.get("tools", ())),
                    tool_schema_tokens=tool_schema_tokens(
                        body.get("tools", []), chars_per_token=chars_per_token_for(endpoint, params.model)
                    ),
                    cache_expected=expected,
                    cache_broken=broken,
                    cache_break_reason=reason,
                    step=step,
                    run_id=run_id,
                )
            )
            last_turn = Turn(turn.content, turn.reasoning, calls, turn.usage, turn.finish_reason)
            results: list[ToolResultMessage] = []
            if calls:
                tool_steps += 1
                batch = await run_tool_calls(
                    calls,
                    resolver,
                    policy=policy.tools,
                    hooks=hooks,
                    approvals=approvals,
                    approval_policy=approval_policy or ApprovalPolicy(),
                    emit=emit,
                    step=step,
                    truncated=turn.finish_reason == "length",
                    cancel=cancel,
                    interrupt=interrupt,
                    loop_detector=detector,
                )
                results = list(batch.results)
                for result in results:
                    transcript.append(result)
                    emit(MessageStart(message=result, step=step, run_id=run_id))
                    emit(MessageEnd(message=result, step=step, run_id=run_id))
                emit(
                    TurnEnd(
                        step=step,
                        message=message,
                        tool_results=tuple(results),
                        finish_reason=turn.finish_reason,
                        run_id=run_id,
                    )
                )
                if cancel is not None and cancel.is_set():
                    raise cancelled_error(transcript, totals, steps)
                if batch.loop is not None:
                    emit(
                        LoopDetected(
                            kind=batch.loop.kind, tool=batch.loop.tool, text=batch.loop.text, step=step
                        )
                    )
                    outcome = "loop_detected"
                    raise RunError(
                        f"stopped: {batch.loop.text}",
                        reason="loop_detected",
                        messages=transcript,
                        usage=totals,
                        steps=steps,
                    )
                if batch.terminate:
                    outcome = "completed"
                    break
            else:
                emit(TurnEnd(step=step, message=message, finish_reason=turn.finish_reason, run_id=run_id))
            if should_stop_after_turn is not None and should_stop_after_turn(last_turn, transcript):
                outcome = "stopped"
                break
            queued = list(steering()) if steering is not None else []
            if queued:
                transcript.extend(queued)
                announce = queued
                continue
            if calls:
                if tool_steps >= policy.max_tool_iterations:
                    outcome = "max_iterations"
                    raise RunError(
                        f"stopped after {tool_steps} tool iterations (max_tool_iterations)",
                        reason="max_iterations",
                        messages=transcript,
                        usage=totals,
                        steps=steps,
                    )
                continue
            later = list(follow_up()) if follow_up is not None else []
            if later:
                transcript.extend(later)
                announce = later
                continue
            outcome = "completed"
            break
        if lifecycle is not None and outcome == "completed":
            tell_after_turn(lifecycle, transcript, question, last_turn)
    except Cancelled:
        # What was shown of the interrupted answer stays in the transcript; its calls never ran.
        if partial:
            transcript.append(AssistantMessage(content="".join(partial)))
        outcome, error_text = "cancelled", "the run was cancelled"
        raise cancelled_error(transcript, totals, steps) from None
    except RunCancelled as stop:
        outcome, error_text = "cancelled", str(stop)
        raise
    except RunError as stop:
        error_text = str(stop)
        if outcome == "error":
            outcome = "error"
        raise
    except asyncio.CancelledError:
        outcome, error_text = "cancelled", "cancelled"
        raise
    except ContextOverflow as exc:
        error_text = str(exc)
        raise stopped_error(exc, "overflow", transcript, totals, steps) from exc
    except EndpointError as exc:
        error_text = str(exc)
        raise stopped_error(exc, "endpoint", transcript, totals, steps) from exc
    except SteadyloopError as exc:
        error_text = str(exc)
        raise stopped_error(exc, "error", transcript, totals, steps) from exc
    finally:
        emit(AgentEnd(outcome=outcome, error=error_text, usage=totals, steps=steps, run_id=run_id))  # type: ignore[arg-type]
    return LoopResult(
        turn=last_turn,
        messages=transcript,
        usage=totals,
        steps=steps,
        loaded=loader.carry_over(),
        metrics=run_metrics(events, context_length=policy.context_limit),
    )
