"""Many concurrent sessions through ``steadyloop serve``'s HTTP API: wall time and the server's memory.

Three processes: the scripted model server (every request answered with the same 40-piece stream), the
API server (``python -m steadyloop.cli serve``, its own store in a temporary folder), and this one, the
clients. Each session is created, then its first message is streamed as SSE; every third session also
gets two watchers attaching from the middle of its stream (``Last-Event-ID``). Reported: the wall time
from the first create to the last stream's end, per session, and the API server's resident memory before
and at its peak (``VmHWM``), per session. Nothing is asserted: the test with the same shape is
``tests/server/test_load.py``.

Run: ``.venv/bin/python bench/server_load.py [sessions]`` (default 200).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx

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


async def main(sessions: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "script.json"
        script.write_text(json.dumps({"default": {"type": "stream", "text": WORDS}}))
        model_port, api_port = free_port(), free_port()
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
        api = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is timed
            [
                sys.executable,
                "-m",
                "steadyloop.cli",
                "serve",
                "--port",
                str(api_port),
                "--base-url",
                f"http://127.0.0.1:{model_port}/v1",
                "-m",
                "scripted",
                "--no-tools",
                "--store",
                str(Path(folder) / "sessions.db"),
                "--max-runs",
                str(sessions),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
        )
        try:
            await wait_up(f"http://127.0.0.1:{model_port}/v1/models")
            base = f"http://127.0.0.1:{api_port}"
            await wait_up(f"{base}/health")
            before = memory_kb(api.pid)
            limits = httpx.Limits(max_connections=sessions * 3, max_keepalive_connections=sessions)
            async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as http:
                started = time.perf_counter()
                counts = await asyncio.gather(*(session(http, i) for i in range(sessions)))
                wall = time.perf_counter() - started
            after = memory_kb(api.pid)
        finally:
            for process in (api, model):
                process.terminate()
                process.wait(10)
    if min(counts) == 0:
        raise SystemExit(f"{counts.count(0)} sessions streamed nothing: the server refused them")
    grown = after["VmHWM"] - before["VmRSS"]
    print(
        f"sessions: {sessions}, recorded events per run: {counts[0]}, watchers from the middle: {2 * len(range(0, sessions, 3))}"
    )
    print(f"wall time: {wall:.2f} s ({1000 * wall / sessions:.1f} ms per session, all concurrent)")
    print(
        f"API server memory: {before['VmRSS'] / 1024:.1f} MB at rest, peak {after['VmHWM'] / 1024:.1f} MB "
        f"(+{grown / 1024:.1f} MB, {grown / sessions:.0f} KB per session)"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
