"""Approvals: a person (or a service) decides whether a gated tool call may run.

``ApprovalPolicy`` says which calls are gated: those whose tool's effect class it lists (``destructive`` by
default), and any tool it names in ``overrides``. A gated call is announced to an ``ApprovalBroker`` and runs
only after an ``allow``. Silence is never consent: no decision within ``timeout_s`` is a deny (reason
``timeout``, enforced here even when the broker's own calls never return), an aborted run is a deny
(``aborted``), a broker that fails or answers something other than a decision is a deny that says so,
and with no broker at all the deny is immediate (``no approval surface``). ``InMemoryApprovalBroker`` is
the broker for one process: a host shows ``pending()`` to someone and calls ``decide``.

``seek_approval`` is what the tool runner calls for one gated call; it emits ``ApprovalRequired`` and
``ApprovalDecided``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ..errors import InvalidInput
from ..events import ApprovalDecided, ApprovalRequired, Event
from ..messages import ToolCall
from .definition import EFFECT_CLASSES, EffectClass, Tool

__all__ = [
    "ApprovalBroker",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRequest",
    "InMemoryApprovalBroker",
    "seek_approval",
]

Verdict: TypeAlias = Literal["allow", "deny"]

NO_SURFACE = "no approval surface"
# How long recording a deny at the broker may take before the run goes on without it.
_CLOSE_S = 2.0
# Who decided, for denies nobody typed: the runner made them on the person's behalf.
AUTOMATIC = "steadyloop"


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """Which tool calls wait for a decision.

    Attributes:
        require_for: effect classes that are gated. A tool with no effect class is not gated by this.
        overrides: per tool name, ``True`` to gate it whatever its effect, ``False`` to never gate it.
        timeout_s: how long a decision may take; after that the call is denied.
    """

    require_for: frozenset[EffectClass] = frozenset({"destructive"})
    overrides: Mapping[str, bool] = field(default_factory=dict)
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        unknown = set(self.require_for) - set(EFFECT_CLASSES)
        if unknown:
            raise InvalidInput(f"ApprovalPolicy.require_for: unknown effect classes {sorted(unknown)}")
        if not self.timeout_s > 0:
            raise InvalidInput(f"ApprovalPolicy.timeout_s must be > 0, got {self.timeout_s!r}")

    def requires(self, tool: Tool) -> bool:
        """Whether calls to this tool wait for a decision."""
        if tool.name in self.overrides:
            return bool(self.overrides[tool.name])
        return tool.effect is not None and tool.effect in self.require_for


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A gated call, as shown to whoever decides.

    Attributes:
        expires_at: wall-clock time (``time.time()``) after which the call is denied.
    """

    approval_id: str
    call_id: str
    name: str
    arguments: dict[str, Any]
    effect: EffectClass | None
    expires_at: float


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """What was decided, why, and by whom."""

    decision: Verdict
    reason: str = ""
    decided_by: str = ""

    @property
    def allowed(self) -> bool:
        """The call may run."""
        return self.decision == "allow"


class ApprovalBroker(Protocol):
    """Where gated calls wait for a decision."""

    async def request(self, request: ApprovalRequest) -> None:
        """Announce a call that waits for a decision."""

    async def decide(
        self, approval_id: str, decision: Verdict, reason: str = "", decided_by: str = ""
    ) -> bool:
        """Decide a pending request; ``False`` when it is unknown or already decided."""

    def pending(self) -> list[ApprovalRequest]:
        """The requests still waiting, oldest first."""

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        """The decision on a request, or a deny with reason ``timeout`` after ``timeout_s`` seconds."""


