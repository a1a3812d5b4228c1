"""The host's hand around each model request and each tool execution of a run (``StepRecorder``).

A run's outputs that cost something to make again, an answer from the model and a tool's result, each come
out of one awaitable the loop hands to the recorder. A host that keeps what they returned (a durable run
that outlives its process) gives the kept output back instead of sending the request or running the tool a
second time. Without a recorder the loop awaits them itself.

A recorder that matches outputs to requests by the order they are made needs that order to be the same
each time the run is replayed, and tool calls run in parallel finish in any order: so the loop announces
each batch's calls (``tool_batch``), in the order the model listed them, before any of them starts, and a
call that never executes (denied, skipped, a repeat answered by its twin) simply leaves its place unused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from ..messages import ToolCall

__all__ = ["StepRecorder"]

T = TypeVar("T")


class StepRecorder(Protocol):
    """Runs each model request and each tool execution of a run, and may give back a kept output instead.

    Every method is called from the run's task, in the run's order; what an awaitable returns must be
    returned unchanged (or be the output a previous run of the same request returned).
    """

    def model_request(self, send: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """One step's request to the model (with its retries and continuations): ``send()``, awaited."""
        ...

    def tool_batch(self, calls: Sequence[ToolCall]) -> None:
        """A step's calls, in the order the model listed them, before any of them starts."""
        ...

    def tool_execution(self, call: ToolCall, execute: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """One call of the announced batch, cleared to run (after its approval): ``execute()``, awaited."""
        ...
