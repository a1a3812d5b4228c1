"""The values of running one step's tool calls: how a batch runs and what came of it.

``ToolPolicy`` (parallelism, dedupe, timeouts), ``ToolHooks`` with ``HookDecision``, and the ``LoopGuard``
protocol go into ``run_tool_calls`` (``steadyloop.tools.execution``, which re-exports them all);
``BatchOutcome``, with one ``CallOutcome`` per call, comes out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ..errors import InvalidInput
from ..events import Disposition
from ..messages import ToolCall, ToolResultMessage
from .definition import Tool, ToolResult
from .loop_detection import LoopVerdict

__all__ = [
    "AfterToolCall",
    "BatchOutcome",
    "BeforeToolCall",
    "CallOutcome",
    "HookDecision",
    "LoopGuard",
    "ToolHooks",
    "ToolPolicy",
    "TransformArguments",
]


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How a step's calls are run.

    Attributes:
        parallel: run calls whose claims do not conflict at the same time; ``False`` runs one at a time.
        max_concurrency: the most calls running at once in a parallel batch; ``0`` for no cap.
        dedupe: let identical calls in one step share one answer; a predicate decides per call.
        timeout: seconds any call may take when neither its tool nor ``timeouts`` says.
        timeouts: seconds per tool name, over ``timeout``.
        late_settlement: ``"audit"`` emits ``LateSettlement`` when a closed call's tool finishes anyway.
    """

    parallel: bool = True
    max_concurrency: int = 4
    dedupe: bool | Callable[[ToolCall], bool] = True
    timeout: float | None = None
    timeouts: Mapping[str, float] = field(default_factory=dict)
    late_settlement: Literal["audit", "ignore"] = "audit"

    def __post_init__(self) -> None:
        if self.max_concurrency < 0:
            raise InvalidInput(f"ToolPolicy.max_concurrency must be >= 0, got {self.max_concurrency}")
        if self.late_settlement not in ("audit", "ignore"):
            raise InvalidInput(
                f"ToolPolicy.late_settlement must be 'audit' or 'ignore', not {self.late_settlement!r}"
            )

    def timeout_for(self, tool: Tool) -> float | None:
        """Seconds this tool's calls may take: the tool's own, else per name, else the fallback.

        The first of these that is set decides, and ``0`` there means no timer.
        """
        for seconds in (tool.timeout, self.timeouts.get(tool.name), self.timeout):
            if seconds is not None:
                return seconds if seconds > 0 else None
        return None


@dataclass(frozen=True, slots=True)
class HookDecision:
    """What ``before_tool_call`` answered: let the call run, or block it with a reason the model reads."""

    action: Literal["allow", "block"] = "allow"
    reason: str = ""

    @classmethod
    def allow(cls) -> HookDecision:
        """Let the call run."""
        return cls("allow")

    @classmethod
    def block(cls, reason: str) -> HookDecision:
        """Do not run the call; the model reads ``Blocked: <reason>``."""
        return cls("block", reason)


BeforeToolCall: TypeAlias = Callable[
    [ToolCall, dict[str, Any]], "HookDecision | Awaitable[HookDecision | None] | None"
]
AfterToolCall: TypeAlias = Callable[
    [ToolCall, ToolResult], "ToolResult | Awaitable[ToolResult | None] | None"
]
TransformArguments: TypeAlias = Callable[[dict[str, Any], str], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ToolHooks:
    """Code the host runs around each call.

    Attributes:
        before_tool_call: after the arguments are read, before approval; may await a decision (an abort of
            the run ends the wait). Raising blocks the call: a broken guard must not wave calls through.
        after_tool_call: after the tool answered or raised; may replace the result (also to set
            ``terminate``). Raising keeps the tool's own result and emits a ``Notice``.
        transform_arguments: rewrites the arguments before anything else sees them; raising fails the call.
    """

    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    transform_arguments: TransformArguments | None = None


class LoopGuard(Protocol):
    """What ``run_tool_calls`` needs of a loop detector (``ToolLoopDetector`` is one)."""

    def record_call(self, call: ToolCall) -> str | None:
        """Record a call about to run; a note for the model when it repeats a pattern."""

    def record_result(self, name: str, text: str) -> str | None:
        """Record what a call returned; a note for the model when nothing changes."""

    @property
    def stop(self) -> LoopVerdict | None:
        """Why the run should end, once a loop went on past its notes."""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """The terminal result of one call.

    Attributes:
        call: the call.
        result: the message the transcript keeps.
        disposition: how it ended.
        details: the tool's details for the host (never sent to the model).
        duration_ms: how long the tool ran; ``None`` when it never ran.
        terminate: the result asked the loop to stop after this batch.
        shared_from: the id of the identical call whose answer this one shares.
    """

    call: ToolCall
    result: ToolResultMessage
    disposition: Disposition
    details: Mapping[str, Any] = field(default_factory=dict)
    duration_ms: float | None = None
    terminate: bool = False
    shared_from: str | None = None


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """A step's calls, answered.

    Attributes:
        outcomes: one per call, in the assistant's call order.
        terminate: every result asked the loop to stop (never for an empty batch).
        loop: the loop guard's verdict when the run should stop for repeating itself.
    """

    outcomes: tuple[CallOutcome, ...]
    terminate: bool = False
    loop: LoopVerdict | None = None

    @property
    def results(self) -> list[ToolResultMessage]:
        """The result messages, in call order."""
        return [outcome.result for outcome in self.outcomes]
