"""Planning which of one step's tool calls may run together; no I/O, no clock, no asyncio.

Each call declares what it touches as resource claims. Two calls conflict when either runs alone
(``"exclusive"``: unclaimed tools, unknown tools and tools that ask for it), or when they share a key and at
least one of them writes it; reads of one key share it. ``plan_calls`` turns the claims into a DAG directed by
source order: a call waits for every earlier call it conflicts with, and never for a later one, so the order
the model wrote its calls in decides who goes first. ``Scheduler`` then hands out the calls that may start,
within a cap on how many run at once.

A call that is already answered before it runs (its arguments could not be read, its claims could not be
worked out, a hook blocked it) is *closed*: it conflicts with nothing and dependants stop waiting for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from .definition import ResourceClaim, Tool

__all__ = ["Claims", "Plan", "Scheduler", "claims_for_call", "conflicts", "plan_calls"]

Claims: TypeAlias = tuple[ResourceClaim, ...] | Literal["exclusive"]
"""What one call touches: resource claims, or ``"exclusive"`` to run alone."""


def claims_for_call(tool: Tool | None, arguments: Mapping[str, Any]) -> Claims:
    """The claims of one call: an unknown or unclaimed tool runs alone.

    Raises:
        Exception: whatever the tool's claims function raised, or ``TypeError`` when it returned something
            that is not a list of ``ResourceClaim``. The caller closes only that call.
    """
    if tool is None:
        return "exclusive"
    claims = tool.claims_for(arguments)
    if claims is None or claims == "exclusive":
        return "exclusive"
    if isinstance(claims, str) or not all(isinstance(c, ResourceClaim) for c in claims):
        raise TypeError(f"claims of {tool.name} must be ResourceClaim values or 'exclusive', got {claims!r}")
    return tuple(claims)


def conflicts(a: Claims, b: Claims) -> bool:
    """Whether two calls may not run at the same time."""
    if a == "exclusive" or b == "exclusive":
        return True
    writes_a = {c.key for c in a if c.access == "write"}
    writes_b = {c.key for c in b if c.access == "write"}
    keys_a = {c.key for c in a}
    keys_b = {c.key for c in b}
    return bool(writes_a & keys_b or writes_b & keys_a)


@dataclass(frozen=True, slots=True)
class Plan:
    """The DAG of one batch.

    Attributes:
        waits_for: per call, the earlier calls it must wait for.
    """

    waits_for: tuple[frozenset[int], ...]

    @property
    def levels(self) -> tuple[tuple[int, ...], ...]:
        """The calls grouped by depth: level 0 waits for nothing, level n for something on level n-1."""
        depth: list[int] = []
        for deps in self.waits_for:
            depth.append(1 + max((depth[d] for d in deps), default=-1))
        return tuple(
            tuple(i for i, d in enumerate(depth) if d == level) for level in range(max(depth, default=-1) + 1)
        )


def plan_calls(
    claims: Sequence[Claims | None],
    *,
    sequential: bool = False,
    after: Mapping[int, int] | None = None,
) -> Plan:
    """The source-directed DAG for a batch.

    Args:
        claims: per call in source order; ``None`` for a call that is closed before it runs.
        sequential: every call waits for all the calls before it.
        after: extra edges, ``later -> earlier``: a repeated call waits for the call whose answer it shares.
    """
    after = after or {}
    waits: list[frozenset[int]] = []
    for j, mine in enumerate(claims):
        if mine is None:
            waits.append(frozenset())
            continue
        deps = {
            i
            for i, theirs in enumerate(claims[:j])
            if theirs is not None and (sequential or conflicts(theirs, mine))
        }
        if j in after:
            if not 0 <= after[j] < j:
                raise ValueError(f"call {j} can only wait for an earlier call, not {after[j]}")
            deps.add(after[j])
        waits.append(frozenset(deps))
    return Plan(tuple(waits))


class Scheduler:
    """Hands out the calls of a ``Plan`` as they may start.

    A call may start once every call it waits for has finished or been closed, it has been cleared (a
    call's preflight, such as an approval, can hold it back without holding a slot), and fewer than
    ``max_concurrency`` calls are running. Calls are handed out in source order.

    Args:
        plan: the batch's DAG.
        max_concurrency: the most calls running at once; ``0`` for no cap.
        cleared: the calls that may start as soon as their turn comes; ``None`` for all of them.
    """

    def __init__(self, plan: Plan, *, max_concurrency: int = 0, cleared: Iterable[int] | None = None) -> None:
        if max_concurrency < 0:
            raise ValueError("max_concurrency must be >= 0")
        self._plan = plan
        self._cap = max_concurrency
        count = len(plan.waits_for)
        self._cleared = set(range(count)) if cleared is None else set(cleared)
        self._waiting = set(range(count))
        self._running: set[int] = set()
        self._done: set[int] = set()

    @property
    def running(self) -> frozenset[int]:
        """Calls started and not yet finished."""
        return frozenset(self._running)

    @property
    def waiting(self) -> frozenset[int]:
        """Calls neither started nor closed."""
        return frozenset(self._waiting)

    @property
    def finished(self) -> bool:
        """Every call has finished or been closed."""
        return not self._waiting and not self._running

    def clear(self, index: int) -> None:
        """Let a call start once its turn comes."""
        self._cleared.add(index)

    def take(self) -> list[int]:
        """The calls that may start now, in source order; they count as running from here on."""
        started: list[int] = []
        for i in sorted(self._waiting):
            if self._cap and len(self._running) >= self._cap:
                break
            if i in self._cleared and self._plan.waits_for[i] <= self._done:
                started.append(i)
                self._waiting.discard(i)
                self._running.add(i)
        return started

    def finish(self, index: int) -> None:
        """A running call has its result."""
        if index not in self._running:
            raise ValueError(f"call {index} is not running")
        self._running.discard(index)
        self._done.add(index)

    def close(self, index: int) -> None:
        """A call that never started has its result (blocked, skipped, aborted, ...)."""
        if index not in self._waiting:
            raise ValueError(f"call {index} has already started or finished")
        self._waiting.discard(index)
        self._done.add(index)
