"""The PostgreSQL store's live feed: one connection that listens for appends (internal to the store).

``append_events`` announces each commit with ``NOTIFY`` on the store's channel (``"<session> <seq>"``);
``AppendListener`` holds a connection of its own that ``LISTEN``s there and calls every subscriber back
with (session, seq). When that connection drops it connects again, with pauses that grow to
``LISTEN_MAX_PAUSE_S``, and once back calls back with ``(None, 0)``: anything announced meanwhile is
unknown, so every reader reads again from its last seq. The log has one line per change of state (lost,
refused and why, back), not one per attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg
from psycopg import sql

from ._pg_reach import read_failure, shown_url
from .reconnects import Reconnects, StateChange
from .store import StoreUnavailable

__all__ = ["LISTEN_MAX_PAUSE_S", "AppendListener", "Appended"]

# The store's logger: the listener's lines are the store's, and whoever routes one routes both.
log = logging.getLogger("steadyloop.sessions.postgres")

#: Called with (session id, last seq written), or (None, 0) when notices may have been missed.
Appended = Callable[[str | None, int], None]

#: The longest pause between the listener's attempts to connect again (they start at 0.05 s and double).
LISTEN_MAX_PAUSE_S = 5.0


class AppendListener:
    """Listens on ``channel`` at ``url`` for as long as anyone subscribed, until ``close``."""

    def __init__(self, url: str, channel: str, timeout: float) -> None:
        self._url = url
        self._channel = channel
        self._timeout = timeout
        self._closed = False
        self._subscribers: dict[int, Appended] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening: asyncio.Event | None = None

    async def subscribe(self, on_appended: Appended) -> Callable[[], None]:
        """Add ``on_appended``, start listening if no one was, and return once listening.

        Raises:
            StoreUnavailable: no listening connection within the timeout.
        """
        key = id(on_appended)
        while key in self._subscribers:
            key += 1
        self._subscribers[key] = on_appended
        if self._task is None:
            self._listening = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._listen())
        listening = self._listening
        assert listening is not None
        try:
            async with asyncio.timeout(self._timeout):
                await listening.wait()
        except TimeoutError:
            self._subscribers.pop(key, None)
            raise StoreUnavailable(f"could not listen for appends at {shown_url(self._url)}") from None
        return lambda: self._subscribers.pop(key, None) and None

    async def _listen(self) -> None:
        listening = self._listening
        assert listening is not None
        loop = asyncio.get_running_loop()
        reconnects = Reconnects("the session store's listener", first_s=0.05, max_s=LISTEN_MAX_PAUSE_S)
        while not self._closed:
            try:
                conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
                async with conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    _say(reconnects.connected(loop.time()))
                    if listening.is_set():  # back after a drop: whatever was announced meanwhile is unknown
                        self._tell(None, 0)
                    listening.set()
                    async for notice in conn.notifies():
                        session_id, _, seq = notice.payload.rpartition(" ")
                        if session_id and seq.isdigit():
                            self._tell(session_id, int(seq))
            except psycopg.Error as exc:
                # One line when the state changes (lost, refused and why, back), not one per attempt.
                _say(reconnects.failed(read_failure(exc, self._url), loop.time()))
                pause = reconnects.pause()
                log.debug("the session store's listener tries again in %.2f s", pause)
                await asyncio.sleep(pause)

    def _tell(self, session_id: str | None, seq: int) -> None:
        for callback in list(self._subscribers.values()):
            try:
                callback(session_id, seq)
            except Exception:
                log.exception("a subscriber to the session store's appends failed")

    async def close(self) -> None:
        """Stop listening and close the listening connection."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


def _say(change: StateChange | None) -> None:
    if change is not None:
        log.log(change.level, "%s", change.text)
