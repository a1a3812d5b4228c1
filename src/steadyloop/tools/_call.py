"""Internal: the stages one tool call goes through once its batch lets it, for ``run_tool_calls``.

``CallSteps`` holds what every call of a batch shares (hooks, policies, the run's abort) and runs the
preflight (``before_tool_call``, then the approval gate), the tool itself raced against its timeout and the
abort, and ``after_tool_call``. Each stage answers with an ``Answer``: the result and its disposition, before
the batch adds notes and commits it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from ..errors import error_type
from ..events import Disposition, Event, HookDenied, LateSettlement, Notice, ToolExecutionUpdate
from ..messages import ToolCall, text_of
from ..sizing.tokens import CHARS_PER_TOKEN
from .approvals import NO_SURFACE, ApprovalBroker, ApprovalDecision, ApprovalPolicy, seek_approval
from .batch import HookDecision, ToolHooks, ToolPolicy
from .definition import Tool, ToolContext, ToolResult

T = TypeVar("T")

NOT_RUN = "Not run: the run stopped first."
STOPPED = "Stopped before this call finished."
SKIPPED = "Skipped due to queued user message."
LOOP_SKIPPED = "Not run: the same tool calls keep repeating, so the run is stopping."
_LATE_TEXT = 1000

# Tools closed by a timeout or an abort that ignored their cancellation. Held here so they are not garbage
# collected mid-flight; each one leaves when it settles, reporting a late settlement.
_UNSETTLED: set[asyncio.Task[ToolResult]] = set()
_UNSETTLED_THREADS: set[asyncio.Future[Any]] = set()


@dataclass(frozen=True, slots=True)
class Answer:
    """A call's terminal result before notes are added.

    Attributes:
        ran: the tool itself produced it (so the loop guard records it and ``after_tool_call`` sees it).
        origin: for a shared answer, the id of the call that produced it.
        raised: when the tool raised, the class of what it raised (see ``steadyloop.errors.error_type``).
    """

    result: ToolResult
    disposition: Disposition
    ran: bool = False
    origin: str | None = None
    raised: str | None = None


_CANCELLED_ITSELF = error_type(asyncio.CancelledError())


def closed(text: str, disposition: Disposition) -> Answer:
    """An error answer for a call the tool never answered."""
    return Answer(ToolResult(text, is_error=True), disposition)


def describe(exc: BaseException) -> str:
    """An exception as the model reads it: its type and its message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _invoke(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    return ToolResult.of(await tool.execute(arguments, context))


class CallSteps:
    """Preflight, execution and post-processing of single calls, sharing one batch's settings.

    Args:
        cancel: the run's abort; every wait below ends when it is set.
        budget_tokens: each call's share of the room the window has for the batch's results.
        chars_per_token: the model's measured ratio, handed to each call with its budget.
    """

    def __init__(
        self,
        *,
        policy: ToolPolicy,
        hooks: ToolHooks,
        broker: ApprovalBroker | None,
        approval_policy: ApprovalPolicy,
        emit: Callable[[Event], object],
        step: int,
        cancel: asyncio.Event | None,
        budget_tokens: int | None = None,
        chars_per_token: float = CHARS_PER_TOKEN,
    ) -> None:
        self._budget = budget_tokens
        self._ratio = chars_per_token
        self._policy = policy
        self._hooks = hooks
        self._broker = broker
        self._approval_policy = approval_policy
        self._emit = emit
        self._step = step
        self._cancel = cancel
        self._watch: asyncio.Task[Literal[True]] | None = None
        # Tools running now; a batch that is itself cancelled cancels them and waits for them.
        self.tool_tasks: set[asyncio.Task[ToolResult]] = set()

    @property
    def aborted(self) -> bool:
        """The run's abort is set."""
        return self._cancel is not None and self._cancel.is_set()

    def watch(self) -> asyncio.Task[Literal[True]] | None:
        """The one task that finishes when the run is aborted, raced against every wait; started lazily."""
        if self._watch is None and self._cancel is not None:
            self._watch = asyncio.create_task(self._cancel.wait())
        return self._watch

    def owned(self) -> list[asyncio.Task[Any]]:
        """The tasks this object started that a cancelled batch must cancel and wait for."""
        tasks: list[asyncio.Task[Any]] = list(self.tool_tasks)
        if self._watch is not None:
            tasks.append(self._watch)
        return tasks

    def needs_preflight(self, tool: Tool) -> bool:
        """Whether a call to this tool has a hook or a gate to pass before it may run."""
        return self._hooks.before_tool_call is not None or self._approval_policy.requires(tool)

    async def preflight(self, call: ToolCall, tool: Tool, arguments: dict[str, Any]) -> Answer | None:
        """The before hook, then the approval gate; the refusal, or ``None`` when the call may run."""
        if self.aborted:
            return closed(NOT_RUN, "aborted")
        hook = self._hooks.before_tool_call
        if hook is not None:
            try:
                value: object = hook(call, copy.deepcopy(arguments))
                if inspect.isawaitable(value):
                    finished, value = await self._unless_aborted(value)
                    if not finished:
                        return closed(NOT_RUN, "aborted")
                if value is not None and not isinstance(value, HookDecision):
                    raise TypeError(f"it returned {type(value).__name__}, not a HookDecision")
                decision = value
            except Exception as exc:
                # A guard that broke must not wave the call through.
                decision = HookDecision.block(f"the before_tool_call hook failed ({describe(exc)})")
            if decision is not None and decision.action == "block":
                reason = decision.reason or "no reason given"
                self._emit(
                    HookDenied(hook="before_tool_call", reason=reason, call_id=call.id, step=self._step)
                )
                return closed(f"Blocked: {reason}", "blocked")
        if self._approval_policy.requires(tool):
            verdict = await seek_approval(
                call,
                tool,
                arguments,
                policy=self._approval_policy,
                broker=self._broker,
                emit=self._emit,
                step=self._step,
                stop=self._cancel,
            )
            if not verdict.allowed:
                return (
                    closed(NOT_RUN, "aborted") if self.aborted else closed(self._denial(verdict), "blocked")
                )
        return None

    async def execute(
        self, call: ToolCall, tool: Tool, arguments: dict[str, Any], *, is_open: Callable[[], bool]
    ) -> Answer:
        """The tool raced against its timeout and the run's abort.

        Args:
            is_open: whether the call still waits for its result; progress reported after that is dropped.
        """
        context = ToolContext(
            call_id=call.id,
            name=call.name,
            raw_arguments=call.raw_arguments,
            progress=self._progress(call, is_open),
            budget_tokens=self._budget,
            chars_per_token=self._ratio,
        )
        task = asyncio.create_task(_invoke(tool, copy.deepcopy(arguments), context))
        self.tool_tasks.add(task)
        timeout = self._policy.timeout_for(tool)
        watch = self.watch()
        watched: set[asyncio.Future[Any]] = {task} if watch is None else {task, watch}
        try:
            await asyncio.wait(watched, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            context.cancelled.set()  # the batch cancels the task and waits for it
            raise
        if task.done():
            self.tool_tasks.discard(task)
            if task.cancelled():
                text = "CancelledError: the tool cancelled itself"
                return Answer(ToolResult(text, is_error=True), "failed", True, raised=_CANCELLED_ITSELF)
            error = task.exception()
            if error is not None:
                return Answer(
                    ToolResult(describe(error), is_error=True), "failed", True, raised=error_type(error)
                )
            return Answer(task.result(), "completed", True)
        aborted = self.aborted
        context.cancelled.set()
        task.cancel()
        self._abandon(task, call, context)
        return closed(STOPPED, "aborted") if aborted else closed(f"Timed out after {timeout:g}s.", "timeout")

    async def after(self, call: ToolCall, answer: Answer) -> Answer:
        """``after_tool_call`` on what the tool answered or raised; a broken hook keeps the tool's result."""
        hook = self._hooks.after_tool_call
        if hook is None or not answer.ran:
            return answer
        try:
            value: object = hook(call, answer.result)
            if inspect.isawaitable(value):
                finished, value = await self._unless_aborted(value)
                if not finished:
                    return closed(STOPPED, "aborted")
            if value is None:
                return answer
            if not isinstance(value, ToolResult):
                raise TypeError(f"it returned {type(value).__name__}, not a ToolResult")
            return replace(answer, result=value)
        except Exception as exc:
            text = (
                f"after_tool_call failed for {call.name} ({describe(exc)}); the tool's own result was kept."
            )
            self._emit(Notice(text=text, name="after_tool_call", step=self._step))
            return answer

    async def _unless_aborted(self, awaitable: Awaitable[T]) -> tuple[bool, T | None]:
        """Await a hook unless the run is aborted first; ``(False, None)`` when it was."""
        watch = self.watch()
        if watch is None:
            return True, await awaitable
        task = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                # Hooks are expected to honour cancellation, so waiting for them is safe, unlike tools.
                task.cancel()
                await asyncio.wait({task})
        if task.cancelled():
            return False, None
        return True, task.result()

    def _progress(self, call: ToolCall, is_open: Callable[[], bool]) -> Callable[[str], None]:
        """A progress callback that is safe from a worker thread and silent once the call is closed."""
        loop = asyncio.get_running_loop()
        owner = threading.get_ident()

        def update(text: str) -> None:
            if is_open():
                self._emit(ToolExecutionUpdate(call_id=call.id, name=call.name, text=text, step=self._step))

        def report(text: str) -> None:
            if threading.get_ident() == owner:
                update(str(text))
            else:
                # Events belong to the loop's thread, and a sync tool reports from a worker thread.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(update, str(text))

        return report

    def _abandon(self, task: asyncio.Task[ToolResult], call: ToolCall, context: ToolContext) -> None:
        """Let a closed call's tool settle in the background, reporting it if it finishes anyway.

        A sync tool's task ends as soon as it is cancelled, but its thread runs on: then the thread's
        own outcome is what settles, and what is reported.
        """
        self.tool_tasks.discard(task)
        _UNSETTLED.add(task)
        audit = self._policy.late_settlement == "audit"
        emit, step = self._emit, self._step

        def report(error: BaseException | None, result: ToolResult | None) -> None:
            if not audit:
                return
            outcome: Literal["completed", "failed"] = "completed" if error is None else "failed"
            text = describe(error) if error is not None else text_of(result.content) if result else ""
            emit(
                LateSettlement(
                    call_id=call.id, name=call.name, outcome=outcome, text=text[:_LATE_TEXT], step=step
                )
            )

        def thread_settled(done: asyncio.Future[Any]) -> None:
            _UNSETTLED_THREADS.discard(done)
            if done.cancelled():
                return
            error = done.exception()
            if error is not None:
                report(error, None)
                return
            try:
                result = ToolResult.of(done.result())
            except Exception as exc:
                report(exc, None)
                return
            report(None, result)

        def settled(done: asyncio.Task[ToolResult]) -> None:
            _UNSETTLED.discard(done)
            if done.cancelled():
                worker = context.worker
                if worker is not None and not worker.done():
                    _UNSETTLED_THREADS.add(worker)
                    worker.add_done_callback(thread_settled)
                return  # otherwise it honoured the cancellation: nothing settled
            error = done.exception()  # retrieved even when not reported, so asyncio does not log it
            report(error, None if error is not None else done.result())

        task.add_done_callback(settled)

    def _denial(self, verdict: ApprovalDecision) -> str:
        if verdict.reason == "timeout":
            return f"Denied: timeout (no decision within {self._approval_policy.timeout_s:g}s)"
        if verdict.reason == NO_SURFACE:
            return f"Denied: {NO_SURFACE} (this tool needs an approval and nobody can give one)"
        return f"Denied: {verdict.reason or 'by ' + (verdict.decided_by or 'the approver')}"
