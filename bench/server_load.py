"""Many concurrent sessions through ``steadyloop serve``'s HTTP API, on its default transport beside the other.

Four processes: the scripted model server (every request answered with the same 40-piece stream), two API
servers on it (``python -m steadyloop.cli serve``, each with its own store in a temporary folder), one with
the default ``--transport`` and one with the other, and this one, the clients. In a pass, each session is
created, then its first message is streamed as SSE; every third session also gets two watchers attaching
from the middle of its stream (``Last-Event-ID``). Passes alternate between the two servers, which go
first in turn, so load on a shared machine moves both alike; the ratio is taken pass by pass.

Reported per transport: the median wall time of a pass (first create to last stream's end) and per
session, and the API server's resident memory at rest and at its peak (``VmHWM``) over all its passes;
then the other transport's wall time over the default's. Nothing is asserted: the test with the same shape
is ``tests/server/test_load.py``.

Run: ``.venv/bin/python bench/server_load.py [sessions] [passes]`` (default 200 sessions, 4 passes each).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx

# What ``steadyloop serve`` reads its model's streams with when no ``--transport`` is given.
DEFAULT_TRANSPORT = "aiohttp"

WORDS = " ".join(f"word{i}" for i in range(40))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def memory_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0])
    return out


async def wait_up(url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            try:
                if (await http.get(url)).status_code < 500:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


async def session(http: httpx.AsyncClient, index: int) -> int:
    sid = (await http.post("/sessions", json={"title": f"load {index}"})).json()["id"]
    watchers: list[asyncio.Task[int]] = []

    async def watch(last: int) -> int:
        count = 0
        async with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": str(last)}
        ) as response:
            async for line in response.aiter_lines():
                count += line.startswith("id:")
        return count

    events = 0
    async with http.stream(
        "POST", f"/sessions/{sid}/messages", json={"text": "go"}, headers={"Accept": "text/event-stream"}
    ) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                events += 1
                if index % 3 == 0 and events in (2, 5):
                    watchers.append(asyncio.create_task(watch(events)))
    await asyncio.gather(*watchers)
    return events


def start_api(
    folder: Path, name: str, model_port: int, sessions: int, transport: str
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "steadyloop.cli",
            "serve",
            "--port",
            str(port),
            "--base-url",
            f"http://127.0.0.1:{model_port}/v1",
            "-m",
            "scripted",
            "--no-tools",
            "--store",
            str(folder / f"{name}.db"),
            "--max-runs",
            str(sessions),
            "--transport",
            transport,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
    )
    return process, f"http://127.0.0.1:{port}"


async def load(base: str, sessions: int) -> tuple[float, list[int]]:
    """One pass: ``sessions`` concurrent sessions against one API server; its wall time and event counts."""
    # Idle connections are dropped well before the API server's keep-alive timeout (uvicorn's 5 s), so a
    # request never lands on one the server is closing: a slow pass on a busy machine met that otherwise.
    limits = httpx.Limits(
        max_connections=sessions * 3, max_keepalive_connections=sessions, keepalive_expiry=1.0
    )
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as http:
        started = time.perf_counter()
        counts = await asyncio.gather(*(session(http, i) for i in range(sessions)))
        wall = time.perf_counter() - started
    if min(counts) == 0:
        raise SystemExit(f"{counts.count(0)} sessions streamed nothing: the server refused them")
    return wall, counts


async def main(sessions: int, rounds: int) -> None:
    # The server's own default first (what ``steadyloop serve`` does unconfigured), then the other.
    transports = (DEFAULT_TRANSPORT, "httpx" if DEFAULT_TRANSPORT == "aiohttp" else "aiohttp")
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "script.json"
        script.write_text(json.dumps({"default": {"type": "stream", "text": WORDS}}))
        model_port = free_port()
        model = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
            [
                sys.executable,
                "-m",
                "steadyloop.testing.server",
                "--script",
                str(script),
                "--port",
                str(model_port),
            ],
            stdout=subprocess.DEVNULL,
        )
        apis = {name: start_api(Path(folder), name, model_port, sessions, name) for name in transports}
        walls: dict[str, list[float]] = {name: [] for name in transports}
        try:
            await wait_up(f"http://127.0.0.1:{model_port}/v1/models")
            for _process, base in apis.values():
                await wait_up(f"{base}/health")
            at_rest = {name: memory_kb(process.pid) for name, (process, _base) in apis.items()}
            for _process, base in apis.values():
                await load(base, 10)  # first requests: imports and pools, not measured
            counts: list[int] = []
            for round_index in range(rounds):
                # Alternating which goes first, so a machine that gets busier or quieter favours neither.
                order = transports if round_index % 2 == 0 else transports[::-1]
                for name in order:
                    wall, counts = await load(apis[name][1], sessions)
                    walls[name].append(wall)
            peak = {name: memory_kb(process.pid) for name, (process, _base) in apis.items()}
        finally:
            for process, _base in apis.values():
                process.terminate()
                process.wait(10)
            model.terminate()
            model.wait(10)
    default, other = transports
    print(
        f"sessions: {sessions} concurrent per pass, {rounds} passes per transport, recorded events per run: "
        f"{counts[0]}, watchers from the middle per pass: {2 * len(range(0, sessions, 3))}"
    )
    for name in transports:
        wall = statistics.median(walls[name])
        grown = peak[name]["VmHWM"] - at_rest[name]["VmRSS"]
        label = f"{name}, the default" if name == default else f"{name}, opt-in"
        print(
            f"[{label}] wall time: median {wall:.2f} s ({1000 * wall / sessions:.1f} ms per session); "
            f"per pass {', '.join(f'{w:.2f}' for w in walls[name])}"
        )
        print(
            f"[{label}] API server memory: {at_rest[name]['VmRSS'] / 1024:.1f} MB at rest, peak "
            f"{peak[name]['VmHWM'] / 1024:.1f} MB (+{grown / 1024:.1f} MB, {grown / sessions:.0f} KB per session)"
        )
    ratios = sorted(o / d for o, d in zip(walls[other], walls[default], strict=True))
    print(
        f"{other} / {default} wall time, pass by pass: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.2f}x"
    )


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(numbers[0] if numbers else 200, numbers[1] if len(numbers) > 1 else 4))
