"""Plain HTTP for the native wires' REST calls: one pooled ``httpx2`` client per endpoint (in the shared
pool, so it is reused, evicted and closed like the rest), and how an answer that was not a success reads
into the shared failure kinds."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...errors import EndpointError, EndpointUnreadable
from ..failures import classify_failure
from ..typed_errors import error_for_failure, unreachable_error
from .clients import lease_native

if TYPE_CHECKING:
    import httpx2

    from ..endpoints import Endpoint

__all__ = ["lease_http", "read_failure", "transport_error"]


class _Http:
    """The pooled ``httpx2`` client of one endpoint; each request brings its own timeout."""

    __slots__ = ("client",)

    def __init__(self) -> None:
        import httpx2

        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(None, connect=30.0))

    async def aclose(self) -> None:
        await self.client.aclose()


def lease_http(endpoint: Endpoint) -> tuple[httpx2.AsyncClient, Callable[[], None]]:
    """The endpoint's pooled client and the function that gives its lease back."""
    http, release = lease_native(endpoint, "rest", _Http)
    return http.client, release


def read_failure(
    status: int, body: bytes, headers: Mapping[str, str], *, endpoint: str, model: str | None
) -> EndpointError:
    """A response that was not a success, read into the shared kinds."""
    text = body.decode("utf-8", "replace")
    try:
        words: Any = json.loads(text)
    except ValueError:
        words = text
    if not isinstance(words, Mapping | str):
        words = text
    return error_for_failure(classify_failure(status, words, headers), endpoint=endpoint, model=model)


def transport_error(exc: Exception, *, endpoint: str, model: str | None) -> EndpointError:
    """What went wrong sending a request or reading its answer, as a typed error (total).

    A failure of the connection (``httpx2.HTTPError``, an ``OSError``, a timeout) is the unreachable-endpoint
    error, a URL the client cannot use too (nothing was sent); anything else the client raised on the way
    (a body read twice, a header it cannot encode) is ``EndpointUnreadable``, naming what it was.
    """
    import httpx2

    if isinstance(exc, EndpointError):
        return exc
    if isinstance(exc, httpx2.HTTPError | httpx2.InvalidURL | OSError | TimeoutError):
        timed_out = isinstance(exc, httpx2.TimeoutException | TimeoutError)
        return unreachable_error(exc, endpoint=endpoint, model=model, timed_out=timed_out)
    return EndpointUnreadable(
        f"the request to {endpoint} failed in the HTTP client: {type(exc).__name__}: {exc}"[:2000],
        endpoint=endpoint,
        model=model,
    )
