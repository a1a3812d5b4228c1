"""Internal: how a scripted reply goes over the wire, and the quiet uvicorn that carries it.

The scripted server and the fault proxy are both ASGI apps on this uvicorn: a ``Loopback`` serves one,
``read_body`` takes a request's body and ``QuietUvicorn.exchange`` keeps the response's ``Exchange``.

``play`` sends one reply through one ``Exchange``. Waits end early when the client leaves or the server stops;
a drop closes the connection under the response. Dropping needs the connection's transport, which ASGI does
not expose, so ``QuietUvicorn.close_connection`` finds it among uvicorn's connections by the client address.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

try:
    import uvicorn
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError("the scripted server needs uvicorn: pip install 'steadyloop[testing]'") from error

from .replies import KEEPALIVE_FRAME, BodyReply, Drop, ScriptedReply, StallReply, Wait

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# How long a drop or a shutdown waits for connections to go once they were told to.
GRACE = 5.0

#: Where the test doubles listen: loopback only.
HOST = "127.0.0.1"
# Room for a load test's thousand connections arriving at once.
_BACKLOG = 2048

App = Callable[[Scope, Receive, Send], Awaitable[None]]


async def read_body(receive: Receive) -> bytes | None:
    """A request's whole body; ``None`` when the client left before sending it all."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body)


class QuietUvicorn(uvicorn.Server):
    """uvicorn as a test double needs it: no signal handlers, no 0.1 s polling, a quick shutdown."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.closing = False
        self.exchanges: set[Exchange] = set()

    @classmethod
    def for_app(cls, app: App, *, backlog: int) -> QuietUvicorn:
        """A server for ``app``; ``log_config=None`` so uvicorn leaves the host's logging setup alone."""
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            date_header=False,
            backlog=backlog,
        )
        return cls(config)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # A test double must not take Ctrl-C away from the test runner.
        yield

    @contextlib.asynccontextmanager
    async def exchange(self, scope: Scope, receive: Receive, send: Send) -> AsyncIterator[Exchange]:
        """The ``Exchange`` of one request, known to the server (so a stop ends it) until it is over."""
        exchange = Exchange(self, scope, receive, send)
        self.exchanges.add(exchange)
        try:
            yield exchange
        finally:
            self.exchanges.discard(exchange)
            await exchange.finish()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    async def main_loop(self) -> None:
        await self.stop.wait()

    def stop_serving(self) -> None:
        """End every exchange in flight (their connections are cut), then shut down."""
        self.closing = True
        for exchange in list(self.exchanges):
            exchange.wake.set()
        self.stop.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        # The exchanges were told to end and idle connections are closing; their callbacks need only a few
        # loop turns, so spin briefly before falling back to short sleeps. (uvicorn's own shutdown always
        # sleeps 0.1 s, which adds up over a test suite.)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GRACE
        turns = 0
        while (self.server_state.connections or self.server_state.tasks) and loop.time() < deadline:
            turns += 1
            await asyncio.sleep(0 if turns < 50 else 0.005)
        for task in list(self.server_state.tasks):
            task.cancel()
        for server in self.servers:
            await server.wait_closed()

    def close_connection(self, scope: Scope) -> bool:
        """Close the connection that carries ``scope``; False when it cannot be found."""
        for connection in self.server_state.connections:
            transport = getattr(connection, "transport", None)
            if transport is not None and getattr(connection, "client", None) == scope.get("client"):
                # close(), not abort(): the chunks already written must still reach the client.
                transport.close()
                return True
        return False


class Loopback:
    """An ASGI app served by a ``QuietUvicorn`` on ``HOST``, started and stopped as one.

    Attributes:
        uvicorn: the server while it runs; requests arrive only then.
        task: the task that runs it.
        port: the port it listens on, once started.
    """

    def __init__(self, app: App, name: str) -> None:
        self.app = app
        self.name = name
        self.uvicorn: QuietUvicorn | None = None
        self.task: asyncio.Task[None] | None = None
        self.port: int | None = None

    async def start(self, port: int = 0) -> None:
        """Listen on ``port`` (0: any free one) and return once uvicorn is ready.

        Raises:
            OSError: the port is taken.
            RuntimeError: uvicorn stopped during startup (or what stopped it).
        """
        # Bound here rather than by uvicorn so the real port is known at once and a taken port raises OSError
        # instead of uvicorn's sys.exit.
        # IPPROTO_TCP named, not left 0: asyncio turns Nagle off only on sockets whose proto says TCP, and an
        # accepted connection inherits it. With Nagle on, a body written after its headers waited for the
        # client's delayed ACK: about 40 ms on every answer.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(_BACKLOG)
        self.port = sock.getsockname()[1]
        self.uvicorn = server = QuietUvicorn.for_app(self.app, backlog=_BACKLOG)
        self.task = task = asyncio.create_task(server.serve(sockets=[sock]))
        ready = asyncio.create_task(server.ready.wait())
        await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            sock.close()
            await task  # raises what went wrong
            raise RuntimeError(f"{self.name}: uvicorn stopped during startup")

    async def stop(self) -> None:
        """End every exchange in flight and shut down (nothing when not running)."""
        if self.uvicorn is not None and self.task is not None:
            self.uvicorn.stop_serving()
            await self.task
        self.uvicorn = self.task = None