class InMemoryApprovalBroker:
    """An ``ApprovalBroker`` inside one process, on asyncio futures."""

    def __init__(self) -> None:
        self._requests: dict[str, ApprovalRequest] = {}
        self._futures: dict[str, asyncio.Future[ApprovalDecision]] = {}

    async def request(self, request: ApprovalRequest) -> None:
        """Announce a call that waits for a decision.

        Raises:
            InvalidInput: a request with this id is already known.
        """
        if request.approval_id in self._futures:
            raise InvalidInput(f"approval {request.approval_id} was already requested")
        self._requests[request.approval_id] = request
        self._futures[request.approval_id] = asyncio.get_running_loop().create_future()

    async def decide(
        self, approval_id: str, decision: Verdict, reason: str = "", decided_by: str = ""
    ) -> bool:
        """Decide a pending request; ``False`` when it is unknown or already decided."""
        if decision not in ("allow", "deny"):
            raise InvalidInput(f"decision must be 'allow' or 'deny', not {decision!r}")
        future = self._futures.get(approval_id)
        if future is None or future.done():
            return False
        future.set_result(ApprovalDecision(decision, reason, decided_by))
        self._requests.pop(approval_id, None)
        return True

    def pending(self) -> list[ApprovalRequest]:
        """The requests still waiting, oldest first."""
        return list(self._requests.values())

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        """The decision on a request, or a deny with reason ``timeout`` after ``timeout_s`` seconds.

        Raises:
            InvalidInput: no request with this id is waiting.
        """
        future = self._futures.get(approval_id)
        if future is None:
            raise InvalidInput(f"no approval {approval_id} is waiting")
        try:
            # Shielded so that a caller giving up does not cancel the future a late ``decide`` would set.
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(future)
        except TimeoutError:
            await self.decide(approval_id, "deny", "timeout", AUTOMATIC)
            return future.result()
        finally:
            if future.done():
                self._futures.pop(approval_id, None)


async def seek_approval(
    call: ToolCall,
    tool: Tool,
    arguments: dict[str, Any],
    *,
    policy: ApprovalPolicy,
    broker: ApprovalBroker | None,
    emit: Callable[[Event], object],
    step: int = 0,
    stop: asyncio.Event | None = None,
) -> ApprovalDecision:
    """Ask for a decision on one gated call and wait for it, emitting the request and the decision.

    Args:
        call: the call.
        tool: its tool.
        arguments: the arguments it would run with.
        policy: for the timeout.
        broker: where to ask; ``None`` denies at once.
        emit: receives ``ApprovalRequired`` and ``ApprovalDecided``.
        step: the step, for the events.
        stop: the run's abort; setting it ends the wait with a deny (reason ``aborted``).

    Returns:
        The decision. Anything but an explicit allow is a deny: a timeout, an abort, a broker that failed
        or answered something other than an ``ApprovalDecision``, a task cancelled while waiting
        (``cancelled``, and the cancellation goes on). ``policy.timeout_s`` bounds announcing the request
        and waiting for its decision together, and the run's abort ends either at once, whatever the
        broker does.
    """
    approval_id = f"approval_{uuid.uuid4().hex}"
    request = ApprovalRequest(
        approval_id=approval_id,
        call_id=call.id,
        name=call.name,
        arguments=dict(arguments),
        effect=tool.effect,
        expires_at=time.time() + policy.timeout_s,
    )
    deadline = time.monotonic() + policy.timeout_s
    announced = False

    def required() -> None:
        nonlocal announced
        if not announced:
            announced = True
            emit(
                ApprovalRequired(
                    approval_id=approval_id,
                    call_id=call.id,
                    name=call.name,
                    arguments=dict(arguments),
                    effect=tool.effect,
                    expires_at=request.expires_at,
                    step=step,
                )
            )

    try:
        if broker is None:
            decision = ApprovalDecision("deny", NO_SURFACE, AUTOMATIC)
        else:
            refused = await _announce(broker, request, deadline, stop)
            required()
            decision = refused or await _decision(broker, approval_id, deadline, stop)
        required()
    except asyncio.CancelledError:
        decision = ApprovalDecision("deny", "cancelled", AUTOMATIC)
        if broker is not None:
            await _close(broker, approval_id, decision)
        required()
        _decided(emit, call, approval_id, decision, step)
        raise
    if broker is not None and decision.decided_by == AUTOMATIC:
        await _close(broker, approval_id, decision)
    _decided(emit, call, approval_id, decision, step)
    return decision


