"""The failover chain: an endpoint's candidates, tried in order within one attempt of a turn.

A chain is an ``Endpoint`` with ``fallbacks``. A candidate that fails before anything was shown hands over
at once, without a backoff (that is what a fallback is for), with a ``Failover`` event; the retry loop
(``retry.py``) wraps the whole chain, so when every candidate fails and the last failure is transient the
turn backs off and starts again from the top. Output already shown is never followed by another model's
answer, and a cancellation is not a failure at all: it ends the turn wherever it is.

Each candidate sends through negotiation (``negotiate.py``): the body is rebuilt from its latches on every
attempt and streamed under the watchdog (``attempt.py``). Which failures hop is sans I/O (``hop_kind``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ..errors import (
    ContextOverflow,
    EndpointError,
    EndpointSilent,
    EndpointUnavailable,
    EndpointUnreachable,
    EndpointUnreadable,
)
from ..events import Downgrade, Failover, Notice
from ..messages import Turn
from ..wire.endpoints import Endpoint, Target
from ..wire.liveness import endpoint_answers
from ..wire.registry import provider_for
from .assembly import Produced
from .attempt import Attempt, stream_attempt
from .capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from .negotiate import Downgraded, negotiate
from .plan import Plan, for_model
from .request import BodyBuilder, TurnRequest, TurnSink

__all__ = ["HOP_KINDS", "Candidate", "Chain", "failover_event", "hop_kind", "hops"]

#: Failure kinds that say nothing about whether the next endpoint would take the same request: a key it
#: does not accept, a quota, a model it does not serve, an overloaded or broken server, a model loading.
HOP_KINDS: frozenset[str] = frozenset({"auth", "rate_limited", "not_found", "transient", "model_loading"})

# Statuses that read as the server's trouble rather than the request's when nothing classified them.
_SERVER_STATUSES = frozenset({401, 403, 404, 408, 425, 429, 500, 502, 503, 504, 529})


def hop_kind(error: EndpointError) -> str | None:
    """The name of the failure that lets a turn move on to the next candidate, or ``None`` when it must
    not: a refusal of the request itself (it does not fit, a field or value refused, a grammar) would be
    refused again by the next candidate or is not the endpoint's fault."""
    if isinstance(error, EndpointSilent):
        return "silent"
    if isinstance(error, EndpointUnreachable) and error.kind == "unreachable":
        return "network"  # nothing listening here, or no such host, says nothing of the next endpoint
    if error.kind in HOP_KINDS:
        return error.kind
    if error.kind is not None:
        return None
    if isinstance(error, EndpointUnreadable):
        return "unreadable"
    if error.status is None or isinstance(error, EndpointUnavailable):
        return "network" if error.status is None else "transient"
    return "transient" if error.status in _SERVER_STATUSES else None


def hops(error: EndpointError) -> bool:
    """Whether ``error``, raised before anything was shown, hands the turn to the next candidate."""
    return hop_kind(error) is not None


def failover_event(source: Target, target: Target, error: EndpointError, step: int = 0) -> Failover:
    """The event that tells a hop from one candidate to the next."""
    return Failover(
        from_endpoint=source.endpoint.shown_url,
        from_model=source.model or "",
        to_endpoint=target.endpoint.shown_url,
        to_model=target.model or "",
        cause=str(error),
        kind=hop_kind(error) or "",
        status=error.status,
        step=step,
    )