class Exchange:
    """One request in flight."""

    def __init__(self, runner: QuietUvicorn, scope: Scope, receive: Receive, send: Send) -> None:
        self.runner = runner
        self.scope = scope
        self.receive = receive
        self.send = send
        self.wake = asyncio.Event()
        self.disconnected = False
        self.watcher: asyncio.Task[None] | None = None

    @property
    def over(self) -> bool:
        return self.disconnected or self.runner.closing

    async def _watch(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self.disconnected = True
        self.wake.set()

    async def pause(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (None: indefinitely); False when the exchange ended meanwhile."""
        if self.watcher is None:
            # Only replies that wait pay for a task listening for the client leaving.
            self.watcher = asyncio.create_task(self._watch())
        if self.over:
            return False
        self.wake.clear()
        timer = None if seconds is None else asyncio.get_running_loop().call_later(seconds, self.wake.set)
        try:
            await self.wake.wait()
        finally:
            if timer is not None:
                timer.cancel()
        return not self.over

    async def pause_with_keepalive(self, seconds: float | None, every: float | None) -> bool:
        """Like ``pause``, sending an SSE comment every ``every`` seconds meanwhile."""
        if every is None:
            return await self.pause(seconds)
        loop = asyncio.get_running_loop()
        deadline = None if seconds is None else loop.time() + seconds
        while True:
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return True
            if not await self.pause(every if left is None else min(every, left)):
                return False
            if deadline is None or loop.time() < deadline:
                await self.body(KEEPALIVE_FRAME)

    async def start(self, status: int, headers: Sequence[tuple[str, str]]) -> None:
        encoded = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        await self.send({"type": "http.response.start", "status": status, "headers": encoded})

    async def body(self, data: bytes, more: bool = True) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": more})

    async def drop(self) -> None:
        """Close the connection under the response, as a crashed or restarted server would."""
        if not self.disconnected and not self.runner.close_connection(self.scope):
            # uvicorn closes the connection when the app raises (and logs the error).
            raise ConnectionAbortedError("scripted drop: the connection was not found")
        # Returning before uvicorn saw the connection go would make it log an incomplete response.
        if self.watcher is not None:
            await asyncio.wait([self.watcher], timeout=GRACE)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(GRACE):
                while (await self.receive())["type"] != "http.disconnect":
                    pass

    async def end(self) -> None:
        """The client left (nothing to do) or the server is stopping (cut the connection: a quick exit)."""
        if not self.disconnected:
            await self.drop()

    async def finish(self) -> None:
        if self.watcher is not None:
            self.watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watcher


async def play(exchange: Exchange, reply: ScriptedReply) -> None:
    """Send ``reply`` through ``exchange``."""
    if isinstance(reply, BodyReply):
        await exchange.start(reply.status, (*reply.headers, ("Content-Length", str(len(reply.body)))))
        await exchange.body(reply.body, more=False)
        return
    if isinstance(reply, StallReply):
        if reply.seconds == 0 or await exchange.pause(reply.seconds):
            await exchange.drop()
        else:
            await exchange.end()
        return
    if reply.headers_delay > 0 and not await exchange.pause(reply.headers_delay):
        await exchange.end()
        return
    await exchange.start(reply.status, reply.headers)
    for step in reply.plan:
        if isinstance(step, bytes):
            await exchange.body(step)
        elif isinstance(step, Wait):
            if not await exchange.pause_with_keepalive(step.seconds, reply.keepalive_every):
                await exchange.end()
                return
        elif isinstance(step, Drop):
            await exchange.drop()
            return
    await exchange.body(b"", more=False)
