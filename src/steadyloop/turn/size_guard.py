"""The size guard: a body that cannot fit the window is refused before it is sent.

Before the endpoint has reported a count, the model's own tokenizer (where there is one) takes a
calibration reading of the first body, once per (endpoint, model), so the guard starts from a measurement
rather than from four characters a token.
"""

from __future__ import annotations

from ..errors import ContextOverflow
from ..events import Notice
from ..sizing.calibration import chars_per_token_for
from ..sizing.counting import measure_before_sending
from ..sizing.tokens import request_tokens
from .plan import Plan
from .request import TurnRequest, TurnSink

__all__ = ["guard_size"]


async def guard_size(request: TurnRequest, sink: TurnSink, plan: Plan) -> None:
    """Refuse ``plan``'s first body when it cannot fit ``request.context_limit``.

    Raises:
        ContextOverflow: the body needs more tokens than the window holds.
    """
    endpoint, model = request.endpoint, plan.model
    await measure_before_sending(
        endpoint,
        model,
        plan.first,
        on_notice=None
        if sink.on_event is None
        else lambda text: sink.emit(Notice(text=text, name="tokenizer", step=request.step)),
    )
    limit = request.context_limit
    if not limit:
        return
    need = request_tokens(plan.first, chars_per_token=chars_per_token_for(endpoint, model or ""))
    if need > limit:
        raise ContextOverflow(
            f"the request needs about {need} tokens but {model or 'the model'} has a window of {limit}",
            limit=limit,
            requested=need,
            endpoint=endpoint.base_url,
            model=model,
            kind="context_overflow",
        )
