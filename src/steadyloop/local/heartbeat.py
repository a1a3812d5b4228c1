"""A progress callback that is never silent for long.

Some steps of an install or a start say nothing for a while: pip looking packages up, a model loading, a lock
held by another installer, a download that stalls. :class:`Heartbeat` passes every event on and, when
nothing has been said for ``every`` seconds, says the last step again with how long it has been going, so a
person watching knows the process is alive and what it is waiting on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Self

from .config import Progress

__all__ = ["Heartbeat", "Said", "reminder"]


@dataclass(frozen=True, slots=True)
class Said:
    """The last event passed on: what it was, when its step began, and when it was last said."""

    event: str
    done: int | None
    total: int | None
    since: float
    at: float


def reminder(last: Said | None, now: float, every: float) -> tuple[str, int | None, int | None] | None:
    """What to say again at ``now``: the last step with its running time, once ``every`` seconds passed
    without a word; ``None`` while nothing is due (or nothing was ever said)."""
    if last is None or now - last.at < every:
        return None
    return f"{last.event} ({now - last.since:.0f} s so far)", last.done, last.total


class Heartbeat:
    """Wraps a :data:`~steadyloop.local.config.Progress`; a context manager that runs the repeating.

    Calls to the wrapped callback are serialised (the pip watcher and this class's own thread call it too).
    A callback that raises from the repeating thread ends the repeating, never the work it reports on.
    """

    def __init__(
        self, progress: Progress, every: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._progress = progress
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._last: Said | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, event: str, done: int | None, total: int | None) -> None:
        """Pass ``event`` on, and remember it as the step to repeat."""
        with self._lock:
            now = self._clock()
            same = self._last is not None and self._last.event == event
            since = self._last.since if same and self._last is not None else now
            self._last = Said(event, done, total, since, now)
            self._progress(event, done, total)

    def beat(self) -> None:
        """Say the last step again if it is due (the repeating thread calls this)."""
        with self._lock:
            now = self._clock()
            again = reminder(self._last, now, self._every)
            if again is not None and self._last is not None:
                self._last = replace(self._last, at=now)
                self._progress(*again)

    def _run(self) -> None:
        try:
            while not self._done.wait(min(1.0, self._every / 2)):
                self.beat()
        except Exception:  # see the class docstring: progress decorates the work, it must not end it
            return

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="progress-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
