"""The PostgreSQL store on one node and on two, from 10 to 1,000 sessions at once: events appended per
second, and how soon a watcher on the other node hears an append.

One PostgreSQL (``bench/store.py``'s throwaway server with fsync on, or the one ``STEADYLOOP_BENCH_PG_URL``
names). A node is a ``PostgresSessionStore`` with its own connection pool (``--pool-size``; 10, the
server's, by default) and its own listener. Both nodes live in this process, on one event loop: they share
its CPU as two ``steadyloop serve`` processes on one small machine would, so what two nodes add here is the
database's side (twice the connections), not a second machine's cores.

For each number of sessions, on one node and then on two (a cell), with fresh store objects:

- Appends: that many sessions, spread over the nodes in turn, each writing its run's events through an
  ``EventRecorder`` (one ``append_events`` per event, as a run records them), all at once. Events appended
  per second over all of them, from the start to the last writer's last append.
- Attach latency: every tenth session (``--watch-every``) is followed (``follow``) on the next node: on two
  nodes the other one, which hears each append through LISTEN/NOTIFY and reads it through its own pool; on
  one node the writer's own store. The time from ``record`` returning to the follower holding the event,
  median and 95th percentile over every watched append. Each watcher first hears one untimed event, so it
  is listening before the clock starts.

Reported: the cells, two nodes over one for each number of sessions, and the growth from the fewest sessions
to the most for each number of nodes, with the machine's load average before and after. Nothing is asserted.

Run: ``.venv/bin/python bench/store_nodes.py [--sessions 10,100,1000] [--events 200,20,4] [--pool-size 10]
[--watch-every 10]`` (``--events`` is per session: one number for every count, or one per count).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

if "store" not in sys.modules:  # run as a script; the tests load its neighbour themselves first
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from store import AGENT, percentile_ms, postgres  # bench/ is not a package: its neighbour by path

from steadyloop.events import Notice
from steadyloop.sessions import EventRecorder, follow
from steadyloop.sessions.postgres import PostgresSessionStore

NODES = (1, 2)
# Longer than any append waits for a pooled connection at the largest counts here.
_HEARD_WITHIN_S = 60.0


@dataclass(frozen=True)
class Cell:
    """One measurement: ``sessions`` writers of ``events`` events each on ``nodes`` nodes."""

    sessions: int
    events: int
    nodes: int
    rate: float  # events appended per second, over all writers
    latencies: tuple[float, ...]  # seconds from an append returning to the follower holding it

    @property
    def p50(self) -> float:
        return percentile_ms(list(self.latencies), 0.5)

    @property
    def p95(self) -> float:
        return percentile_ms(list(self.latencies), 0.95)


@asynccontextmanager
async def nodes_on(url: str, count: int, pool_size: int) -> AsyncIterator[list[PostgresSessionStore]]:
    """``count`` nodes on the database at ``url``, each a store with a pool of its own, closed after."""
    stores = [PostgresSessionStore(url, pool_size=pool_size) for _ in range(count)]
    try:
        yield stores
    finally:
        for store in stores:
            await store.close()


@dataclass
class _Run:
    """One writer's session, and when each of its appends returned and reached its watcher (if any)."""

    node: PostgresSessionStore
    session_id: str
    watcher: PostgresSessionStore | None
    sent: dict[int, float] = field(default_factory=dict)
    heard: dict[int, float] = field(default_factory=dict)
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    recorder: EventRecorder = field(init=False)  # wakes the followers on its own node, as a run's does

    def __post_init__(self) -> None:
        self.recorder = EventRecorder(self.node, self.session_id, AGENT)

    async def watch(self, last: int) -> None:
        assert self.watcher is not None
        async for seq, _ in follow(self.watcher, self.session_id, agent_id=AGENT):
            self.heard[seq] = time.perf_counter()
            self.listening.set()
            if seq == last:
                return

    async def write(self, events: int) -> None:
        for i in range(events):
            seq = await self.recorder.record(Notice(text=f"event {i}"))
            assert seq is not None  # only streamed deltas are held back
            # Taken before this task yields, so before any follower in this process can hear the append.
            self.sent[seq] = time.perf_counter()

    def latencies(self) -> list[float]:
        return [self.heard[seq] - sent for seq, sent in self.sent.items()]


async def measure(
    nodes: Sequence[PostgresSessionStore], sessions: int, events: int, watch_every: int
) -> Cell:
    """One cell: ``sessions`` writers spread over ``nodes``, every ``watch_every``-th followed on the next
    node (its own on one node)."""
    placed = [nodes[i % len(nodes)] for i in range(sessions)]
    # Made all at once, which also fills each node's pool before the clock starts.
    infos = await asyncio.gather(*(node.create(AGENT) for node in placed))
    runs = [
        _Run(node, info.session_id, nodes[(i + 1) % len(nodes)] if i % watch_every == 0 else None)
        for i, (node, info) in enumerate(zip(placed, infos, strict=True))
    ]
    watched = [r for r in runs if r.watcher is not None]
    watching = [asyncio.create_task(r.watch(last=events + 1)) for r in watched]
    try:
        # One untimed event per watched session: once its watcher holds it, the watcher is listening.
        await asyncio.gather(*(r.recorder.record(Notice(text="warm-up")) for r in watched))
        await asyncio.wait_for(asyncio.gather(*(r.listening.wait() for r in watched)), _HEARD_WITHIN_S)
        started = time.perf_counter()
        await asyncio.gather(*(r.write(events) for r in runs))
        elapsed = time.perf_counter() - started
        await asyncio.wait_for(asyncio.gather(*watching), _HEARD_WITHIN_S)
    finally:
        for task in watching:
            task.cancel()
        await asyncio.gather(*watching, return_exceptions=True)
    latencies = tuple(x for r in watched for x in r.latencies())
    return Cell(sessions, events, len(nodes), sessions * events / elapsed, latencies)


