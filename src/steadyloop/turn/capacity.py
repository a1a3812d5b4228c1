"""One request at a time to an endpoint whose shared capacity ran out.

A local server's slots can share one cache (llama-server's ``--parallel``): requests that each fit the
window fill it together, and the server ends all their streams at once (``wire.failures.shared_cache_full``). Sent
again after a backoff, they fill it again together, and a step on a CPU holds the cache for tens of
seconds, far longer than any backoff. So once an endpoint said it is busy, this process sends it one
request at a time until it has been quiet for a while; requests to other endpoints are not held.
Requests from other processes are not seen: only the backoff spreads those.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..wire.endpoints import Endpoint

__all__ = ["BUSY_QUIET_S", "mark_busy", "one_at_a_time"]

#: How long after its last shared-cache failure an endpoint is sent one request at a time.
BUSY_QUIET_S = 120.0


class _Gate:
    __slots__ = ("lock", "until")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.until = 0.0


# Per event loop: an asyncio lock belongs to the loop it was first used on.
_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _Gate]] = weakref.WeakKeyDictionary()


def _gates() -> dict[str, _Gate]:
    loop = asyncio.get_running_loop()
    gates = _GATES.get(loop)
    if gates is None:
        gates = _GATES[loop] = {}
    return gates


def mark_busy(endpoint: Endpoint, now: float | None = None) -> None:
    """``endpoint`` said its shared capacity ran out: send it one request at a time for a while."""
    gates = _gates()
    gate = gates.get(endpoint.base_url)
    if gate is None:
        gate = gates[endpoint.base_url] = _Gate()
    gate.until = (time.monotonic() if now is None else now) + BUSY_QUIET_S


@asynccontextmanager
async def one_at_a_time(endpoint: Endpoint) -> AsyncIterator[None]:
    """Held around one attempt: waits its turn where ``endpoint`` was busy lately, else passes at once."""
    gate = _gates().get(endpoint.base_url)
    if gate is None or time.monotonic() >= gate.until:
        yield
        return
    async with gate.lock:
        yield
