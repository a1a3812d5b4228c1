"""The typed error for what went wrong talking to an endpoint, worded the same whichever wire raised it.

A classified failure (``classify_failure``) becomes ``ContextOverflow``, ``QuotaExhausted``,
``EndpointUnavailable`` or ``EndpointRefused``; what an SDK or a transport raised becomes the same, and a request that never got an
answer is an ``EndpointUnreachable`` that reads alike on every transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import (
    ContextOverflow,
    EndpointError,
    EndpointRefused,
    EndpointUnavailable,
    EndpointUnreachable,
    QuotaExhausted,
)
from .connection_failures import unreachable
from .failures import Failure, classify_failure
from .web_pages import web_page_words

if TYPE_CHECKING:
    import openai

__all__ = ["error_for_failure", "error_from_exception", "unreachable_error"]


def _headers_of(exc: openai.APIStatusError) -> dict[str, str]:
    try:
        return dict(exc.response.headers)
    except Exception:
        return {}


def _body_of(exc: openai.APIStatusError) -> str | Mapping[str, Any] | None:
    try:
        return exc.response.text
    except Exception:
        body = exc.body
        return body if isinstance(body, str | Mapping) else None


# A server on loopback that refuses the key is most often one steadyloop started: each asks for a key of
# its own, which the command finds by itself and a library caller must pass.
_LOCAL_KEY = (
    " (a model server started by steadyloop, with `steadyloop local up` or steadyloop.local, asks for the "
    "key it drew: Endpoint(url, api_key=steadyloop.local.key_for(url)) reads it)"
)
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def _on_loopback(endpoint: str | None) -> bool:
    try:
        return endpoint is not None and urlsplit(endpoint).hostname in _LOOPBACK
    except ValueError:
        return False


def error_for_failure(
    failure: Failure, *, endpoint: str | None, model: str | None, prefix: str = ""
) -> EndpointError:
    """The typed error for a classified failure."""
    words = failure.message or f"HTTP {failure.status}"
    if failure.web_page:
        words = web_page_words(failure.status, failure.message)
    message = f"{prefix}{words}" if prefix else words
    if failure.kind == "auth" and _on_loopback(endpoint):
        message += _LOCAL_KEY
    common: dict[str, Any] = {
        "endpoint": endpoint,
        "model": model,
        "status": failure.status,
        "body": failure.message,
        "retry_after": failure.retry_after,
        "kind": failure.kind,
        "field": failure.field,
        "supported": tuple(failure.supported),
    }
    if failure.kind == "context_overflow":
        return ContextOverflow(message, limit=failure.limit, requested=failure.requested, **common)
    if failure.daily_quota:
        where = f"{model} at {endpoint}" if model else str(endpoint)
        said = f"the daily quota of {where} is used up and the server named no wait: sending again today "
        return QuotaExhausted(f"{prefix}{said}fails the same way ({words})", **common)
    if failure.transient or failure.kind == "model_loading":
        return EndpointUnavailable(message, **common)
    return EndpointRefused(message, **common)


def error_from_exception(
    exc: BaseException, *, endpoint: str | None, model: str | None, timeout_s: float | None = None
) -> EndpointError:
    """The typed error for what the SDK or the transport raised (``timeout_s``: the allowance in force,
    for a timeout's message)."""
    # Imported here: the SDK is loaded only by what sends through it (about a third of a second).
    import httpx2
    import openai

    if isinstance(exc, EndpointError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        failure = classify_failure(exc.status_code, _body_of(exc), _headers_of(exc))
        return error_for_failure(failure, endpoint=endpoint, model=model)
    return unreachable_error(
        exc,
        endpoint=endpoint,
        model=model,
        timed_out=isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException),
        timeout_s=timeout_s,
    )


def unreachable_error(
    exc: BaseException,
    *,
    endpoint: str | None,
    model: str | None,
    timed_out: bool = False,
    timeout_s: float | None = None,
) -> EndpointUnreachable:
    """The typed error for a request that never got an answer (a refused connection, a name that does not
    resolve, a certificate not trusted, a timeout, a drop), worded the same whichever transport raised it:
    what happened, and what to do about it (see ``connection_failures``)."""
    return unreachable(exc, endpoint=endpoint, model=model, timeout_s=timeout_s, timed_out=timed_out)
