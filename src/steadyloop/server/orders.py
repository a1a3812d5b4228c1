"""Orders between nodes on one PostgreSQL store: a decision, a steer, a follow-up or an abort posted to a
node that is not running the session's run is carried out by the node that is.

The posting node writes the order as a row of ``steadyloop.durable_orders`` and announces it on
``ORDERS_CHANNEL`` (``order ID SESSION``); the node whose run it is takes it (one ``UPDATE``: no two nodes
take one order), applies it with the same checks as a local request (``control.apply``), writes its answer
and announces that (``done ID``); the posting node answers as the running node answered. An order no node
took within ``ORDER_WAIT_S`` is withdrawn and answered 503 ``unavailable``. Each node listens on a
connection of its own (``application_name`` ``steadyloop-orders NODE``); when it drops, the node listens
again, with growing pauses, and takes the orders posted meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import psycopg

from steadyloop.sessions import Reconnects, StateChange
from steadyloop.sessions.postgres import read_failure

from .control import Order, apply
from .errors import ApiError
from .nodes import BEAT_S, STALE_S

if TYPE_CHECKING:
    from .live import LiveSession
    from .runtime import Runtime

__all__ = ["LISTEN_MAX_PAUSE_S", "ORDERS_CHANNEL", "ORDER_WAIT_S", "Orders", "listener_name"]

log = logging.getLogger("steadyloop.server.orders")

#: Seconds a node forwarding an order waits for the node running the run to take it.
ORDER_WAIT_S = 10.0
#: The longest pause between the order listener's attempts to connect again (from 0.1 s, doubling).
LISTEN_MAX_PAUSE_S = 5.0
#: Where nodes announce orders (``order ID SESSION``) and their answers (``done ID``).
ORDERS_CHANNEL = "steadyloop_durable_orders"


def listener_name(node: str) -> str:
    """The ``application_name`` of the node's connection that hears orders (``pg_stat_activity`` shows it)."""
    return f"steadyloop-orders {node}"[:63]


def _say(change: StateChange | None) -> None:
    if change is not None:
        log.log(change.level, "%s", change.text)


