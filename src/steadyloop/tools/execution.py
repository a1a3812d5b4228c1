"""Running one step's tool calls: ``run_tool_calls``.

A batch goes through these stages, each call on its own:

1. Planning, for every call in source order: the loop guard records it; its arguments are re-read (strictly
   when the turn stopped at its token ceiling) and transformed by the hook; its claims and its dedupe key are
   worked out. A call that fails here is answered at once and blocks nobody.
2. Preflight: the ``before_tool_call`` hook, then the approval gate. In a parallel batch every call's
   preflight starts at once, so the approvals of a batch are asked together and decided independently, and a
   call waiting for a person holds no slot. In a sequential batch each call's preflight runs just before it.
3. Execution, when the scheduler lets the call start (``steadyloop.tools.scheduler``): ``ToolExecutionStart``,
   the tool raced against its timeout and the run's abort, then ``after_tool_call``.

Every call ends in exactly one ``ToolExecutionEnd`` (in completion order) and one result message (kept in the
assistant's call order), with a disposition: ``completed`` (the tool answered, even with ``is_error``),
``failed`` (it raised, or it could not be run: unknown tool, unreadable arguments), ``blocked`` (a hook or an
approval said no), ``timeout``, ``aborted`` (the run's ``cancel`` was set: running or not yet run) and
``skipped`` (steering arrived first, or the loop guard stopped the run).

A repeated call (same tool, same arguments after repair and transform) waits for the first and shares its
answer, unless the first raised: a throw is never shared, so the repeat is a real retry.

The disposition is kept on the result message itself (``ToolResultMessage.disposition``), so a stored
transcript still says which results a tool wrote and which the runtime wrote for it.

A tool that ignores its cancellation keeps running after its call was closed; when it settles, a
``LateSettlement`` event reports it and the transcript stays as it was. A sync tool (a plain function,
run in a worker thread) always ignores it: Python cannot stop a thread from outside. Its timeout closes
the call at once (the model reads the timeout and the run goes on), sets ``ToolContext.cancelled`` (which
a long sync tool may poll to stop early), and reports the function's own result or error as a
``LateSettlement`` when the thread finishes; what the function does meanwhile (writes, requests) still
happens, and its thread is busy until then.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

from ..arguments import canonical_arguments, parse_tool_arguments
from ..errors import ToolArgumentsError
from ..events import Event, ToolExecutionEnd, ToolExecutionStart
from ..messages import ContentPart, TextPart, ToolCall, ToolResultMessage, text_of
from ..sizing.tokens import CHARS_PER_TOKEN
from ._call import LOOP_SKIPPED, NOT_RUN, SKIPPED, Answer, CallSteps, closed, describe
from .approvals import ApprovalBroker, ApprovalPolicy
from .batch import BatchOutcome, CallOutcome, HookDecision, LoopGuard, ToolHooks, ToolPolicy
from .definition import Tool
from .recorder import StepRecorder
from .scheduler import Claims, Scheduler, claims_for_call, plan_calls

# The values live in ``batch``; they are re-exported so one import serves a caller of ``run_tool_calls``.
__all__ = [
    "BatchOutcome",
    "CallOutcome",
    "HookDecision",
    "LoopGuard",
    "ToolHooks",
    "ToolPolicy",
    "run_tool_calls",
]

# Frozen values, so one shared default is safe.
_DEFAULT_POLICY = ToolPolicy()
_DEFAULT_APPROVAL_POLICY = ApprovalPolicy()


async def run_tool_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    policy: ToolPolicy = _DEFAULT_POLICY,
    hooks: ToolHooks | None = None,
    approvals: ApprovalBroker | None = None,
    approval_policy: ApprovalPolicy = _DEFAULT_APPROVAL_POLICY,
    emit: Callable[[Event], object] = lambda e: None,
    step: int = 0,
    truncated: bool = False,
    cancel: asyncio.Event | None = None,
    interrupt: Callable[[], bool] | None = None,
    loop_detector: LoopGuard | None = None,
    recorder: StepRecorder | None = None,
    room: int | None = None,
    chars_per_token: float = CHARS_PER_TOKEN,
) -> BatchOutcome:
    """Run one step's tool calls and answer every one of them.

    Args:
        calls: the calls, in the order the assistant wrote them.
        tools: the tools by name.
        policy: parallelism, dedupe, timeouts.
        hooks: code run around each call.
        approvals: where gated calls wait for a decision; ``None`` denies them.
        approval_policy: which calls are gated.
        emit: receives the events (tool execution, approvals, hook denials, late settlements).
        step: the step, for the events.
        truncated: the turn stopped before it was done (its token ceiling, a loop); arguments are read
            without healing.
        cancel: the run's abort: running calls are stopped and the rest are not run.
        interrupt: polled before calls start; once true (steering arrived), calls not yet started are skipped.
        loop_detector: records calls and results, adds its notes to results, can stop the batch.
        recorder: told the calls before any starts, and runs each execution (a durable host keeps what
            they returned; see ``StepRecorder``).
        room: the tokens the context window has left for the batch's results (``None``: unknown); each
            call's ``ToolContext.budget_tokens`` is an even share of it.
        chars_per_token: the model's measured ratio, for ``ToolContext.budget_chars``.

    Returns:
        The outcomes in call order. Cancelling the task cancels every call still running and waits for them.
    """
    hooks = hooks or ToolHooks()
    steps = CallSteps(
        policy=policy,
        hooks=hooks,
        broker=approvals,
        approval_policy=approval_policy,
        emit=emit,
        step=step,
        cancel=cancel,
        budget_tokens=None if room is None else room // max(len(calls), 1),
        chars_per_token=chars_per_token,
    )
    if recorder is not None:
        recorder.tool_batch(calls)
    batch = _Batch(
        calls,
        tools,
        policy=policy,
        hooks=hooks,
        steps=steps,
        recorder=recorder,
        truncated=truncated,
        interrupt=interrupt,
        loop_detector=loop_detector,
        emit=emit,
        step=step,
    )
    return await batch.run()


@dataclass(slots=True)
class _Call:
    """One call on its way through the batch."""

    index: int
    call: ToolCall
    tool: Tool | None
    arguments: dict[str, Any]
    claims: Claims | None = None
    key: str | None = None
    twin_of: int | None = None
    note: str | None = None
    cleared: bool = False


def _with_notes(content: str | tuple[ContentPart, ...], notes: list[str]) -> str | tuple[ContentPart, ...]:
    if not notes:
        return content
    if isinstance(content, str):
        return "\n\n".join([content, *notes] if content else notes)
    return (*content, *(TextPart(note) for note in notes))


class _Batch:
    """The state of one ``run_tool_calls``; see the module docstring for the stages."""

    def __init__(
        self,
        calls: Sequence[ToolCall],
        tools: Mapping[str, Tool],
        *,
        policy: ToolPolicy,
        hooks: ToolHooks,
        steps: CallSteps,
        recorder: StepRecorder | None,
        truncated: bool,
        interrupt: Callable[[], bool] | None,
        loop_detector: LoopGuard | None,
        emit: Callable[[Event], object],
        step: int,
    ) -> None:
        self._entries = [_Call(i, c, tools.get(c.name), dict(c.arguments)) for i, c in enumerate(calls)]
        self._tools = tools
        self._policy = policy
        self._hooks = hooks
        self._steps = steps
        self._recorder = recorder
        self._truncated = truncated
        self._interrupt = interrupt
        self._interrupted = False
        self._guard = loop_detector
        # A batch is one decision of the model's: six lookups that all answer "not found" are not six
        # tries that made no progress. One tool's same result is told to the guard once a batch.
        self._told: set[tuple[str, str]] = set()
        self._emit = emit
        self._step = step
        self._outcomes: dict[int, CallOutcome] = {}
        self._shared: dict[int, Answer] = {}
        self._active: dict[asyncio.Task[Any], tuple[Literal["run", "preflight"], int]] = {}
        self._scheduler = Scheduler(plan_calls([]))

    async def run(self) -> BatchOutcome:
        try:
            self._plan()
            await self._drive()
        finally:
            await self._cleanup()
        outcomes = tuple(self._outcomes[entry.index] for entry in self._entries)
        return BatchOutcome(
            outcomes,
            terminate=bool(outcomes) and all(outcome.terminate for outcome in outcomes),
            loop=self._guard.stop if self._guard is not None else None,
        )

    # -- planning ------------------------------------------------------------------------------------

    def _plan(self) -> None:
        refused: dict[int, Answer] = {}
        last_of: dict[str, int] = {}
        for entry in self._entries:
            if self._guard is not None and self._guard.stop is None:
                entry.note = self._guard.record_call(entry.call)
            if self._guard is not None and self._guard.stop is not None:
                refused[entry.index] = closed(LOOP_SKIPPED, "skipped")
                continue
            failure = self._prepare(entry)
            if failure is not None:
                refused[entry.index] = failure
            elif entry.key is not None:
                # Each repeat waits for the one before it, so a chain of repeats shares one answer.
                entry.twin_of = last_of.get(entry.key)
                last_of[entry.key] = entry.index
        sequential = not self._policy.parallel or any(
            e.tool is not None and e.tool.sequential for e in self._entries
        )
        plan = plan_calls(
            [None if e.index in refused else e.claims for e in self._entries],
            sequential=sequential,
            after={e.index: e.twin_of for e in self._entries if e.twin_of is not None},
        )
        # In a parallel batch every preflight starts now: the batch's approvals are asked together, and a
        # call waiting for a person holds no slot. A sequential batch preflights each call as it comes.
        preflight = [] if sequential else [e for e in self._entries if self._needs_preflight(e, refused)]
        held = {e.index for e in preflight}
        self._scheduler = Scheduler(
            plan,
            max_concurrency=0 if sequential else self._policy.max_concurrency,
            cleared=[e.index for e in self._entries if e.index not in held],
        )
        for index, answer in refused.items():
            self._scheduler.close(index)
            self._commit(self._entries[index], answer)
        for entry in preflight:
            assert entry.tool is not None
            task = asyncio.create_task(self._steps.preflight(entry.call, entry.tool, entry.arguments))
            self._active[task] = ("preflight", entry.index)

    def _prepare(self, entry: _Call) -> Answer | None:
        """Read, transform and claim one call's arguments; an answer when the call cannot run."""
        call, tool = entry.call, entry.tool
        if tool is None:
            entry.claims = "exclusive"
            return None
        if isinstance(call.raw_arguments, str):
            try:
                entry.arguments = parse_tool_arguments(call.raw_arguments, truncated=self._truncated)
            except ToolArgumentsError as exc:
                return closed(str(exc), "failed")
        if self._hooks.transform_arguments is not None:
            try:
                transformed = self._hooks.transform_arguments(copy.deepcopy(entry.arguments), call.name)
                if not isinstance(transformed, dict):
                    raise TypeError(f"it returned {type(transformed).__name__}, not a dict")
            except Exception as exc:
                return closed(f"The arguments could not be prepared: {describe(exc)}", "failed")
            entry.arguments = transformed
        try:
            entry.claims = claims_for_call(tool, entry.arguments)
        except Exception as exc:
            return closed(f"This call could not be planned: {describe(exc)}", "failed")
        if self._dedupes(call, tool):
            entry.key = f"{call.name}\x00{canonical_arguments(entry.arguments)}"
        return None

    def _dedupes(self, call: ToolCall, tool: Tool) -> bool:
        wanted = self._policy.dedupe
        if not tool.dedupe or wanted is False:
            return False
        if wanted is True:
            return True
        try:
            return bool(wanted(call))
        except Exception:
            return False  # when unsure, running twice is safer than answering for a call that never ran

    def _needs_preflight(self, entry: _Call, refused: Mapping[int, Answer]) -> bool:
        if entry.index in refused or entry.tool is None or entry.twin_of is not None:
            return False
        return self._steps.needs_preflight(entry.tool)

    # -- driving the scheduler ---------------------------------------------------------------------

    async def _drive(self) -> None:
        scheduler = self._scheduler
        while not scheduler.finished:
            self._close_unstartable()
            for index in scheduler.take():
                self._active[asyncio.create_task(self._dispatch(self._entries[index]))] = ("run", index)
            if scheduler.finished:
                break
            if not self._active:
                raise RuntimeError("tool batch stalled: calls wait but nothing runs")
            waiters: set[asyncio.Future[Any]] = set(self._active)
            watch = self._steps.watch()
            if watch is not None and not watch.done():
                waiters.add(watch)
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted((t for t in done if t in self._active), key=lambda t: self._active[t][1]):
                self._settle(task)

    def _settle(self, task: asyncio.Task[Any]) -> None:
        kind, index = self._active.pop(task)
        if kind == "run":
            task.result()  # a failure of the runner itself surfaces here
            self._scheduler.finish(index)
            return
        if task.cancelled() or index not in self._scheduler.waiting:
            return  # the call was closed while its preflight waited
        answer: Answer | None = task.result()
        if answer is None:
            self._entries[index].cleared = True
            self._scheduler.clear(index)
        else:
            self._scheduler.close(index)
            self._commit(self._entries[index], answer)

    def _stop_answer(self) -> Answer | None:
        """The answer for a call not yet started when the batch must start no more, else ``None``."""
        if self._steps.aborted:
            return closed(NOT_RUN, "aborted")
        if self._guard is not None and self._guard.stop is not None:
            return closed(LOOP_SKIPPED, "skipped")
        if not self._interrupted and self._interrupt is not None:
            self._interrupted = bool(self._interrupt())  # steering, once queued, stays queued
        return closed(SKIPPED, "skipped") if self._interrupted else None

    def _close_unstartable(self) -> None:
        waiting = self._scheduler.waiting
        answer = self._stop_answer() if waiting else None
        if answer is None:
            return
        preflights = {index: task for task, (kind, index) in self._active.items() if kind == "preflight"}
        for index in sorted(waiting):
            task = preflights.get(index)
            if task is not None:
                if answer.disposition == "aborted":
                    continue  # the preflight sees the abort itself and answers, with its approval closed
                task.cancel()
            self._scheduler.close(index)
            self._commit(self._entries[index], answer)

    async def _cleanup(self) -> None:
        """Cancel whatever still runs and wait for it: nothing this batch started outlives it unowned."""
        pending = [task for task in (*self._active, *self._steps.owned()) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        for task in pending:
            if not task.cancelled():
                task.exception()  # retrieved, so a failure during shutdown is not reported twice

    # -- one call ------------------------------------------------------------------------------------

    async def _dispatch(self, entry: _Call) -> None:
        if entry.tool is None or not self._in_force(entry):
            self._commit(entry, closed(self._unknown(entry.call.name), "failed"))
            return
        if entry.twin_of is not None:
            shared = self._shared.get(entry.twin_of)
            if shared is not None:
                self._commit(entry, replace(shared, ran=False))
                return
        while not entry.cleared:
            refused = await self._steps.preflight(entry.call, entry.tool, entry.arguments)
            if refused is not None:
                self._commit(entry, refused)
                return
            entry.cleared = True
            # The tools may have changed while a person decided: the one in force now is what runs.
            if not self._in_force(entry):
                self._commit(entry, closed(self._unknown(entry.call.name), "failed"))
                return
        # Steering or an abort may have arrived while the preflight waited.
        late = self._stop_answer()
        if late is not None:
            self._commit(entry, late)
            return
        assert entry.tool is not None
        started = time.monotonic()
        call = entry.call
        self._emit(
            ToolExecutionStart(
                call_id=call.id,
                name=call.name,
                arguments=copy.deepcopy(entry.arguments),
                effect=entry.tool.effect,
                description=entry.tool.description,
                step=self._step,
            )
        )
        execute = partial(
            self._steps.execute,
            call,
            entry.tool,
            entry.arguments,
            is_open=lambda: entry.index not in self._outcomes,
        )
        answer = await (execute() if self._recorder is None else self._recorder.tool_execution(call, execute))
        answer = await self._steps.after(call, answer)
        self._commit(entry, answer, duration_ms=(time.monotonic() - started) * 1000)

    def _commit(self, entry: _Call, answer: Answer, *, duration_ms: float | None = None) -> None:
        """Give a call its terminal result: notes added, shared with its repeats, ``ToolExecutionEnd``."""
        call, result = entry.call, answer.result
        notes = [entry.note] if entry.note else []
        if answer.ran and self._guard is not None:
            told = (call.name, text_of(result.content))
            if told not in self._told:
                self._told.add(told)
                note = self._guard.record_result(*told)
                if note:
                    notes.append(note)
        if entry.key is not None and answer.disposition != "failed":
            # A throw is not shared: the repeat of a call that raised runs for real.
            self._shared[entry.index] = replace(answer, origin=answer.origin or call.id)
        message = ToolResultMessage(
            call_id=call.id,
            content=_with_notes(result.content, notes),
            is_error=result.is_error or answer.disposition != "completed",
            name=call.name,
            disposition=answer.disposition,
        )
        outcome = CallOutcome(
            call=call,
            result=message,
            disposition=answer.disposition,
            details=dict(result.details),
            duration_ms=duration_ms,
            terminate=result.terminate,
            shared_from=answer.origin,
        )
        self._outcomes[entry.index] = outcome
        self._emit(
            ToolExecutionEnd(
                call_id=call.id,
                name=call.name,
                result=message,
                disposition=answer.disposition,
                duration_ms=duration_ms,
                effect=entry.tool.effect if entry.tool is not None else None,
                error_type=answer.raised,
                step=self._step,
            )
        )

    def _in_force(self, entry: _Call) -> bool:
        """Whether the call's tool is still among the tools, looked up now: a host may change them while a
        batch runs. A tool of the same name put in its place is the one that runs, after its own preflight.
        """
        current = self._tools.get(entry.call.name)
        if current is None:
            return False
        if current is not entry.tool:
            entry.tool, entry.cleared = current, not self._steps.needs_preflight(current)
        return True

    def _unknown(self, name: str) -> str:
        names = sorted(self._tools)
        if not names:
            return f"Unknown tool {name!r}: no tools are available."
        return f"Unknown tool {name!r}. Available tools: {', '.join(names)}."
