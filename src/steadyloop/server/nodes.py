"""The nodes sharing one PostgreSQL store: each beats, a name is held by one live node at a time, and a
silent node is judged dead only by a node that had the database the whole time it was silent.

Every node on a PostgreSQL store beats once a second in ``steadyloop.durable_nodes`` (its name, the
instance of the process that holds the name, and the database's time of its last beat). Three decisions
read those beats; the two that are pure arithmetic are here as values with no I/O (``Hold``, ``Lease``):

- **A name is held by one live node.** A node starting under a name whose beat is fresh waits, up to
  ``STALE_S`` and a beat, for it to stop: a node killed a moment ago leaves a fresh beat that then stops,
  a live node beats on and the newcomer is refused (``NameInUse``). A node that stops gracefully gives its
  name back at once.
- **Death is judged by a node that had the database.** A durable node ``J`` takes a silent node's runs
  over only when that node has not beaten for ``STALE_S`` *and* ``J`` itself has beaten without a break
  for at least ``STALE_S`` (``Hold``): the silent node's beats were missed while the database was there to
  take them. When the database itself goes away, every node loses it together; the first to come back
  has held it for no time, and the others are back and beating before it may judge anyone.
- **A node whose hold may have lapsed starts nothing durable** (``Lease``). A node that has not had a beat
  taken for ``LEASE_S`` (well under ``STALE_S``) might be judged dead by a node that can still reach the
  database; until its next beat is taken it starts no model request, no tool call and writes nothing for
  its durable runs. Its next beat says whether it still holds its runs (its instance is still in its row)
  or another node took them over (the row is gone): then it gives them up (``on_lost``) without writing
  into them, and beats on as a new instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from steadyloop import InvalidInput
from steadyloop.sessions import Reconnects, StateChange
from steadyloop.sessions.postgres import read_failure

__all__ = [
    "BEAT_S",
    "LEASE_S",
    "STALE_S",
    "Hold",
    "Lease",
    "NameInUse",
    "NodeBeats",
    "claim_name",
    "name_free",
]

log = logging.getLogger("steadyloop.server.nodes")

#: Seconds between a node's beats.
BEAT_S = 1.0
#: A node silent this long (while its judge had the database) is taken for dead.
STALE_S = 5.0
#: A node without a beat taken for this long starts nothing durable until its next beat is taken.
LEASE_S = 2.5
#: The longest gap between two of a node's beats for its hold on the database to count as unbroken.
GAP_S = 2.5 * BEAT_S


class NameInUse(InvalidInput):
    """Another live node holds this node's name (its beat is fresh and goes on)."""


@dataclass
class Hold:
    """How long this node has had the database without a break, by the database's clock (sans-I/O).

    ``beat(at)`` after each beat the database took, at its time ``at`` (seconds); ``lost()`` when a beat
    failed. Beats further apart than ``GAP_S`` are a break too (the database stalled, or this process did).
    """

    since: float | None = None
    last: float | None = None

    def beat(self, at: float) -> None:
        if self.last is None or self.since is None or at - self.last > GAP_S:
            self.since = at
        self.last = at

    def lost(self) -> None:
        self.since = self.last = None

    def may_judge(self, now: float) -> bool:
        """Whether a node silent for ``STALE_S`` by ``now`` was silent while this node had the database."""
        return self.since is not None and now - self.since >= STALE_S


@dataclass
class Lease:
    """Whether this node may go on with its durable runs, by its own monotonic clock (sans-I/O).

    ``taken(sent)`` after a beat sent at ``sent`` was taken with this node's instance still in its row: no
    node can judge it dead until ``STALE_S`` after that beat, so its runs are its own until ``LEASE_S``
    after it (the margin covers a beat slow to arrive and clocks running at slightly different rates).
    """

    instance: str
    sent: float | None = None

    def taken(self, sent: float) -> None:
        self.sent = sent if self.sent is None else max(self.sent, sent)

    def held(self, now: float) -> bool:
        return self.sent is not None and now - self.sent < LEASE_S

    def renew(self) -> str:
        """A new instance, after another node took this one's runs over; nothing is held until it beats."""
        self.instance = uuid.uuid4().hex
        self.sent = None
        return self.instance


Judge = Callable[[psycopg.AsyncConnection[Any], str], Awaitable[None]]


def _say(change: StateChange | None) -> None:
    if change is not None:
        log.log(change.level, "%s", change.text)


