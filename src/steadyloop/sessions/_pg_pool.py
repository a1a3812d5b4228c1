"""The PostgreSQL store's connections after the first (internal to the PostgreSQL store).

The pool makes its connections in the background and retries a failed one with a growing pause; a caller
only waits for one, and when none comes it gets "couldn't get a connection after 30 sec", the reason lost.
So a refusal that began while the store was open (the role's password changed, its LOGIN or CONNECT
revoked, the database dropped) cost each caller the whole timeout. Here every connection the pool makes
goes through ``PoolWatch``, which reads each failure (``read_failure``); a caller waiting for a connection
gets the refusal, with libpq's reason, as soon as the pool meets it.

A caller that comes while the pool's last attempt failed (refused, or the server could not be reached),
and no connection is free, tries one connection of its own instead of waiting for the pool's next attempt
(which may be seconds away): failing again, it fails at once with the fresh reason (``InvalidInput`` for a
refusal, ``StoreUnavailable`` for a server still away); let in (the password was put back, the server is
up again), it runs on that connection, until an attempt of the pool's own is let in too.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Self, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ._pg_reach import read_failure, refusal, shown_url
from .reconnects import ConnectFailure
from .store import StoreUnavailable

__all__ = ["PoolWatch", "watched_pool"]

Conn = AsyncConnection[DictRow]
_T = TypeVar("_T")
#: Seconds one of the pool's attempts to connect may take (libpq's ``connect_timeout``).
_ATTEMPT_S = 5


class PoolWatch:
    """What the pool's latest connection attempt came to, and a wake-up for whoever waits on the next."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout
        #: The latest attempt's refusal, while no attempt has succeeded since.
        self.refused: ConnectFailure | None = None
        #: The latest attempt's failure of any kind, while none has succeeded since.
        self.failure: ConnectFailure | None = None
        self._news: asyncio.Event | None = None

    def connected(self) -> None:
        self.refused = self.failure = None
        self._tell()

    def failed(self, exc: BaseException) -> None:
        self.failure = read_failure(exc, self.url)
        self.refused = self.failure if self.failure.refused else None
        self._tell()

    def gave_up(self) -> None:
        """The pool stopped retrying (its ``reconnect_failed``): the next caller's wait makes it try again,
        so the refusal it last met is no longer news about now."""
        self.refused = None

    def _tell(self) -> None:
        if self._news is not None:
            self._news.set()
            self._news = None

    async def _next(self) -> None:
        """Returns after the next attempt ends, either way."""
        if self._news is None:
            self._news = asyncio.Event()
        await self._news.wait()

    async def unless_refused(self, work: Awaitable[_T], *, or_failed: bool = False) -> _T:
        """``work``'s result, unless an attempt the pool makes meanwhile is refused: then that refusal
        (``InvalidInput``) at once, ``work`` cancelled; with ``or_failed``, any failed attempt is a
        ``StoreUnavailable`` at once too. Its ``PoolTimeout`` is a ``StoreUnavailable`` with the last
        failure's reason."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                news = asyncio.ensure_future(self._next())
                try:
                    await asyncio.wait({task, news}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    news.cancel()
                if task.done():
                    return task.result()
                if self.refused is not None:
                    raise refusal(self.url, self.refused)
                if or_failed and self.failure is not None:
                    raise self.away(self.failure.reason)
        except PoolTimeout:
            raise self.unavailable() from None
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def away(self, reason: str) -> StoreUnavailable:
        return StoreUnavailable(f"the session database at {shown_url(self.url)} is unavailable: {reason}")

    def unavailable(self) -> StoreUnavailable:
        last = f": {self.failure.reason}" if self.failure is not None else " (no connection came free)"
        return StoreUnavailable(
            f"the session database at {shown_url(self.url)} is unavailable after {self.timeout:g} s{last}"
        )

    @contextlib.asynccontextmanager
    async def connection(self, pool: AsyncConnectionPool[Conn]) -> AsyncIterator[Conn]:
        """A connection from ``pool`` for one transaction, or the refusal that keeps one from coming."""
        if (self.refused or self.failure) is not None and pool.get_stats().get("pool_available", 0) == 0:
            # The pool's next attempt may be many seconds away: one attempt now says whether it still holds.
            refused = self.refused is not None
            try:
                async with asyncio.timeout(self.timeout):
                    own = await AsyncConnection.connect(self.url, autocommit=True, row_factory=dict_row)
            except TimeoutError:
                raise self.unavailable() from None
            except psycopg.Error as exc:
                self.failed(exc)
                if self.refused is not None:
                    raise refusal(self.url, self.refused) from None
                # Still away: said at once, rather than after the whole wait for a connection that the
                # pool's attempts keep failing to make.
                raise self.away(self.failure.reason if self.failure is not None else str(exc)) from None
            else:
                if not refused:
                    self.failure = None  # back: the pool is asked again, and connects on its next attempt
                # A refusal is not taken back on this news: the pool's next attempt decides, and until it is
                # let in each caller here tries one of its own, rather than waiting for that attempt.
                async with own:
                    yield own
                return
        # A caller waits for a connection while the pool is busy, not while its attempts to make one fail
        # (the database is away): that is answered at once.
        conn = await self.unless_refused(pool.getconn(), or_failed=True)
        try:
            async with conn:
                yield conn
        finally:
            await pool.putconn(conn)


def watched_pool(watch: PoolWatch, *, max_size: int) -> AsyncConnectionPool[Conn]:
    """A pool (not open yet) on ``watch.url`` whose every connection attempt ``watch`` sees.

    A connection whose server said something while it sat idle (a backend ended by an administrator or a
    restart says goodbye first) is checked with an empty query before it is handed out, and replaced if it
    fails, rather than failing the caller's transaction; one with nothing waiting is handed out as it is,
    without the round trip.
    """

    class Watched(AsyncConnection[DictRow]):
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = await super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                watch.failed(exc)
                raise
            watch.connected()
            return conn

    return AsyncConnectionPool(
        watch.url,
        connection_class=Watched,
        min_size=1,
        max_size=max_size,
        # A database that takes no connection (a host down, packets dropped) fails an attempt within
        # seconds, and a caller hears of it then rather than at its own timeout.
        kwargs={"autocommit": True, "row_factory": dict_row, "connect_timeout": _ATTEMPT_S},
        open=False,
        timeout=watch.timeout,
        check=_check_if_told,
        # Given up after the caller's own patience rather than five minutes: after that the next caller's
        # wait makes it try at once, where its pause between attempts would have grown to minutes.
        reconnect_timeout=watch.timeout,
        reconnect_failed=lambda _pool: watch.gave_up(),
    )


async def _check_if_told(conn: Conn) -> None:
    """The pool's check, only for a connection with input waiting: an idle connection is sent nothing, so
    input means the server spoke (its goodbye, most often). Checking every connection cost a round trip
    per transaction (measured 1.1x to 1.7x the time of a one-row read on loopback)."""
    if conn.closed or _has_input(conn.fileno()):
        await AsyncConnectionPool.check_connection(conn)


def _has_input(fd: int) -> bool:
    if hasattr(select, "poll"):
        polling = select.poll()
        polling.register(fd, select.POLLIN)
        return bool(polling.poll(0))  # POLLHUP and POLLERR come back too
    return bool(select.select([fd], [], [], 0)[0])  # pragma: no cover - no poll() on Windows
