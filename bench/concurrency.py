"""1,000 concurrent agent runs in one process against the scripted server: wall time and memory per run.

The server runs in its own process, answering every request with the same 40-chunk stream. Its floor is
the wall time a bare asyncio socket client needs to read 1,000 such streams concurrently. Each round
measures two like-for-like pairs:

- cold: the floor's client opens a fresh connection per stream, and steadyloop's 1,000 concurrent
  ``run_agent_loop`` runs (one step each, events collected) start on a fresh connection pool;
- warm: the floor's client reuses 1,000 open keep-alive connections, and steadyloop's runs reuse the pool
  the cold pass left, as in a long-lived process. The server does less per request on a kept
  connection, so a warm pass is compared with the warm floor, never with the cold one.

The default transport (what a process gets without configuring anything) is measured first, then the other
one for comparison. Rounds are interleaved and medians reported, because the floor itself moves by a third from one
measurement to the next on a shared two-core machine. The time the cyclic garbage collector spent in its
full passes during each timed pass is printed beside it, since at this scale it is one of the largest
costs left. Memory per run is the peak traced allocation during a separate pass over the number of runs.

Run: ``.venv/bin/python bench/concurrency.py [runs] [rounds] [--gc-freeze]``. Targets: <= 1.5x the floor,
<= 200 KB per run. ``--gc-freeze`` moves everything alive after start-up out of the collector's reach
(``gc.freeze()``), as a long-lived service may choose to; the default measures Python as it comes.
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from steadyloop.events import Event
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import ClientSettings, aclose_clients, configure_clients, reset_clients

WORDS = [f"word{i} " for i in range(40)]

Transport = Literal["httpx2", "aiohttp"]
# What a process gets without configuring anything.
DEFAULT_TRANSPORT: Transport = ClientSettings().transport

# What the floor's raw clients and bare aiohttp send: the smallest streamed chat request.
_BODY = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'


def _request(*, close: bool) -> bytes:
    connection = b"Connection: close\r\n" if close else b""
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(_BODY)}\r\n".encode()
        + connection
        + b"\r\n"
        + _BODY
    )


def _start_server() -> tuple[subprocess.Popen[str], str]:
    chunks = stream_of(WORDS, usage=usage_chunk(30, 40, cached=20))
    script = {"replies": [], "default": {"type": "stream", "chunks": chunks}}
    path = Path(tempfile.mkdtemp()) / "script.json"
    path.write_text(json.dumps(script))
    process = subprocess.Popen(
        [sys.executable, "-m", "steadyloop.testing.server", "--script", str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def _raw_stream(host: str, port: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(_request(close=True))
    await writer.drain()
    total = 0
    while True:
        data = await reader.read(65536)
        if not data:
            break
        total += len(data)
    writer.close()
    await writer.wait_closed()
    return total


def _host_port(base_url: str) -> tuple[str, int]:
    host, port = base_url.split("//")[1].split("/")[0].split(":")
    return host, int(port)


async def floor(base_url: str, runs: int) -> float:
    """The cold floor: a fresh connection per stream, closed by the server after it."""
    host, port = _host_port(base_url)
    started = time.perf_counter()
    sizes = await asyncio.gather(*(_raw_stream(host, port) for _ in range(runs)))
    elapsed = time.perf_counter() - started
    assert all(size > 1000 for size in sizes)
    return elapsed


_KEPT_REQUEST = _request(close=False)


async def _kept_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    writer.write(_KEPT_REQUEST)
    await writer.drain()
    received = b""
    while not received.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's last chunk
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("the server closed a kept connection")
        received += data
    return len(received)


async def warm_floor(base_url: str, runs: int) -> float:
    """The warm floor: the same streams over connections opened (and used once) beforehand."""
    host, port = _host_port(base_url)
    connections = await asyncio.gather(*(asyncio.open_connection(host, port) for _ in range(runs)))
    try:
        await asyncio.gather(*(_kept_stream(r, w) for r, w in connections))
        started = time.perf_counter()
        sizes = await asyncio.gather(*(_kept_stream(r, w) for r, w in connections))
        elapsed = time.perf_counter() - started
    finally:
        for _, writer in connections:
            writer.close()
    assert all(size > 1000 for size in sizes)
    return elapsed


async def runs_of(base_url: str, runs: int) -> float:
    """Wall time of ``runs`` concurrent one-step runs; checks every answer and its events."""
    endpoint = Endpoint(base_url)
    question = [UserMessage(content="hi")]
    counts: list[int] = []

    async def one() -> str:
        events: list[Event] = []
        result = await run_agent_loop(
            endpoint, ModelParams(model="m"), messages=question, on_event=events.append, policy=LoopPolicy()
        )
        counts.append(len(events))
        return result.turn.content

    started = time.perf_counter()
    answers = await asyncio.gather(*(one() for _ in range(runs)))
    elapsed = time.perf_counter() - started
    assert all(a == "".join(WORDS) for a in answers) and len(counts) == runs
    assert all(c >= 8 for c in counts)  # start, turn, messages, at least one update, usage, ends
    return elapsed


class FullCollections:
    """Seconds the collector spent in full (oldest-generation) passes while it was on."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.count += 1

    async def measure(self, work: Callable[[], Awaitable[float]]) -> tuple[float, float, int]:
        self.seconds, self.count = 0.0, 0
        gc.callbacks.append(self)
        try:
            wall = await work()
        finally:
            gc.callbacks.remove(self)
        return wall, self.seconds, self.count