class Candidate:
    """One endpoint of a chain and its attempts: each rebuilds the body from the latches and streams it.

    A class rather than closures: a thousand runs in flight each hold one of these for as long as their
    stream lasts, and one slotted object is far less for the cyclic collector to scan than a dozen cells.
    """

    __slots__ = (
        "builder",
        "caps",
        "fallback",
        "first",
        "probe_after",
        "provider",
        "request",
        "sent",
        "sink",
        "target",
    )

    def __init__(self, target: Target, builder: BodyBuilder, request: TurnRequest, sink: TurnSink) -> None:
        self.target = target
        self.provider = provider_for(target.endpoint)
        self.caps = capabilities_for(target.endpoint)
        self.builder = builder
        self.request = request
        self.sink = sink
        self.sent: dict[str, Any] = {}
        # The body built for sizing, sent as it is by the first attempt (see ``plan.py``).
        self.first: Mapping[str, Any] | None = None
        # What is left of the turn's first-token budget: past it, an attempt asks whether the endpoint is
        # there at all.
        self.probe_after: float | None = None
        self.fallback = False  # a fallback's requests differ from the plan's in their model and latches

    @property
    def endpoint(self) -> Endpoint:
        return self.target.endpoint

    @property
    def model(self) -> str | None:
        return self.target.model

    async def send(self, c: EndpointCapabilities, m: ModelCapabilities, produced: Produced) -> Turn:
        """One attempt: the body built from the latches (the plan's, the first time), streamed."""
        first, self.first = self.first, None
        self.sent = dict(first if first is not None else self.builder(c, m))
        endpoint, request = self.target.endpoint, self.request
        attempt = Attempt(
            provider=self.provider,
            sink=self.sink,
            idle_timeout=endpoint.idle_timeout,
            first_token_timeout=endpoint.first_chunk_timeout,
            fences=request.fences,
            start_in_reasoning=request.start_in_reasoning,
            include_usage=c.usage_in_stream,
            step=request.step,
            latches=m,
            probe=(self.probe, self.probe_after) if self.probe_after is not None else None,
            interceptors=request.interceptors,
        )
        return await stream_attempt(attempt, self.sent, produced)

    async def probe(self) -> bool:
        return await endpoint_answers(self.target.endpoint, self.request.policy.probe_timeout_s)

    def fields_sent(self) -> Collection[str]:
        fields = set(self.sent)
        if self.caps.usage_in_stream:
            fields.add("stream_options")
        return fields

    def downgraded(self, change: Downgraded) -> None:
        step = self.request.step
        self.sink.emit(Downgrade(field=change.field, reason=change.reason, value=change.value, step=step))
        self.sink.emit(Notice(text=change.notice, name="downgrade", step=step))


class Chain:
    """A turn's candidates: the endpoint, then each of its fallbacks with its model."""

    __slots__ = ("candidates", "effort", "request", "sink")

    def __init__(self, request: TurnRequest, sink: TurnSink, plan: Plan) -> None:
        self.request = request
        self.sink = sink
        self.effort = plan.effort
        first = Candidate(Target(request.endpoint, plan.model), plan.builder, request, sink)
        first.first = plan.first
        self.candidates = [first]
        for fallback in request.endpoint.fallbacks:
            model = fallback.model or plan.model
            candidate = Candidate(
                Target(fallback.endpoint, model), for_model(plan.builder, model), request, sink
            )
            candidate.fallback = True
            self.candidates.append(candidate)

    def allow_silence(self, seconds: float) -> None:
        """Let each candidate's next attempt be silent ``seconds`` before the endpoint is asked after."""
        for candidate in self.candidates:
            candidate.probe_after = seconds

    async def attempt(self, produced: Produced) -> tuple[Turn, Candidate]:
        """Each candidate in order until one answers, or one fails in a way that must not hop."""
        candidates = self.candidates
        last = len(candidates) - 1
        for index, candidate in enumerate(candidates):
            try:
                turn = await negotiate(
                    candidate.caps,
                    candidate.send,
                    model=candidate.model,
                    effort=self.effort,
                    droppable=self.request.droppable,
                    sent_fields=candidate.fields_sent,
                    on_downgrade=candidate.downgraded,
                    produced=produced,
                )
            except EndpointError as error:
                if index == last or produced.value or isinstance(error, ContextOverflow) or not hops(error):
                    raise
                following = candidates[index + 1].target
                self.sink.emit(failover_event(candidate.target, following, error, self.request.step))
                continue
            return turn, candidate
        raise AssertionError("a chain has at least one candidate")  # pragma: no cover
