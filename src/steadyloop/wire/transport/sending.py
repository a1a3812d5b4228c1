"""When a request went out: the one moment between connecting and the first answer that no response shows.

A server that reads the whole prompt before it sends its headers (llama-server did until mid-2026) says
nothing until it has read it, so the response cannot tell "connected, the model is reading" from "still
connecting". The transports can: each calls ``request_sent`` once the request's headers went out on a
connection, and the turn that is sending listens with ``listening_for_sent``. A transport that cannot tell
calls nothing; the turn then takes the start of the answer for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["listening_for_sent", "request_sent"]

# Who the request being sent in this task tells; a transport's hooks run in the task that sends.
_listener: ContextVar[Callable[[], None] | None] = ContextVar("steadyloop_request_sent", default=None)


def request_sent() -> None:
    """Tell whoever sends the current task's request that it went out on a connection (called by a
    transport's hook; nothing when no one listens)."""
    listener = _listener.get()
    if listener is not None:
        listener()


@contextlib.contextmanager
def listening_for_sent(listener: Callable[[], None] | None) -> Iterator[None]:
    """Within the block, ``request_sent`` in this task calls ``listener``."""
    if listener is None:
        yield
        return
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
