"""Noticing a model that repeats itself with tools, and stopping it only when it keeps on.

``ToolLoopDetector`` watches one run's calls and results for four patterns:

- ``identical_repeat``: the same call (name and arguments, key order ignored) several times in a row;
- ``ping_pong``: two calls taking turns, A-B-A-B, at the end of the history;
- ``no_progress``: one tool giving back the same result several times in a row;
- ``max_calls``: more calls in the run than the cap allows.

The response is graded. A detection first produces a note that the engine appends to the tool result, so the
model reads that it is going in circles and can change course. Only when the loop goes on after
``escalate_after`` notes (or the call cap is passed) does ``stop`` hold a ``LoopVerdict``, which the loop
reports as a ``loop_detected`` event before ending the run.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..arguments import canonical_arguments
from ..errors import InvalidInput
from ..messages import ToolCall

__all__ = ["LoopDetectorConfig", "LoopKind", "LoopVerdict", "ToolLoopDetector"]

LoopKind: TypeAlias = Literal["identical_repeat", "ping_pong", "no_progress", "max_calls"]

_ADVICE = "Try something different or answer."


@dataclass(frozen=True, slots=True)
class LoopDetectorConfig:
    """Thresholds for ``ToolLoopDetector``.

    Attributes:
        identical_repeat: the same call this many times in a row is a loop.
        ping_pong: an A-B-A-B tail this long (counting both calls) is a loop.
        no_progress: one tool returning the same result this many times in a row is a loop.
        max_calls: the most tool calls one run may make; the call after it stops the run.
        escalate_after: notes given before a detection stops the run instead; ``0`` stops at once.
        forgive_after: calls in a row without a detection after which the notes given so far are forgotten,
            so a model that found its way out of one loop is not stopped by an unrelated repeat much later;
            ``0`` never forgets.
    """

    identical_repeat: int = 3
    ping_pong: int = 4
    no_progress: int = 3
    max_calls: int = 100
    escalate_after: int = 2
    forgive_after: int = 10

    def __post_init__(self) -> None:
        minimums = {"identical_repeat": 2, "ping_pong": 3, "no_progress": 2, "max_calls": 1}
        for name, least in minimums.items():
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise InvalidInput(f"LoopDetectorConfig.{name} must be an integer >= {least}, got {value!r}")
        for name in ("escalate_after", "forgive_after"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise InvalidInput(f"LoopDetectorConfig.{name} must be an integer >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class LoopVerdict:
    """Why a run was stopped.

    Attributes:
        kind: which pattern went on past its notes.
        tool: the tool it concerns (the last one called, for ``ping_pong`` and ``max_calls``).
        text: the reason in words, for the ``loop_detected`` event and the person reading it.
    """

    kind: LoopKind
    tool: str
    text: str


def _digest(text: str) -> str:
    # A digest keeps the history small however large the arguments or results are.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ToolLoopDetector:
    """Per-run watcher of tool calls and results; see the module docstring.

    The execution engine calls ``record_call`` before it runs each call and ``record_result`` after, appends
    any note returned to that call's result, and ends the run once ``stop`` is set.
    """

    def __init__(self, config: LoopDetectorConfig | None = None) -> None:
        self.config = config or LoopDetectorConfig()
        self.reset()

    def reset(self) -> None:
        """Forget everything seen, as for a new run."""
        window = max(self.config.identical_repeat, self.config.ping_pong)
        self._calls = 0
        self._tail: deque[tuple[str, str]] = deque(maxlen=window)
        self._streak = 0
        self._results: dict[str, deque[str]] = {}
        self._notes = 0
        self._clean = 0
        self._stop: LoopVerdict | None = None

    @property
    def stop(self) -> LoopVerdict | None:
        """Why the run should end, once a loop continued past its notes; ``None`` while it may go on."""
        return self._stop

    @property
    def calls(self) -> int:
        """Calls recorded so far."""
        return self._calls

    def record_call(self, call: ToolCall) -> str | None:
        """Record a call about to run.

        Returns:
            A note for the model to read with this call's result when the call repeats a pattern, else
            ``None``. When the detection escalated, ``stop`` is set and the verdict's text is returned.
        """
        config = self.config
        self._calls += 1
        if self._calls > config.max_calls:
            note = (
                f"This run has made {config.max_calls} tool calls, the most it may make. Stop calling tools "
                "and answer with what you have."
            )
            summary = f"the run passed its cap of {config.max_calls} tool calls"
            return self._escalate("max_calls", call.name, note, summary, force=True)

        key = _digest(f"{call.name}\x00{canonical_arguments(call.arguments)}")
        last = self._tail[-1][0] if self._tail else None
        self._streak = self._streak + 1 if key == last else 1
        self._tail.append((key, call.name))

        if self._streak >= config.identical_repeat:
            note = (
                f"You have called {call.name} with the same arguments {self._streak} times in a row; the "
                f"result will not change. {_ADVICE}"
            )
            summary = f"{call.name} was called with the same arguments {self._streak} times in a row"
            return self._escalate("identical_repeat", call.name, note, summary)
        pair = self._ping_pong()
        if pair is not None:
            first, second = pair
            note = (
                f"You keep alternating between {first} and {second} with the same arguments; this is going "
                f"in circles. {_ADVICE}"
            )
            summary = (
                f"{first} and {second} were called in turn, with the same arguments, {config.ping_pong} times"
            )
            return self._escalate("ping_pong", call.name, note, summary)
        self._clean += 1
        if config.forgive_after and self._clean >= config.forgive_after:
            self._notes = 0
        return None

    def record_result(self, name: str, text: str) -> str | None:
        """Record what a call returned.

        Returns:
            A note for the model when this tool has returned the same result ``no_progress`` times in a row,
            else ``None``. When the detection escalated, ``stop`` is set and the verdict's text is returned.
        """
        count = self.config.no_progress
        window = self._results.get(name)
        if window is None:
            window = self._results[name] = deque(maxlen=count)
        window.append(_digest(text))
        if len(window) < count or len(set(window)) != 1:
            return None
        note = (
            f"{name} has returned the same result {count} times in a row; calling it again will not make "
            f"progress. {_ADVICE}"
        )
        summary = f"{name} returned the same result {count} times in a row"
        return self._escalate("no_progress", name, note, summary)

    def _ping_pong(self) -> tuple[str, str] | None:
        """The two tools taking turns at the end of the history, when they do."""
        length = self.config.ping_pong
        if len(self._tail) < length:
            return None
        tail = list(self._tail)[-length:]
        a, b = tail[0][0], tail[1][0]
        if a == b or any(key != (a, b)[i % 2] for i, (key, _) in enumerate(tail)):
            return None
        return tail[0][1], tail[1][1]

    def _escalate(self, kind: LoopKind, tool: str, note: str, summary: str, *, force: bool = False) -> str:
        """The note for this detection, or the verdict's text once enough notes went unheeded."""
        self._clean = 0
        if self._stop is not None:
            return self._stop.text
        if force or self._notes >= self.config.escalate_after:
            after = f" after {self._notes} notes" if self._notes else ""
            self._stop = LoopVerdict(kind, tool, f"Stopped: {summary}{after}.")
            return self._stop.text
        self._notes += 1
        return note