async def _race(
    awaitable: Awaitable[Any], deadline: float, stop: asyncio.Event | None
) -> tuple[Literal["done", "timeout", "aborted"], asyncio.Future[Any]]:
    """Run a broker call until it ends, the deadline passes or the run is aborted, whichever is first.

    The bound does not trust the broker to honour a timeout of its own: a gated tool must never run on
    silence, nor wait forever for it. What is still running when the race ends is cancelled.
    """
    call = asyncio.ensure_future(awaitable)
    watch = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        watched: set[asyncio.Future[Any]] = {call} if watch is None else {call, watch}
        left = max(deadline - time.monotonic(), 0.0)
        done, _ = await asyncio.wait(watched, timeout=left, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (call, watch):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
    if stop is not None and stop.is_set():
        return "aborted", call
    if call not in done:
        return "timeout", call
    return "done", call


def _failure_of(call: asyncio.Future[Any]) -> str | None:
    """How a finished broker call failed, or ``None`` when it returned."""
    if call.cancelled():
        return "cancelled"
    error = call.exception()
    return None if error is None else _describe(error)


def _unanswered(
    outcome: Literal["done", "timeout", "aborted"], call: asyncio.Future[Any], failed: str
) -> ApprovalDecision | None:
    """The deny for a broker call that was aborted, timed out or failed (``failed`` says which call), else
    ``None``: it returned."""
    if outcome != "done":
        return ApprovalDecision("deny", outcome, AUTOMATIC)
    failure = _failure_of(call)
    if failure is not None:
        return ApprovalDecision("deny", f"{failed} ({failure})", AUTOMATIC)
    return None


async def _announce(
    broker: ApprovalBroker, request: ApprovalRequest, deadline: float, stop: asyncio.Event | None
) -> ApprovalDecision | None:
    """Tell the broker about the call; a deny when that fails, times out or is aborted, else ``None``."""
    outcome, call = await _race(broker.request(request), deadline, stop)
    return _unanswered(outcome, call, "the approval request failed")


async def _decision(
    broker: ApprovalBroker, approval_id: str, deadline: float, stop: asyncio.Event | None
) -> ApprovalDecision:
    """The broker's decision, raced against the run's abort and bounded by the deadline ourselves.

    Anything but a well-formed decision is a deny whose reason says what the broker did instead.
    """
    left = max(deadline - time.monotonic(), 0.0)
    outcome, call = await _race(broker.wait(approval_id, left), deadline, stop)
    denied = _unanswered(outcome, call, "the approval broker failed")
    if denied is not None:
        return denied
    decision = call.result()
    if not isinstance(decision, ApprovalDecision):
        shown = type(decision).__name__
        return ApprovalDecision("deny", f"the approval broker answered a {shown}, not a decision", AUTOMATIC)
    if decision.decision not in ("allow", "deny"):
        return ApprovalDecision("deny", f"the broker answered {decision.decision!r}", AUTOMATIC)
    if not isinstance(decision.reason, str) or not isinstance(decision.decided_by, str):
        return ApprovalDecision(
            decision.decision,
            decision.reason if isinstance(decision.reason, str) else str(decision.reason),
            decision.decided_by if isinstance(decision.decided_by, str) else str(decision.decided_by),
        )
    return decision


async def _close(broker: ApprovalBroker, approval_id: str, decision: ApprovalDecision) -> None:
    """Record a deny the runner made at the broker, so it no longer shows the request as pending.

    Bounded: a broker that hangs here must not hold the run that is being denied or stopped.
    """
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_CLOSE_S):
            await broker.decide(approval_id, "deny", decision.reason, AUTOMATIC)


def _decided(
    emit: Callable[[Event], object], call: ToolCall, approval_id: str, decision: ApprovalDecision, step: int
) -> None:
    emit(
        ApprovalDecided(
            approval_id=approval_id,
            call_id=call.id,
            decision=decision.decision,
            reason=decision.reason,
            decided_by=decision.decided_by,
            step=step,
        )
    )


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no error"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