async def bare_aiohttp(base_url: str, runs: int) -> tuple[float, float]:
    """The HTTP library alone (no steadyloop): cold then warm wall time reading the same streams."""
    import aiohttp

    url = f"{base_url}/chat/completions"
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=runs)) as session:

        async def one() -> int:
            response = await session.post(url, data=_BODY, headers=headers)
            size = 0
            while data := await response.content.readany():
                size += len(data)
            response.release()
            return size

        timed: list[float] = []
        for _ in range(2):
            started = time.perf_counter()
            sizes = await asyncio.gather(*(one() for _ in range(runs)))
            timed.append(time.perf_counter() - started)
            assert all(size > 1000 for size in sizes)
    return timed[0], timed[1]


async def memory_per_run(base_url: str, runs: int) -> float:
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    await runs_of(base_url, runs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    await aclose_clients()
    return (peak - base) / runs


async def transport(base_url: str, name: Transport, runs: int, rounds: int) -> None:
    if name == DEFAULT_TRANSPORT:
        label_of = f"{name}, the default"
        reset_clients()  # nothing configured: what a user gets
    else:
        label_of = f"{name}, opt-in"
        configure_clients(transport=name)
    await runs_of(base_url, 50)
    await aclose_clients()
    watch = FullCollections()
    floors: dict[str, list[float]] = {"cold": [], "warm": []}
    walls: dict[str, list[float]] = {"cold": [], "warm": []}
    bare: dict[str, list[float]] = {"cold": [], "warm": []}
    collected: dict[str, list[float]] = {"cold": [], "warm": []}
    for _ in range(rounds):
        floors["cold"].append(await floor(base_url, runs))
        floors["warm"].append(await warm_floor(base_url, runs))
        if name == "aiohttp":
            bare_cold, bare_warm = await bare_aiohttp(base_url, runs)
            bare["cold"].append(bare_cold)
            bare["warm"].append(bare_warm)
        for label in ("cold", "warm"):  # cold on a fresh pool, then warm on the pool it left
            wall, spent, _count = await watch.measure(lambda: runs_of(base_url, runs))
            walls[label].append(wall)
            collected[label].append(spent)
        await aclose_clients()
    for label in ("cold", "warm"):
        base = statistics.median(floors[label])
        wall = statistics.median(walls[label])
        ratios = sorted(w / f for w, f in zip(walls[label], floors[label], strict=True))
        print(
            f"[{label_of}] {label}: floor {base:.3f} s, steadyloop {wall:.3f} s, ratio {wall / base:.2f}x "
            f"(target <= 1.5x); per-round {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"full GC passes {statistics.median(collected[label]):.3f} s"
        )
        if bare[label]:
            alone = statistics.median(bare[label])
            print(
                f"[{label_of}] {label}: bare aiohttp reading the same streams {alone:.3f} s, {alone / base:.2f}x"
            )
    per_run = await memory_per_run(base_url, runs)
    print(f"[{label_of}] peak memory per run: {per_run / 1024:.1f} KB (target <= 200 KB)")


async def main(runs: int, rounds: int, freeze: bool) -> None:
    process, base_url = _start_server()
    try:
        await floor(base_url, 50)  # warm the server
        if freeze:
            gc.collect()
            gc.freeze()
        print(f"concurrent runs: {runs}, Python {sys.version.split()[0]}, gc.freeze(): {freeze}")
        # The default as a user gets it, then the other for comparison (fewer rounds: it is far slower).
        other: Transport = "httpx2" if DEFAULT_TRANSPORT == "aiohttp" else "aiohttp"
        await transport(base_url, DEFAULT_TRANSPORT, runs, rounds)
        await transport(base_url, other, runs, max(1, rounds // 2))
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(
        main(
            numbers[0] if numbers else 1000,
            numbers[1] if len(numbers) > 1 else 5,
            "--gc-freeze" in sys.argv,
        )
    )
