"""Answering an endpoint's refusals: re-send without what it refused, for as long as that is possible.

A request is re-sent only while the refusal is one the request can do without and nothing has been
produced. A server that takes no tools at all is one of those: the tools move into the prompt (see
``body``) and the calls are read back from the text. A refused *value* (``max_tokens`` larger than the model allows, a temperature out of range) is
not one of those: dropping the field would answer it at the model's default, behind the caller's back, so
it goes to the caller with the server's own words. Every downgrade is told as a notice naming what was
dropped and why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import TypeVar

from ..errors import EndpointError
from .assembly import Produced
from .capabilities import EFFORT_LADDER, EndpointCapabilities, ModelCapabilities, effort_for

__all__ = ["Downgraded", "Refused", "answer_refusal", "negotiate"]

T = TypeVar("T")

#: The most re-sends one request gets; each must latch something new, so this is only a backstop.
MAX_ROUNDS = 8

_REFUSALS = (
    "refused_field",
    "refused_value",
    "invalid_request",
    "grammar",
    "out_of_range",
    "tools_unsupported",
)


@dataclass(frozen=True, slots=True)
class Downgraded:
    """What a refusal changed: the field, and why, for the notice and the ``Downgrade`` event."""

    field: str
    reason: str
    value: str | None = None

    @property
    def notice(self) -> str:
        shown = f" ({self.value})" if self.value else ""
        return f"dropped {self.field}{shown}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Refused:
    """What a refused request carried, and what its caller said it may do without.

    Attributes:
        sent: the top-level fields the refused request carried.
        effort: the effort the caller asked for (before the latches moved it).
        droppable: extra-body fields the caller said may be dropped.
    """

    sent: Collection[str]
    effort: str | None = None
    droppable: Collection[str] = ()


def answer_refusal(
    error: EndpointError, caps: EndpointCapabilities, model: ModelCapabilities, refused: Refused
) -> Downgraded | None:
    """Latch what a refusal says the request can do without; ``None`` when it cannot be answered.

    Args:
        error: the endpoint's refusal, classified.
        caps: the endpoint's latches.
        model: the model's latches.
        refused: what the request carried and may do without.
    """
    sent, effort, droppable = refused.sent, refused.effort, refused.droppable
    if error.kind not in _REFUSALS:
        return None
    words = error.body or str(error)
    field = error.field or ""
    top = field.split(".", 1)[0].split("[", 1)[0]

    if error.kind == "tools_unsupported":
        if "tools" in sent and model.native_tools:
            model.native_tools = False
            return Downgraded(
                "tools",
                f"the server takes no tools natively ({words}); they are described in the prompt and calls "
                "are read back from the reply",
                "described in the prompt",
            )
        return None
    if error.kind == "grammar":
        if "tools" in sent and caps.strict_schemas:
            caps.strict_schemas = False
            return Downgraded("tool schemas", f"the server could not build a grammar from them: {words}")
        return None
    if error.kind == "out_of_range":
        return None
    if top == "stream_options" and caps.usage_in_stream and "stream_options" in sent:
        caps.usage_in_stream = False
        return Downgraded("stream_options", f"the endpoint refused usage in the stream: {words}")
    if top == "max_tokens" and "max_tokens" in sent and "max_completion_tokens" in words:
        if model.legacy_token_limit:
            model.legacy_token_limit = False
            return Downgraded("max_tokens", "the model wants max_completion_tokens", "max_completion_tokens")
        return None
    if top == "max_completion_tokens" and "max_completion_tokens" in sent and error.kind == "refused_field":
        if not model.legacy_token_limit:
            model.legacy_token_limit = True
            return Downgraded("max_completion_tokens", "the endpoint wants max_tokens", "max_tokens")
        return None
    if top == "temperature" and "temperature" in sent and error.kind in ("refused_field", "refused_value"):
        if model.chosen_temperature:
            model.chosen_temperature = False
            return Downgraded("temperature", f"the model picks its own: {words}")
        return None
    if top == "reasoning_effort" and "reasoning_effort" in sent:
        return _answer_effort(error, model, effort, words)
    if top in droppable and top in sent and top not in model.refused_fields:
        model.refused_fields.add(top)
        if top == "response_format":
            model.structured_output = False
        return Downgraded(top, f"the endpoint does not take it: {words}")
    return None


def _answer_effort(
    error: EndpointError, model: ModelCapabilities, asked: str | None, words: str
) -> Downgraded | None:
    sent = effort_for(model, asked)
    if error.kind == "refused_field":
        if model.takes_effort:
            model.takes_effort = False
            return Downgraded("reasoning_effort", f"the model takes no effort setting: {words}", sent)
        return None
    if not sent or sent not in EFFORT_LADDER:
        return None  # only a ladder value is ours to move
    if error.supported and not model.supported_efforts:
        model.supported_efforts = tuple(error.supported)
    model.refused_efforts.add(sent)
    now = effort_for(model, asked)
    if not now or now == sent:
        return None
    return Downgraded(
        "reasoning_effort",
        f"the model refused {sent!r}; sending {now!r}, the cheapest rung above it",
        f"{sent} -> {now}",
    )


async def negotiate(
    caps: EndpointCapabilities,
    send: Callable[[EndpointCapabilities, ModelCapabilities, Produced], Awaitable[T]],
    *,
    model: str | None = None,
    effort: str | None = None,
    droppable: Collection[str] = (),
    sent_fields: Callable[[], Collection[str]] | None = None,
    on_downgrade: Callable[[Downgraded], object] | None = None,
    produced: Produced | None = None,
) -> T:
    """Call ``send`` until the endpoint stops refusing things the request can do without.

    ``send`` rebuilds the body from the latches on every attempt and must set the ``Produced`` box it is
    handed when output starts; a refusal after output is never answered by sending again.

    Args:
        caps: the endpoint's latches.
        send: builds and sends the request from the latches.
        model: the model, for its own latches.
        effort: the reasoning effort the caller asked for.
        droppable: extra-body fields the caller said may be dropped.
        sent_fields: the top-level fields of the body last sent (to tell what was refused).
        on_downgrade: told every downgrade.
        produced: the box every attempt sets; read it after a failure (one box serves all attempts,
            since an attempt that produced anything ends the negotiation).
    """
    latches = caps.model(model)
    box = produced if produced is not None else Produced()
    for _ in range(MAX_ROUNDS):
        try:
            return await send(caps, latches, box)
        except EndpointError as error:
            if box.value:
                raise
            fields = sent_fields() if sent_fields is not None else ()
            change = answer_refusal(error, caps, latches, Refused(fields, effort, droppable))
            if change is None:
                raise
            if on_downgrade is not None:
                on_downgrade(change)
    return await send(caps, latches, box)
