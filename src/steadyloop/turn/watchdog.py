"""The watchdog of one streamed request: silence, not a deadline, with one timer per silence.

Until the first chunk that carries something arrives it allows ``first`` (prefill on a CPU takes minutes,
and an empty ``{"role": "assistant"}`` opener says nothing about progress); after that it allows ``idle``
between chunks, re-armed on every parsed event, so a model still talking is never cut off however long it
takes. It re-arms by the caller writing a timestamp per chunk (``last``); its single timer checks the
timestamp when it fires, so the hot path pays no timer per chunk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

__all__ = ["Probe", "Watchdog"]

#: The question asked of an endpoint silent before its first token, and after how many seconds of it.
Probe: TypeAlias = tuple[Callable[[], Awaitable[bool]], float]


class Watchdog:
    """Cancels the streaming task after too long a silence; one timer per silence, not per chunk.

    With a probe, silence before the first token past ``probe_after`` asks whether the endpoint is there
    at all: one that does not answer is given up on then; one that does is allowed to go on thinking up to
    ``first``, asked again every ``probe_after``.
    """

    __slots__ = (
        "_first",
        "_handle",
        "_idle",
        "_loop",
        "_next_probe",
        "_probe",
        "_probe_after",
        "_probing",
        "_started",
        "_task",
        "fired",
        "last",
        "talking",
        "unanswered",
    )

    def __init__(
        self, task: asyncio.Task[Any], idle: float | None, first: float | None, probe: Probe | None = None
    ) -> None:
        self._task = task
        self._idle = idle
        self._first = first
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.time()
        self.last = self._started
        self.talking = False
        self.fired: float | None = None
        self.unanswered = False
        self._handle: asyncio.TimerHandle | None = None
        self._probe = probe[0] if probe is not None else None
        self._probe_after = probe[1] if probe is not None else None
        self._next_probe: float | None = None
        self._probing: asyncio.Task[bool] | None = None

    def start(self) -> None:
        allowance = self._first if self._first is not None else self._idle
        deadline = None if allowance is None else self._started + allowance
        if self._probe is not None and self._probe_after is not None:
            at = self._started + self._probe_after
            if deadline is None or at < deadline:
                self._next_probe = at
        self._arm(deadline)

    def _arm(self, deadline: float | None) -> None:
        at = deadline
        if self._next_probe is not None and (at is None or self._next_probe < at):
            at = self._next_probe
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if at is not None:
            self._handle = self._loop.call_at(at, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        if self.talking:
            if self._idle is None:
                return
            deadline: float | None = self.last + self._idle
        else:
            allowance = self._first if self._first is not None else self._idle
            deadline = None if allowance is None else self._started + allowance
        if deadline is not None and now >= deadline:
            self.fired = now - (self.last if self.talking else self._started)
            self._task.cancel()
            return
        if self._next_probe is not None and now >= self._next_probe and self._probe is not None:
            self._next_probe = None
            self._probing = probing = asyncio.ensure_future(self._probe())
            probing.add_done_callback(self._answered)
        self._arm(deadline)

    def _answered(self, probing: asyncio.Future[bool]) -> None:
        self._probing = None
        if self.talking or self.fired is not None or self._task.done() or probing.cancelled():
            return
        if probing.exception() is None and probing.result():
            assert self._probe_after is not None
            self._next_probe = self._loop.time() + self._probe_after
            allowance = self._first if self._first is not None else self._idle
            self._arm(None if allowance is None else self._started + allowance)
            return
        self.unanswered = True
        self.fired = self._loop.time() - self._started
        self._task.cancel()

    def begin_talking(self) -> None:
        # The first chunk that carried something: from here on, silence is measured between chunks.
        self.talking = True
        self._next_probe = None
        self._stop_probing()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._idle is not None:
            self._handle = self._loop.call_at(self.last + self._idle, self._check)

    def _stop_probing(self) -> None:
        probing, self._probing = self._probing, None
        if probing is not None:
            probing.cancel()

    def stop(self) -> None:
        self._stop_probing()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