@dataclass(frozen=True)
class Settings:
    """What one run measures: ``plan`` holds each cell's (sessions, events per session)."""

    plan: tuple[tuple[int, int], ...] = ((10, 200), (100, 20), (1000, 4))
    pool_size: int = 10  # connections per node, the server's default
    watch_every: int = 10  # every n-th session has a watcher on the next node


async def run(url: str, settings: Settings) -> list[Cell]:
    """Every cell of the plan, on one node and then on two, in turn, each with fresh nodes."""
    cells = []
    for sessions, events in settings.plan:
        for count in NODES:
            async with nodes_on(url, count, settings.pool_size) as nodes:
                cells.append(await measure(nodes, sessions, events, settings.watch_every))
    return cells


def _ratios(label: str, new: Cell, old: Cell) -> str:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b > 0 else "n/a"

    return f"{label:<28}{ratio(new.rate, old.rate):>10}{ratio(new.p50, old.p50):>12}{ratio(new.p95, old.p95):>12}"


def report(
    cells: Sequence[Cell], settings: Settings, load_before: Sequence[float], load_after: Sequence[float]
) -> str:
    """The cells as a table, then two nodes over one and the growth from the fewest sessions to the most."""
    loads = ", ".join(f"{b:.2f} -> {a:.2f}" for b, a in zip(load_before, load_after, strict=True))
    lines = [
        f"PostgreSQL store, one event per append, a pool of {settings.pool_size} connections per node, both "
        f"nodes in this process, every {settings.watch_every}th session watched on the next node (its own "
        f"on 1 node); load average (1, 5, 15 min) before -> after: {loads}",
        f"{'sessions':>9}{'events each':>12}{'nodes':>6}{'events/s':>10}{'attach p50 ms':>15}"
        f"{'attach p95 ms':>15}{'samples':>9}",
    ]
    for c in cells:
        lines.append(
            f"{c.sessions:>9,}{c.events:>12}{c.nodes:>6}{c.rate:>10.0f}{c.p50:>15.2f}{c.p95:>15.2f}"
            f"{len(c.latencies):>9}"
        )
    by = {(c.sessions, c.nodes): c for c in cells}
    counts = sorted({c.sessions for c in cells})
    header = f"{'events/s':>10}{'attach p50':>12}{'attach p95':>12}"
    lines += ["", f"{'2 nodes / 1 node':<28}{header}"]
    lines += [_ratios(f"{n:,} sessions", by[(n, 2)], by[(n, 1)]) for n in counts]
    low, high = counts[0], counts[-1]
    lines += ["", f"{f'{high:,} / {low:,} sessions':<28}{header}"]
    lines += [_ratios(f"{n} node{'s' if n > 1 else ''}", by[(high, n)], by[(low, n)]) for n in NODES]
    return "\n".join(lines)


def _counts(text: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected whole numbers separated by commas, got {text!r}"
        ) from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"every count must be at least 1, got {text!r}")
    return values


def settings_of(argv: Sequence[str] | None = None) -> Settings:
    """The settings the command line asks for; a wrong one exits with argparse's usage message."""
    default = Settings()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sessions", type=_counts, default=[s for s, _ in default.plan], help="e.g. 10,100,1000"
    )
    parser.add_argument(
        "--events",
        type=_counts,
        default=[e for _, e in default.plan],
        help="per session: one for all, or per count",
    )
    parser.add_argument("--pool-size", type=int, default=default.pool_size, help="connections per node")
    parser.add_argument(
        "--watch-every", type=int, default=default.watch_every, help="watch every n-th session"
    )
    args = parser.parse_args(argv)
    sessions: list[int] = args.sessions
    events: list[int] = args.events * len(sessions) if len(args.events) == 1 else args.events
    if len(events) != len(sessions):
        parser.error(f"--events gives {len(events)} numbers for {len(sessions)} counts of sessions")
    if args.pool_size < 1 or args.watch_every < 1:
        parser.error("--pool-size and --watch-every must be at least 1")
    return Settings(tuple(zip(sessions, events, strict=True)), args.pool_size, args.watch_every)


async def main(settings: Settings) -> None:
    load_before = os.getloadavg()
    async with postgres() as url:
        cells = await run(url, settings)
    print(report(cells, settings, load_before, os.getloadavg()))


if __name__ == "__main__":
    asyncio.run(main(settings_of()))
