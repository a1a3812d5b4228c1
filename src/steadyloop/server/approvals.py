"""Approvals decided over HTTP: a session's gated calls wait here for ``POST .../approvals/{id}``.

One broker per session. It tells an unknown id from one already decided, so the route can answer 404 for
the first and 409 for the second. Silence is still a deny: the runner bounds the wait by the session's
approval timeout whatever the broker does, and the decision (a person's or the timeout's) is an
``approval_decided`` event in the session's record, which every watcher sees.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Literal

from steadyloop import ApprovalDecision, ApprovalRequest
from steadyloop.tools import InMemoryApprovalBroker

__all__ = ["RemoteApprovals"]

Verdict = Literal["allow", "deny"]
_REMEMBERED = 256


class RemoteApprovals:
    """An ``ApprovalBroker`` for one session, decided by whoever holds the session's token."""

    def __init__(self) -> None:
        self._waiting = InMemoryApprovalBroker()
        self._decided: OrderedDict[str, ApprovalDecision] = OrderedDict()

    async def request(self, request: ApprovalRequest) -> None:
        await self._waiting.request(request)

    async def decide(
        self, approval_id: str, decision: Verdict, reason: str = "", decided_by: str = ""
    ) -> bool:
        decided = await self._waiting.decide(approval_id, decision, reason, decided_by)
        if decided:
            self._decided[approval_id] = ApprovalDecision(decision, reason, decided_by)
            while len(self._decided) > _REMEMBERED:
                self._decided.popitem(last=False)
        return decided

    def pending(self) -> list[ApprovalRequest]:
        return self._waiting.pending()

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        return await self._waiting.wait(approval_id, timeout_s)

    def decision(self, approval_id: str) -> ApprovalDecision | None:
        """What was decided on a request no longer waiting, if this broker remembers it."""
        return self._decided.get(approval_id)

    def is_pending(self, approval_id: str) -> bool:
        return any(request.approval_id == approval_id for request in self.pending())
