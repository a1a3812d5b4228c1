"""What a failover hop costs: a turn to a working endpoint, against the same turn through a chain whose first
candidate fails at once (a 503) and whose second is that working endpoint.

Both run in the same process against scripted servers on loopback, interleaved run by run. The difference
is the failed request's round trip plus the hop itself: there is no backoff before a hop.

Run: ``.venv/bin/python bench/failover.py [runs]``. Prints median milliseconds per turn and the ratio.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from steadyloop.testing.chunks import text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import run_turn
from steadyloop.wire.endpoints import Endpoint, Target
from steadyloop.wire.transport.clients import aclose_clients

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def main(runs: int) -> None:
    answer = Reply.stream([*text_chunks(["a short answer"]), usage_chunk(5, 3)])
    down = Reply.json({"error": {"message": "Service unavailable", "type": "server_error"}}, 503)
    async with ScriptedServer() as failing, ScriptedServer() as working:
        direct = Endpoint(working.base_url)
        chain = Endpoint(failing.base_url).with_fallbacks(Target(direct))
        plain: list[float] = []
        hopped: list[float] = []
        for _ in range(runs):
            for endpoint, times in ((direct, plain), (chain, hopped)):
                working.enqueue(answer)
                if endpoint is chain:
                    failing.enqueue(down)
                started = time.perf_counter()
                await run_turn(endpoint, BODY)
                times.append((time.perf_counter() - started) * 1000)
        await aclose_clients()
    a, b = statistics.median(plain), statistics.median(hopped)
    print(f"direct turn: {a:.2f} ms   through a failed first candidate: {b:.2f} ms   ratio {b / a:.2f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
