"""The tool gate's request sent: its own small turn beside the step, closed by a ``SideTask`` event.

The gate's body is built by ``decision.gate_body`` or ``decision.which_tool_body`` and read by the
question's own reader; here it is only sent. A gate that fails (the endpoint gave up) is no failure of the
step: the step goes on without its choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..errors import EndpointError
from ..turn.body import apply_latches
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities
from ..turn.fences import ALL_FENCES
from ..turn.request import TurnRequest, TurnSink
from ..turn.send import send_turn
from ..turn.side_tasks import SideTaskWatch
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
    model, step = request.model or "", request.step
    watch = SideTaskWatch("tool_gate", model, sink.emit, step=step)

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
    try:
        turn = await send_turn(gate, TurnSink(on_event=watch.relay))
    except EndpointError as error:
        watch.failed(error)
        return None, None
    watch.answered(turn)
    return read(turn.content), turn.content
