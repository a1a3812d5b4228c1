"""The retry loop: a turn re-sent after transient failures, a model still loading waited for, silence bounded.

Each attempt walks the failover chain (``failover.py``). A failure is retried only when nothing was shown
and it says nothing about the request itself: decided by what the failure is, not its status alone (a 500
that says the grammar failed will fail the same way again, and a 429 for an exhausted quota does not clear
by waiting, nor does a port where nothing listens, kind ``unreachable``: llama-server listens while it
loads and answers 503, waited for on its own clock, and a server that listens only once loaded takes
minutes, not a few backoffs). A model still loading is waited for without spending retries. A server asking for a longer
wait than the policy allows fails the turn at once (``RetryDelayTooLong``). Silence before the first token
is bounded over the whole turn (``RetryPolicy``).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

from ..errors import ContextOverflow, EndpointError, EndpointSilent, QuotaExhausted, RetryDelayTooLong
from ..events import Notice, Retry
from ..messages import Turn
from ..wire.failures import shared_cache_full
from .assembly import Produced
from .capacity import mark_busy, one_at_a_time
from .failover import Candidate, Chain
from .request import RetryPolicy, TurnRequest, TurnSink

__all__ = ["TRANSIENT_STATUSES", "backoff_delay", "with_retries"]

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 529})

# Less than this left of the first-token budget is not worth another attempt.
_LEAST_ALLOWANCE_S = 0.05


def backoff_delay(
    retry: int, policy: RetryPolicy, retry_after: float | None = None, rng: random.Random | None = None
) -> float:
    """Seconds to wait before re-send number ``retry`` (from 0): the server's ask, else ours.

    Ours is exponential with jitter (between half and all of the step), so clients that failed together
    do not come back together.
    """
    if retry_after is not None and retry_after >= 0:
        cap = policy.max_retry_delay_s
        return min(retry_after, cap) if cap > 0 else retry_after
    step = min(policy.base_delay_s * (2.0**retry), policy.max_delay_s)
    draw: float = (rng or random).random()
    return step * (0.5 + 0.5 * draw)


async def with_retries(request: TurnRequest, sink: TurnSink, chain: Chain) -> tuple[Turn, Candidate]:
    """The chain's answer, attempted again after failures the policy retries; its usage counts them.

    Raises:
        RetryDelayTooLong: the endpoint asked to wait longer than ``policy.max_retry_delay_s``.
        EndpointError: a failure not retried, or the last one once retries are spent.
    """
    tries = _Tries(request, sink)
    started = time.perf_counter()
    while True:
        produced = Produced()
        if tries.budget is not None:
            chain.allow_silence(tries.budget - tries.silent_s)
        attempt_started = time.monotonic()
        try:
            async with one_at_a_time(request.endpoint):
                attempt_started = time.monotonic()  # a wait for its turn is no silence of the endpoint's
                turn, answered = await chain.attempt(produced)
        except EndpointError as error:
            busy = error.kind == "transient" and shared_cache_full(error.status, error.body)
            if busy:
                mark_busy(request.endpoint)
            await tries.after(error, produced, attempt_started, busy=busy)
            continue
        usage = turn.usage.with_(
            wall_ms=(time.perf_counter() - started) * 1000,
            retries=tries.retries + tries.busy_waits,
            timeouts=tries.timeouts,
        )
        return replace(turn, usage=usage), answered


class _Tries:
    """One turn's count of its attempts: retries, silences, the loading clock, the first-token budget."""

    __slots__ = (
        "budget",
        "busy_since",
        "busy_waits",
        "loading_since",
        "policy",
        "request",
        "retries",
        "silent_s",
        "sink",
        "timeouts",
    )

    def __init__(self, request: TurnRequest, sink: TurnSink) -> None:
        self.request = request
        self.sink = sink
        self.policy = policy = request.policy
        self.retries = 0
        self.timeouts = 0
        self.loading_since: float | None = None
        self.busy_since: float | None = None
        self.busy_waits = 0
        allowance = request.endpoint.first_chunk_timeout
        self.budget = policy.first_token_budget_s if allowance is not None else None
        self.silent_s = 0.0

    async def after(
        self, error: EndpointError, produced: Produced, attempt_started: float, *, busy: bool = False
    ) -> None:
        """Wait before the next attempt, or raise ``error`` when there is to be none."""
        if produced.value or isinstance(error, ContextOverflow):
            raise error
        if error.kind == "model_loading" and self.policy.loading_timeout_s > 0:
            await self._wait_for_loading(error)
            return
        if busy and self.policy.busy_timeout_s > 0:
            await self._wait_while_busy(error)
            return
        if not _is_transient(error) or self.retries >= self.policy.max_retries:
            raise error
        if self.budget is not None and (isinstance(error, EndpointSilent) or error.status is None):
            # An attempt that got nothing back, however it ended: it spent the first-token budget.
            self.silent_s += time.monotonic() - attempt_started
            if self.budget - self.silent_s < _LEAST_ALLOWANCE_S:
                raise error
        if isinstance(error, EndpointSilent):
            self.timeouts += 1
        _check_retry_delay(error, self.policy)
        delay = backoff_delay(self.retries, self.policy, error.retry_after)
        self.retries += 1
        self.sink.emit(Retry(attempt=self.retries, delay_s=delay, reason=str(error), step=self.request.step))
        await asyncio.sleep(delay)

    async def _wait_while_busy(self, error: EndpointError) -> None:
        """A shared cache other requests filled: sent again after a growing backoff, on its own clock."""
        now = time.monotonic()
        if self.busy_since is None:
            self.busy_since = now
        if now - self.busy_since >= self.policy.busy_timeout_s:
            raise error
        delay = min(backoff_delay(self.busy_waits, self.policy), self.policy.busy_timeout_s)
        self.busy_waits += 1
        self.sink.emit(
            Retry(attempt=self.busy_waits, delay_s=delay, reason=str(error), step=self.request.step)
        )
        await asyncio.sleep(delay)

    async def _wait_for_loading(self, error: EndpointError) -> None:
        now = time.monotonic()
        if self.loading_since is None:
            self.loading_since = now
            shown = self.request.endpoint.shown_url
            self.sink.emit(Notice(text=f"{shown} is loading the model; waiting", name="loading"))
        if now - self.loading_since >= self.policy.loading_timeout_s:
            raise error
        await asyncio.sleep(self.policy.loading_poll_s)


def _check_retry_delay(error: EndpointError, policy: RetryPolicy) -> None:
    """Refuse to wait longer than the policy allows: a server asking for more fails the turn now, with the
    wait it asked for, so whoever is waiting sees it instead of a turn that hangs and then tries again."""
    asked, cap = error.retry_after, policy.max_retry_delay_s
    if asked is None or cap <= 0 or asked <= cap:
        return
    raise RetryDelayTooLong(
        f"the endpoint asked to wait {asked:g}s before trying again, longer than max_retry_delay_s "
        f"({cap:g}s): {error}",
        max_delay_s=cap,
        endpoint=error.endpoint,
        model=error.model,
        status=error.status,
        body=error.body,
        retry_after=asked,
        kind=error.kind,
        field=error.field,
        supported=error.supported,
    ) from error


def _is_transient(error: EndpointError) -> bool:
    if isinstance(error, EndpointSilent):
        return True
    if isinstance(error, QuotaExhausted):
        return False  # a quota counted per day: waiting seconds does not clear it
    if error.kind in ("transient", "rate_limited"):
        return True
    return error.kind is None and (error.status is None or error.status in TRANSIENT_STATUSES)
