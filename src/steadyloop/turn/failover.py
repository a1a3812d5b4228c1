"""Which failures hand a turn to the next endpoint of a failover chain (sans-I/O).

A chain is tried in order within one attempt of ``run_turn``: a candidate that fails before anything was
shown hands over at once, without a backoff (that is what a fallback is for). The retry loop wraps the
whole chain, so when every candidate fails and the last failure is transient the turn backs off and starts
again from the top. Output already shown is never followed by another model's answer, and a cancellation
is not a failure at all: it ends the turn wherever it is.
"""

from __future__ import annotations

from ..errors import (
    EndpointError,
    EndpointSilent,
    EndpointUnavailable,
    EndpointUnreachable,
    EndpointUnreadable,
)
from ..events import Failover
from ..wire.endpoints import Endpoint

__all__ = ["HOP_KINDS", "failover_event", "hop_kind", "hops"]

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


def failover_event(
    source: Endpoint,
    source_model: str | None,
    target: Endpoint,
    target_model: str | None,
    error: EndpointError,
    step: int = 0,
) -> Failover:
    """The event that tells a hop from one candidate to the next."""
    return Failover(
        from_endpoint=source.shown_url,
        from_model=source_model or "",
        to_endpoint=target.shown_url,
        to_model=target_model or "",
        cause=str(error),
        kind=hop_kind(error) or "",
        status=error.status,
        step=step,
    )