class Orders:
    """This node's half of the orders: it forwards those for runs elsewhere and takes those for its own."""

    def __init__(self, runtime: Runtime, url: str) -> None:
        self.runtime = runtime
        self.url = url
        self.node = runtime.node
        self._listening: asyncio.Task[None] | None = None
        self._taking: set[asyncio.Task[None]] = set()
        self._answered: dict[int, asyncio.Event] = {}  # orders this node forwarded, set when answered

    def start(self) -> None:
        self._listening = asyncio.get_running_loop().create_task(self.listen())

    async def close(self) -> None:
        if self._listening is not None:
            self._listening.cancel()
            await asyncio.gather(self._listening, return_exceptions=True)
        for task in self._taking:
            task.cancel()
        await asyncio.gather(*self._taking, return_exceptions=True)

    async def forward(self, live: LiveSession, order: Order) -> None:
        """Have the node running the session's run carry ``order`` out, and answer as it answers.

        Raises:
            ApiError: the error the running node answered; ``unavailable`` when no node took the order.
        """
        sid = live.session_id
        answered = asyncio.Event()
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cursor = await conn.execute(
                "INSERT INTO steadyloop.durable_orders (session_id, principal, body) VALUES (%s, %s, %s) "
                "RETURNING id",
                (sid, live.principal, order.to_json()),
            )
            row = await cursor.fetchone()
            assert row is not None
            order_id = int(row[0])
            self._answered[order_id] = answered
            try:
                await conn.execute("SELECT pg_notify(%s, %s)", (ORDERS_CHANNEL, f"order {order_id} {sid}"))
                answer = await self._answer(conn, order_id, answered)
            finally:
                self._answered.pop(order_id, None)
                await conn.execute("DELETE FROM steadyloop.durable_orders WHERE id = %s", (order_id,))
        if answer is None:
            raise ApiError(
                "unavailable",
                "the node running this session's run did not take the request in time",
                hint="post it again; with --durable, a run whose node stopped resumes on another node "
                f"within {STALE_S + BEAT_S:.0f} s",
            )
        error = json.loads(answer).get("error")
        if error is not None:
            raise ApiError(error["code"], error["message"], hint=error.get("hint"))

    async def _answer(
        self, conn: psycopg.AsyncConnection[Any], order_id: int, answered: asyncio.Event
    ) -> str | None:
        """The order's answer, once written; ``None`` if no node took it in time (it is withdrawn)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ORDER_WAIT_S
        while True:
            # Looked at on each announcement, and at least each beat in case one was missed.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(BEAT_S, max(0.0, deadline - loop.time()))):
                    await answered.wait()
            answered.clear()
            cursor = await conn.execute(
                "SELECT answer FROM steadyloop.durable_orders WHERE id = %s", (order_id,)
            )
            row = await cursor.fetchone()
            answer = row[0] if row is not None else None
            if answer:
                return str(answer)
            if loop.time() >= deadline:
                cursor = await conn.execute(
                    "DELETE FROM steadyloop.durable_orders WHERE id = %s AND answer IS NULL RETURNING id",
                    (order_id,),
                )
                if await cursor.fetchone() is not None:
                    return None  # withdrawn before any node took it
                deadline = loop.time() + ORDER_WAIT_S  # taken: its answer is on its way

    async def listen(self) -> None:
        """Hear orders for the runs going here, and answers to the orders this node forwarded."""
        loop = asyncio.get_running_loop()
        what = f"node {self.node}: the order listener"
        reconnects = Reconnects(what, first_s=0.1, max_s=LISTEN_MAX_PAUSE_S)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, application_name=listener_name(self.node)
                ) as conn:
                    await conn.execute(f"LISTEN {ORDERS_CHANNEL}")
                    _say(reconnects.connected(loop.time()))
                    log.debug("%s is listening", what)
                    for answered in self._answered.values():
                        answered.set()  # an answer may have come while this node was not listening
                    cursor = await conn.execute(
                        "SELECT id, session_id FROM steadyloop.durable_orders WHERE answer IS NULL ORDER BY id"
                    )
                    for order_id, sid in await cursor.fetchall():  # and orders: take those for runs here
                        self._order(int(order_id), str(sid))
                    async for notice in conn.notifies():
                        kind, _, rest = notice.payload.partition(" ")
                        if kind == "done":
                            done = self._answered.get(int(rest))
                            if done is not None:
                                done.set()
                        elif kind == "order":
                            order_id, _, sid = rest.partition(" ")
                            self._order(int(order_id), sid)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away for a while: listen again when it is back
                # One line when the state changes (lost, refused and why, back), not one per attempt.
                _say(reconnects.failed(read_failure(exc, self.url), loop.time()))
                pause = reconnects.pause()
                log.debug("%s tries again in %.2f s", what, pause)
                await asyncio.sleep(pause)

    def _order(self, order_id: int, session_id: str) -> None:
        """An order was posted for a session: take it if its run is going here."""
        live = self.runtime.loaded(session_id)
        if live is not None and live.busy:
            task = asyncio.get_running_loop().create_task(self._take(order_id))
            self._taking.add(task)
            task.add_done_callback(self._taking.discard)

    async def _take(self, order_id: int) -> None:
        """Take an order for a run going here, carry it out, and answer it."""
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cursor = await conn.execute(
                "UPDATE steadyloop.durable_orders SET answer = '' WHERE id = %s AND answer IS NULL "
                "RETURNING session_id, principal, body",
                (order_id,),
            )
            row = await cursor.fetchone()
            if row is None:
                return  # withdrawn, or taken already
            sid, principal, body = str(row[0]), str(row[1]), str(row[2])
            live = self.runtime.loaded(sid)
            answer: dict[str, Any] = {}
            try:
                if live is None or live.principal != principal:
                    raise ApiError("no_run_in_progress", "nothing is running in this session")
                await apply(live, Order.from_json(body))
            except ApiError as exc:
                answer = {"error": {"code": exc.code, "message": exc.message, "hint": exc.hint}}
            await conn.execute(
                "UPDATE steadyloop.durable_orders SET answer = %s WHERE id = %s",
                (json.dumps(answer), order_id),
            )
            await conn.execute("SELECT pg_notify(%s, %s)", (ORDERS_CHANNEL, f"done {order_id}"))
