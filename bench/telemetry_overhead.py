"""CPU cost of tracing a run: the same two-step tool run with telemetry off and on, side by side.

Each run streams a 500-chunk answer after a tool call from the scripted server (its own thread, so its CPU
is not counted: each measurement is the main thread's CPU time). With telemetry on, spans go to the
OpenTelemetry SDK with a simple processor and an in-memory exporter, the cheapest real sink; the streamed
chunks themselves pass the tracer untouched, so what is measured is the per-event check plus the spans.

Run: ``.venv/bin/python bench/telemetry_overhead.py [runs]``. Prints per-run milliseconds and the ratio.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import steadyloop as sl
from steadyloop.telemetry import Telemetry, set_telemetry
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

CHUNKS = 500


@sl.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _script(runs: int) -> list[Reply]:
    answer = ["word "] * CHUNKS
    script = []
    for _ in range(runs):
        script.append(
            Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}]))
        )
        script.append(Reply.stream(stream_of(answer)))
    return script


async def _one(endpoint: sl.Endpoint) -> float:
    started = time.thread_time()
    await sl.run_agent_loop(
        endpoint, sl.ModelParams(model="bench"), messages=[sl.UserMessage(content="1+2?")], tools=[add]
    )
    return (time.thread_time() - started) * 1000


async def main(runs: int) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    off: list[float] = []
    on: list[float] = []
    async with ScriptedServer(*_script(2 * runs + 2)) as server:
        endpoint = sl.Endpoint(server.base_url)
        await _one(endpoint)  # warm the pool and the imports
        set_telemetry(Telemetry(tracer_provider=provider))
        await _one(endpoint)
        for _ in range(runs):
            set_telemetry(None)
            off.append(await _one(endpoint))
            set_telemetry(Telemetry(tracer_provider=provider))
            on.append(await _one(endpoint))
            exporter.clear()
        set_telemetry(None)
    await sl.aclose_clients()
    a, b = statistics.median(off), statistics.median(on)
    print(f"telemetry off: {a:.2f} ms/run  on: {b:.2f} ms/run  ratio on/off: {b / a:.3f}  ({runs} runs each)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
