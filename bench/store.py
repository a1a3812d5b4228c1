"""The session stores side by side: appended events per second, and how soon a follower hears an append.

Two stores, measured the same way in one process: SQLite (a file in a temporary folder, WAL,
``synchronous=NORMAL``, the default) and PostgreSQL (a throwaway server that ``scripts/pg`` starts with its
durability settings on, ``PG_DURABLE=1``, or the database ``STEADYLOOP_BENCH_PG_URL`` names).

- Appends: ``writers`` sessions written at once, each event its own ``append_events`` call, as the
  recorder writes a run's events; events per second over all of them.
- Attach latency: a follower (``follow``) waits on a session while events are appended one at a time; the
  time from an ``append_events`` call returning to the follower holding that event, median and 95th
  percentile. For PostgreSQL the follower is on a second store object with its own connections, i.e.
  another node hearing the append through LISTEN/NOTIFY; a SQLite follower can only be in the writer's own
  process, woken in memory.

Nothing is asserted; each number is reported with PostgreSQL's over SQLite's as a ratio.
``bench/store_nodes.py`` measures PostgreSQL alone on one node and on two, from 10 to 1,000 sessions at once.

Run: ``.venv/bin/python bench/store.py [events_per_writer] [writers]`` (default 300 and 8).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from steadyloop.events import Notice
from steadyloop.sessions import EventRecorder, SessionStore, SQLiteSessionStore, follow
from steadyloop.sessions.postgres import PostgresSessionStore

ROOT = Path(__file__).resolve().parent.parent
AGENT = "bench"


@asynccontextmanager
async def postgres() -> AsyncIterator[str]:
    given = os.environ.get("STEADYLOOP_BENCH_PG_URL")
    if given:
        yield given
        return
    folder = tempfile.mkdtemp(prefix="slpg-", dir="/tmp")
    os.chmod(folder, 0o755)
    data = os.path.join(folder, "d")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = str(ROOT / "scripts" / "pg")
    started = await asyncio.create_subprocess_exec(
        "bash", script, "start", data, str(port),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PG_DURABLE": "1"},
    )  # fmt: skip
    out, err = await started.communicate()
    if started.returncode != 0:
        raise SystemExit(f"scripts/pg could not start PostgreSQL:\n{err.decode()}")
    try:
        yield out.decode().strip()
    finally:
        stopped = await asyncio.create_subprocess_exec(
            "bash", script, "stop", data, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        await stopped.wait()
        shutil.rmtree(folder, ignore_errors=True)


async def appends_per_second(store: SessionStore, events: int, writers: int) -> float:
    sids = [(await store.create(AGENT)).session_id for _ in range(writers)]

    async def write(sid: str) -> None:
        for i in range(events):
            await store.append_events(sid, [Notice(text=f"event {i}")], agent_id=AGENT)

    started = time.perf_counter()
    await asyncio.gather(*(write(sid) for sid in sids))
    return events * writers / (time.perf_counter() - started)


async def attach_latency(writer: SessionStore, reader: SessionStore, count: int) -> list[float]:
    sid = (await writer.create(AGENT)).session_id
    recorder = EventRecorder(writer, sid, AGENT)  # writes and wakes this process's followers, as a run does
    arrivals: asyncio.Queue[tuple[int, float]] = asyncio.Queue()

    async def watch() -> None:
        async for seq, _ in follow(reader, sid, agent_id=AGENT):
            arrivals.put_nowait((seq, time.perf_counter()))
            if seq == count + 1:
                return

    task = asyncio.create_task(watch())
    # The first append waits for the follower to be listening (it has replayed an empty record by then).
    await recorder.record(Notice(text="warm-up"))
    await asyncio.wait_for(arrivals.get(), 60)
    latencies = []
    for _ in range(count):
        seq = await recorder.record(Notice(text="now"))
        sent = time.perf_counter()
        heard_seq, heard = await asyncio.wait_for(arrivals.get(), 60)  # one at a time: an idle follower
        assert heard_seq == seq
        latencies.append(heard - sent)
    await task
    return latencies


def percentile_ms(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (seconds) in milliseconds, by nearest rank."""
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(events: int, writers: int) -> None:
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        sqlite = SQLiteSessionStore(Path(folder) / "sessions.db")
        try:
            rate = await appends_per_second(sqlite, events, writers)
            single = await appends_per_second(sqlite, events, 1)
            lat = await attach_latency(sqlite, sqlite, 200)
        finally:
            await sqlite.close()
        results["sqlite"] = {
            "rate": rate,
            "single": single,
            "p50": percentile_ms(lat, 0.5),
            "p95": percentile_ms(lat, 0.95),
        }
    async with postgres() as url:
        node_a, node_b = PostgresSessionStore(url, pool_size=writers), PostgresSessionStore(url)
        try:
            rate = await appends_per_second(node_a, events, writers)
            single = await appends_per_second(node_a, events, 1)
            lat = await attach_latency(node_a, node_b, 200)
        finally:
            await node_a.close()
            await node_b.close()
        results["postgres"] = {
            "rate": rate,
            "single": single,
            "p50": percentile_ms(lat, 0.5),
            "p95": percentile_ms(lat, 0.95),
        }
    s, p = results["sqlite"], results["postgres"]
    print(
        f"{events} events x {writers} writers (and x 1), one event per append; attach latency over 200 appends"
    )
    print(f"{'':34}{'SQLite':>12}{'PostgreSQL':>12}{'PG/SQLite':>11}")
    rows = [
        (f"appends/s, {writers} sessions at once", "rate", "{:12.0f}"),
        ("appends/s, one session", "single", "{:12.0f}"),
        ("attach latency p50 (ms)", "p50", "{:12.2f}"),
        ("attach latency p95 (ms)", "p95", "{:12.2f}"),
    ]
    for label, key, fmt in rows:
        print(f"{label:34}{fmt.format(s[key])}{fmt.format(p[key])}{p[key] / s[key]:11.2f}")
    print(
        "(PostgreSQL's follower is a second store, as on another node; SQLite's is in the writer's process)"
    )


if __name__ == "__main__":
    arguments = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(arguments + [300, 8][len(arguments) :])))