class NodeBeats:
    """This node's beats in the shared database, its lease on its runs, and (durable nodes) its judging.

    Args:
        url: the database.
        node: this node's name.
        judge: called with a connection and the name of each node found silent, when this node may
            judge (durable nodes: it takes the node's runs over); ``None`` judges nobody.
        on_lost: called with the old instance when another node took this node's runs over.
    """

    def __init__(
        self,
        url: str,
        node: str,
        *,
        judge: Judge | None = None,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.url = url
        self.node = node
        self.lease = Lease(uuid.uuid4().hex)
        self.hold = Hold()
        self._judge = judge
        self._on_lost = on_lost
        self._news = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def instance(self) -> str:
        return self.lease.instance

    async def start(self) -> None:
        """Take this node's name (refused while another live node holds it) and beat from now on.

        Raises:
            NameInUse: a node beating under this name goes on beating.
        """
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await claim_name(conn, self.node, self.instance)
            sent = asyncio.get_running_loop().time()
            self._taken(sent, await _beat(conn, self.node, self.instance))
        self._task = asyncio.get_running_loop().create_task(self._keep_beating())

    async def close(self) -> None:
        """Stop beating and give the name back, so a node restarted under it starts at once."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        with contextlib.suppress(Exception):
            async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=2
            ) as c:
                await c.execute(
                    "DELETE FROM steadyloop.durable_nodes WHERE node = %s AND instance = %s",
                    (self.node, self.instance),
                )

    async def held(self, instance: str) -> bool:
        """Wait until this node holds its runs of ``instance``; ``False`` once another node took them over."""
        loop = asyncio.get_running_loop()
        while instance == self.instance:
            if self.lease.held(loop.time()):
                return True
            self._news.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(BEAT_S):
                    await self._news.wait()
        return False

    def _taken(self, sent: float, at: datetime | None) -> None:
        if at is not None:
            self.lease.taken(sent)
            self.hold.beat(at.timestamp())
        self._news.set()

    async def _keep_beating(self) -> None:
        loop = asyncio.get_running_loop()
        # Never slower than a beat, so a node whose database comes back beats again within one.
        reconnects = Reconnects(f"node {self.node}: the beat", first_s=BEAT_S, max_s=BEAT_S)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(LEASE_S))
                ) as conn:
                    while True:
                        # A database that takes the connection but stops answering is a lost one too.
                        async with asyncio.timeout(GAP_S):
                            at = await self._beat_once(conn, loop.time())
                        if at is not None and self._judge is not None and self.hold.may_judge(at):
                            await self._judge_silent(conn)
                        _say(reconnects.connected(loop.time()))
                        await asyncio.sleep(BEAT_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away for a while: beat again when it is back
                self.hold.lost()
                self._news.set()
                _say(reconnects.failed(read_failure(exc, self.url), loop.time()))
                await asyncio.sleep(reconnects.pause())

    async def _beat_once(self, conn: psycopg.AsyncConnection[Any], sent: float) -> float | None:
        """One beat; the database's time of it (seconds), or ``None`` if this node's runs were taken over."""
        at = await _beat(conn, self.node, self.instance)
        if at is not None:
            self._taken(sent, at)
            return at.timestamp()
        # Another node took this one's runs over (or its name) while it could not beat: given up, and
        # this node beats on as a new instance.
        lost = self.instance
        log.warning(
            "node %s: another node took this node's runs over while it could not beat; they go on there, "
            "and this node gives them up",
            self.node,
        )
        self.hold.lost()
        self.lease.renew()
        if self._on_lost is not None:
            self._on_lost(lost)
        await _upsert(conn, self.node, self.instance)
        self._news.set()
        return None

    async def _judge_silent(self, conn: psycopg.AsyncConnection[Any]) -> None:
        assert self._judge is not None
        cursor = await conn.execute(
            "SELECT node FROM steadyloop.durable_nodes WHERE node <> %s AND beat < now() - %s * interval '1s'",
            (self.node, STALE_S),
        )
        for (silent,) in await cursor.fetchall():
            await self._judge(conn, str(silent))


async def _beat(conn: psycopg.AsyncConnection[Any], node: str, instance: str) -> datetime | None:
    """Say the instance holding ``node`` is alive; the database's time, or ``None`` if it no longer holds it."""
    cursor = await conn.execute(
        "UPDATE steadyloop.durable_nodes SET beat = now() WHERE node = %s AND instance = %s RETURNING now()",
        (node, instance),
    )
    row = await cursor.fetchone()
    return None if row is None else row[0]


async def _upsert(conn: psycopg.AsyncConnection[Any], node: str, instance: str) -> None:
    await conn.execute(
        "INSERT INTO steadyloop.durable_nodes (node, instance) VALUES (%s, %s) "
        "ON CONFLICT (node) DO UPDATE SET instance = excluded.instance, beat = now()",
        (node, instance),
    )


async def name_free(url: str, node: str) -> None:
    """Return once no live node holds ``node`` (waiting out a beat that stops, as ``claim_name`` does).

    Raises:
        NameInUse: a node beating under ``node`` beat again while this one waited.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await _wait_for_name(conn, node, None)


async def claim_name(conn: psycopg.AsyncConnection[Any], node: str, instance: str) -> None:
    """Hold ``node`` as ``instance``: at once if no live node has it, else after its beat stopped for good.

    A fresh beat is waited out for up to ``STALE_S`` and a beat: a node killed just now stops beating and
    its name is taken when its beat is stale; a node that beats again meanwhile is alive.

    Raises:
        NameInUse: another node beating under ``node`` beat again while this one waited.
    """
    await _wait_for_name(conn, node, instance)


async def _wait_for_name(conn: psycopg.AsyncConnection[Any], node: str, instance: str | None) -> None:
    """Wait until no live node holds ``node``; with an ``instance``, take it for that instance."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STALE_S + BEAT_S
    first: datetime | None = None
    while True:
        if instance is not None:
            cursor = await conn.execute(
                "INSERT INTO steadyloop.durable_nodes (node, instance) VALUES (%s, %s) "
                "ON CONFLICT (node) DO UPDATE SET instance = excluded.instance, beat = now() "
                "WHERE durable_nodes.beat < now() - %s * interval '1s' "
                "RETURNING node",
                (node, instance, STALE_S),
            )
            if await cursor.fetchone() is not None:
                return
        cursor = await conn.execute(
            "SELECT beat, now() - beat, beat < now() - %s * interval '1s' "
            "FROM steadyloop.durable_nodes WHERE node = %s",
            (STALE_S, node),
        )
        row = await cursor.fetchone()
        if row is None or row[2]:
            if instance is None:
                return
            continue  # given back or gone silent meanwhile: take it
        beat, age = row[0], row[1]
        if (first is not None and beat > first) or loop.time() >= deadline:
            raise NameInUse(
                f"node name {node!r} is in use: a node under that name beat {age.total_seconds():.1f} s ago "
                "and beats on; give this node another name (--node NAME), or stop that node first"
            )
        first = first or beat
        await asyncio.sleep(BEAT_S / 2)
