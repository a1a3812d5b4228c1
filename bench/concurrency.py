"""1,000 concurrent agent runs in one process against the scripted server: wall time and memory per run.

The server runs in its own process, answering every request with the same 40-chunk stream. Its floor is
the wall time a bare asyncio socket client needs to read 1,000 such streams concurrently; steadyloop's
figure is 1,000 concurrent ``run_agent_loop`` runs (one step each, events collected) in this process.
Memory per run is the peak traced allocation during the runs over the number of runs.

Run: ``.venv/bin/python bench/concurrency.py [runs]``. Targets: <= 1.5x the floor, <= 200 KB per run.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from steadyloop.events import Event
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.wire.clients import aclose_clients, configure_clients
from steadyloop.wire.endpoints import Endpoint

WORDS = [f"word{i} " for i in range(40)]


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
    body = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
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


async def floor(base_url: str, runs: int) -> float:
    host, port = base_url.split("//")[1].split("/")[0].split(":")
    started = time.perf_counter()
    sizes = await asyncio.gather(*(_raw_stream(host, int(port)) for _ in range(runs)))
    elapsed = time.perf_counter() - started
    assert all(size > 1000 for size in sizes)
    return elapsed


async def ours(base_url: str, runs: int, *, trace: bool = False) -> tuple[float, float]:
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

    # Timed and traced in separate passes: tracing every allocation slows the run it measures.
    if trace:
        tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    started = time.perf_counter()
    answers = await asyncio.gather(*(one() for _ in range(runs)))
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    if trace:
        tracemalloc.stop()
    assert all(a == "".join(WORDS) for a in answers) and len(counts) == runs
    await aclose_clients()
    return elapsed, (peak - base) / runs


async def main(runs: int) -> None:
    process, base_url = _start_server()
    try:
        await floor(base_url, 50)  # warm the server
        print(f"concurrent runs: {runs}")
        for transport in ("httpx2", "aiohttp"):
            configure_clients(transport=transport)
            await ours(base_url, 50)
            server_floor = await floor(base_url, runs)
            wall, _ = await ours(base_url, runs)
            _, per_run = await ours(base_url, runs, trace=True)
            print(f"[{transport}] server floor (raw socket client): {server_floor:.2f} s")
            print(
                f"[{transport}] steadyloop runs: {wall:.2f} s, ratio {wall / server_floor:.2f}x (target <= 1.5x)"
            )
            print(f"[{transport}] peak memory per run: {per_run / 1024:.1f} KB (target <= 200 KB)")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000))
