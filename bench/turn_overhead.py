"""CPU cost of reading one streamed turn: steadyloop's ``stream_turn`` against a bare loop over the SDK.

Both read the same 2,000-chunk stream from the scripted server (its own thread, so its CPU is not
counted: each measurement is the main thread's CPU time), in the same process, interleaved run by run.
The SDK baseline does the least a caller can: ``async for chunk in stream: pass``. steadyloop does all of
its work: SSE parsing, thinking fences, tool-call assembly, usage normalisation, the watchdog.

Run: ``.venv/bin/python bench/turn_overhead.py [runs]``. Prints per-chunk microseconds and the ratio.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time

from openai import AsyncOpenAI

from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import stream_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import aclose_clients, get_client

CHUNKS = 2000
# Two deliveries: every chunk in a few large writes (parsing cost dominates), and a tiny gap between
# chunks so each arrives in its own write, as a real server streaming tokens sends them (per-read costs
# dominate).
DELAYS = (0.0, 0.0002)
BODY = {"model": "bench", "messages": [{"role": "user", "content": "Write a long story."}]}


def _pieces() -> list[str]:
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "streaming",
        "tokens",
        "arrive",
        "one",
        "by",
        "one",
    ]
    # Drawn, not cycled: a stream that repeats one piece to the letter is a reply stuck in a loop, which
    # steadyloop stops reading (turn/repetition.py), and a real answer is not one.
    rng = random.Random(2000)
    return [f"{rng.choice(words)} " for _ in range(CHUNKS)]


async def _raw(client: AsyncOpenAI) -> tuple[float, int]:
    started = time.thread_time()
    stream = await client.chat.completions.create(
        model="bench", messages=[{"role": "user", "content": "x"}], stream=True
    )
    n = 0
    async for _chunk in stream:
        n += 1
    return time.thread_time() - started, n


async def _ours(endpoint: Endpoint) -> tuple[float, int]:
    started = time.thread_time()
    turn = await stream_turn(get_client(endpoint), BODY, idle_timeout=60.0)
    return time.thread_time() - started, len(turn.content)


async def measure(runs: int, delay: float) -> float:
    chunks = stream_of(_pieces(), usage=usage_chunk(40, CHUNKS, cached=32))
    with ScriptedServer.in_thread(default_reply=Reply.stream(chunks, delay=delay)) as server:
        endpoint = Endpoint(server.base_url)
        raw_client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        raw: list[float] = []
        ours: list[float] = []
        await _raw(raw_client)  # warm both paths: connection pools, imports, caches
        await _ours(endpoint)
        for i in range(runs):
            order = (_raw, _ours) if i % 2 == 0 else (_ours, _raw)
            for fn in order:
                if fn is _raw:
                    cpu, n = await _raw(raw_client)
                    assert n == CHUNKS + 3, n  # opener + pieces + finish + usage
                    raw.append(cpu)
                else:
                    cpu, n = await _ours(endpoint)
                    assert n == len("".join(_pieces())), n
                    ours.append(cpu)
        await raw_client.close()
        await aclose_clients()
    raw_med = statistics.median(raw)
    ours_med = statistics.median(ours)
    shown = "one write per chunk" if delay else "chunks batched into few writes"
    print(f"{shown}: {CHUNKS} chunks, {runs} interleaved runs")
    print(f"  raw openai SDK, median CPU:  {raw_med * 1e3:.1f} ms  ({raw_med / CHUNKS * 1e6:.2f} us/chunk)")
    print(f"  steadyloop,     median CPU:  {ours_med * 1e3:.1f} ms  ({ours_med / CHUNKS * 1e6:.2f} us/chunk)")
    print(f"  ratio steadyloop / raw SDK:  {ours_med / raw_med:.3f}  (target <= 1.15)")
    return ours_med / raw_med


async def main(runs: int) -> None:
    ratios = [await measure(runs, delay) for delay in DELAYS]
    print(f"worst ratio: {max(ratios):.3f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
