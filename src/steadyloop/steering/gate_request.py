"""The tool gate's request sent: its own small turn beside the step, closed by a ``SideTask`` event.

The gate's body is built by ``decision.gate_body`` or ``decision.which_tool_body`` and read by the
question's own reader; here it is only sent. A gate that fails (the endpoint gave up) is no failure of the
step: the step goes on without its choice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import EndpointError
from ..events import Event, Retry, SideTask
from ..turn.body import apply_latches
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities
from ..turn.fences import ALL_FENCES
from ..turn.request import TurnRequest, TurnSink
from ..turn.send import send_turn
from ..usage import Usage
from .examples import GateChoice
from .tool_gate import read_gate

__all__ = ["ask_gate"]


async def ask_gate(
    request: TurnRequest,
    sink: TurnSink,
    asked: Mapping[str, Any],
    read: Callable[[str], GateChoice | None] = read_gate,
) -> tuple[GateChoice | None, str | None]:
    """The gate's choice (``read`` from its reply) and the reply text; ``(None, None)`` when the request
    failed (the step goes on)."""
    watch = _GateWatch(sink)

    def build(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        return apply_latches(asked, c, m)

    gate = TurnRequest(
        endpoint=request.endpoint,
        body=build,
        model=request.model,
        policy=request.policy,
        fences=ALL_FENCES,
        interceptors=request.interceptors,
    )
    model, step = request.model or "", request.step
    try:
        turn = await send_turn(gate, TurnSink(on_event=watch.relay))
    except EndpointError as error:
        usage = Usage(wall_ms=(time.perf_counter() - watch.started) * 1000, retries=watch.retries)
        sink.emit(SideTask(kind="tool_gate", model=model, usage=usage, error=str(error), step=step))
        return None, None
    sink.emit(
        SideTask(kind="tool_gate", model=model, usage=turn.usage, finish_reason=turn.finish_reason, step=step)
    )
    return read(turn.content), turn.content


class _GateWatch:
    """The gate request's clock and retry count, for the ``SideTask`` event that closes it."""

    __slots__ = ("retries", "sink", "started")

    def __init__(self, sink: TurnSink) -> None:
        self.sink = sink
        self.retries = 0
        self.started = time.perf_counter()

    def relay(self, event: Event) -> None:
        if isinstance(event, Retry):
            self.retries += 1
        self.sink.emit(event)
