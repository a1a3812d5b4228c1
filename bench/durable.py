"""What a durable run costs: the same server run, plain and as a DBOS workflow, side by side.

Two apps in one process on one PostgreSQL database (``bench/store.py``'s throwaway server, or the one
``STEADYLOOP_BENCH_PG_URL`` names) and one scripted model server: ``plain`` (``ServerSettings(store=URL)``)
and ``durable`` (the same with ``durable=True``). Each run is one HTTP message: the model calls a tool,
the tool answers, the model answers, so a run is two requests and one call. Runs alternate between the
two apps, one at a time, so both see the same load. Reported: the median and 90th percentile wall time
of a run (posting the message to its answer), and durable over plain as a ratio. Nothing is asserted.

Run: ``.venv/bin/python bench/durable.py [runs]`` (default 60 per app).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx2 as httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store import postgres  # bench/ is not a package: its neighbour by path

from steadyloop import ApprovalPolicy, Endpoint, tool
from steadyloop.server import ServerSettings, create_app
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer


@tool(effect="read", idempotent=True)
def look_up(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return f"{key} is on file"


def respond(request: RecordedRequest) -> ScriptedReply:
    if request.json["messages"][-1]["role"] == "tool":
        return Reply.stream([*text_chunks(["Found ", "it."]), usage_chunk(40, 3)])
    call = {"id": "call_1", "name": "look_up", "arguments": {"key": "k"}}
    return Reply.stream([*tool_call_chunks([call]), usage_chunk(30, 9)])


async def serve(settings: ServerSettings, port: int) -> uvicorn.Server:
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    asyncio.get_running_loop().create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn says it started only by this flag
        await asyncio.sleep(0.05)
    return server


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def one_run(http: httpx.AsyncClient) -> float:
    sid = (await http.post("/sessions", json={})).json()["id"]
    started = time.perf_counter()
    answer = await http.post(f"/sessions/{sid}/messages", json={"text": "find k"})
    elapsed = time.perf_counter() - started
    assert answer.json()["answer"] == "Found it.", answer.text
    return elapsed


async def main(runs: int) -> None:
    async with postgres() as url, ScriptedServer(respond=respond) as model:
        servers: dict[str, uvicorn.Server] = {}
        clients: dict[str, httpx.AsyncClient] = {}
        for name, durable in (("plain", False), ("durable", True)):
            port = free_port()
            settings = ServerSettings(
                endpoint=Endpoint(model.base_url),
                model="scripted",
                store=url,
                node=f"bench-{name}",
                tools=[look_up],
                approval_policy=ApprovalPolicy(require_for=frozenset()),
                durable=durable,
                page=False,
            )
            servers[name] = await serve(settings, port)
            clients[name] = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60)
        try:
            for name in clients:  # warm up: connections, the first session, DBOS's first workflow
                await one_run(clients[name])
            times: dict[str, list[float]] = {name: [] for name in clients}
            for _ in range(runs):
                for name, http in clients.items():
                    times[name].append(await one_run(http))
        finally:
            for http in clients.values():
                await http.aclose()
            for server in servers.values():
                server.should_exit = True
            await asyncio.sleep(0.5)
    for name, values in times.items():
        values.sort()
        p90 = values[int(len(values) * 0.9) - 1]
        print(
            f"{name:8} median {statistics.median(values) * 1000:7.1f} ms   p90 {p90 * 1000:7.1f} ms   ({runs} runs)"
        )
    ratio = statistics.median(times["durable"]) / statistics.median(times["plain"])
    extra = (statistics.median(times["durable"]) - statistics.median(times["plain"])) * 1000
    print(f"durable / plain: {ratio:.2f}x the median run ({extra:+.1f} ms per run)")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 60))
