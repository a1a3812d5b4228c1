"""What the native wires' pooled clients save: a turn through the endpoint's pooled client (``lease_native``:
the Anthropic SDK client, the Gemini REST client, kept per endpoint with their open connections) against the
same turn with a fresh client per request (the pool emptied after every turn, so each turn builds its client,
opens its connection and closes both).

Each wire's recorded plain-text stream (tests/data/providers/*/01-text.sse) is served by a bare HTTP/1.1 stub
on loopback in the same event loop: one write per answer, keep-alive, nothing else, so what is left to measure
is the client. The two ways run interleaved, turn by turn, in one process.

Most of a fresh client's cost is building it: ``httpx2.AsyncClient()`` and ``anthropic.AsyncAnthropic()`` each
took 24-30 ms here, loading TLS certificates even for an ``http://`` URL.

Run: ``.venv/bin/python bench/native_clients.py [runs]``. Prints median milliseconds per turn and the ratio
(fresh / pooled) for each wire.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

from steadyloop.turn import run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import aclose_clients

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "providers"
WIRES = {
    "anthropic": ("claude-sonnet-4-5", lambda url: Endpoint(url.removesuffix("/v1"), "k", api="anthropic")),
    "gemini": (
        "gemini-2.0-flash-exp",
        lambda url: Endpoint(url.removesuffix("/v1") + "/v1beta", "k", api="gemini"),
    ),
}


class Stub:
    """A keep-alive HTTP/1.1 server on loopback that answers every POST with one body, in one write."""

    def __init__(self, stream: bytes) -> None:
        self.stream = stream
        self.requests = 0
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        if self.handlers:  # the clients were closed: each handler ends on its connection's EOF
            await asyncio.wait(self.handlers, timeout=5)
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self.handlers.add(task)
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                path = head.split(b" ", 2)[1]
                await reader.readexactly(length)
                self.requests += 1
                if b"count" in path.lower():  # the first turn's token count
                    body, kind = b'{"input_tokens": 9, "totalTokens": 9}', b"application/json"
                else:
                    body, kind = self.stream, b"text/event-stream"
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: "
                    + kind
                    + b"\r\ncontent-length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _wire(name: str, runs: int) -> tuple[float, float, int]:
    model, endpoint_of = WIRES[name]
    stub = Stub((DATA / name / "01-text.sse").read_bytes())
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}
    pooled: list[float] = []
    fresh: list[float] = []
    async with stub as url:
        endpoint = endpoint_of(url)
        await run_turn(endpoint, body)  # warm: imports, the first count, the first client
        for _ in range(runs):
            for times, empty_pool in ((pooled, False), (fresh, True)):
                if empty_pool:
                    await aclose_clients()  # the next turn builds its client and connection anew
                started = time.perf_counter()
                turn = await run_turn(endpoint, body)
                times.append((time.perf_counter() - started) * 1000)
                assert turn.content, "the recorded stream gave no answer"
        await aclose_clients()
    return statistics.median(pooled), statistics.median(fresh), stub.connections


async def main(runs: int) -> None:
    for name in WIRES:
        pooled, fresh, connections = await _wire(name, runs)
        print(
            f"{name:9}  pooled client: {pooled:.2f} ms   fresh client per request: {fresh:.2f} ms"
            f"   ratio {fresh / pooled:.2f}   ({connections} connections for {2 * runs + 1} turns)"
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
