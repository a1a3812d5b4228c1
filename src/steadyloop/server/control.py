"""What a client may tell a run from outside while it goes: steer it, queue a follow-up, abort it, decide
one of its approvals.

An ``Order`` is the value; ``apply`` carries it out on the session as this process runs it. The routes
apply an order here when the run is here; with durable runs on several nodes, an order for a run going
on another node travels to that node through PostgreSQL (``DurableRuns.forward``) and is applied there,
with the same checks and the same errors.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

from steadyloop import QueueClosed

from .errors import ApiError
from .live import LiveSession

__all__ = ["Order", "apply"]

Kind = Literal["steer", "follow_up", "abort", "decide"]


@dataclass(frozen=True, slots=True)
class Order:
    """One thing to do to a session's run.

    Attributes:
        kind: what to do.
        text: the message, for ``steer`` and ``follow_up``.
        approval_id: the approval, for ``decide``.
        decision: ``allow`` or ``deny``, for ``decide``.
        reason: why, for ``decide``.
        decided_by: the principal deciding, for ``decide``.
    """

    kind: Kind
    text: str = ""
    approval_id: str = ""
    decision: Literal["allow", "deny"] = "deny"
    reason: str = ""
    decided_by: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> Order:
        return Order(**json.loads(text))


async def apply(live: LiveSession, order: Order) -> None:
    """Carry ``order`` out on the session's run as this process runs it.

    Raises:
        ApiError: ``no_run_in_progress`` when nothing is going to steer or abort; ``not_found`` or
            ``already_decided`` for an approval that is not waiting.
    """
    sid = live.session_id
    if order.kind == "abort":
        if not live.busy:
            raise ApiError("no_run_in_progress", "nothing is running in this session")
        live.agent.abort()  # the run, or the summary of a move to another entry
        return
    if order.kind in ("steer", "follow_up"):
        if live.taking_messages and _queued(live, order):
            return
        # Refused, never kept for the next run: there it would come after that run's own message.
        raise ApiError(
            "no_run_in_progress",
            f"no run in this session can take this message to {order.kind.replace('_', ' ')}: "
            + ("its run has ended" if live.running else "nothing is running"),
            hint=f"POST /sessions/{sid}/messages to start a run with it",
        )
    broker, approval_id = live.approvals, order.approval_id
    if not broker.is_pending(approval_id):
        earlier = broker.decision(approval_id)
        if earlier is not None:
            raise ApiError(
                "already_decided",
                f"approval {approval_id!r} was already decided: {earlier.decision}"
                + (f" ({earlier.reason})" if earlier.reason else ""),
            )
        raise ApiError("not_found", f"no approval {approval_id!r} is waiting in this session")
    if not await broker.decide(approval_id, order.decision, order.reason, order.decided_by):
        raise ApiError("already_decided", f"approval {approval_id!r} was decided meanwhile")


def _queued(live: LiveSession, order: Order) -> bool:
    """Queue a steer or a follow-up on the session's agent; ``False`` when its run just ended."""
    try:
        if order.kind == "steer":
            live.agent.steer(order.text)
        else:
            live.agent.follow_up(order.text)
    except QueueClosed:
        return False
    return True
