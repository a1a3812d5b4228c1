"""What a turn settles once, before its first attempt: ``Plan``.

The body builder (a plain body gets the latches applied on every attempt), the model, the effort the
caller asked for, and the first body, built now from today's latches. That body is what the size guard
weighs, and the first attempt sends it as it is: nothing can move the latches between the two, and
building a body costs as much as reading a short reply. A downgraded body is never larger, and the
transcript does not change on retry, so the turn is sized once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..sizing.calibration import body_chars, body_has_image
from ..wire.schema_compat import relax_tools
from .body import apply_latches
from .capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from .request import BodyBuilder, TurnRequest

__all__ = ["Plan", "for_model", "plan_turn"]


@dataclass(frozen=True, slots=True)
class Plan:
    """A turn's body builder and what was read off its first body.

    Attributes:
        builder: makes the body from the latches on every attempt.
        model: the model the call is for.
        first: the body built for sizing, which the first attempt sends.
        effort: the reasoning effort the caller asked for, before the latches moved it.
        chars: the first body's weight in characters, for the size guard and calibration.
        has_image: the first body carries an image (calibration leaves it out).
    """

    builder: BodyBuilder
    model: str | None
    first: Mapping[str, Any]
    effort: str | None
    chars: int
    has_image: bool


def plan_turn(request: TurnRequest) -> Plan:
    """The plan of ``request``: its builder, and its first body built from today's latches."""
    body = request.body
    builder: BodyBuilder = body if callable(body) else _Latched(dict(body))
    model = request.named_model
    caps = capabilities_for(request.endpoint)
    first = builder(caps, caps.model(model))
    # The effort the caller asked for: a plain body's own, before the latches moved it.
    source = builder.requested if isinstance(builder, _Latched) else first
    effort = source.get("reasoning_effort")
    return Plan(
        builder=builder,
        model=model,
        first=first,
        effort=effort if isinstance(effort, str) else None,
        chars=body_chars(first),
        has_image=body_has_image(first),
    )


def for_model(builder: BodyBuilder, model: str | None) -> BodyBuilder:
    """The builder of a fallback: the same request, naming the fallback's model."""
    if isinstance(builder, _Latched):
        requested = dict(builder.requested)
        if model is not None:
            requested["model"] = model
        return _Latched(requested)

    def build(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = builder(c, m)
        return {**body, "model": model} if model is not None else body

    return build


class _Latched:
    """A body the caller built, with the latches applied again on every attempt."""

    __slots__ = ("requested",)

    def __init__(self, requested: dict[str, Any]) -> None:
        self.requested = requested

    def __call__(self, c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        return apply_latches(self.requested, c, m, relax=relax_tools)
