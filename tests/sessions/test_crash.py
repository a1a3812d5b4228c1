"""Reliability: SIGKILL a process writing a session at random points, many times, and reload each time.

The same for a SQLite file and a PostgreSQL database (there the client is killed, mid-transaction, and
the server must roll its half-written work back). After every kill the store must open (SQLite: pass
``PRAGMA integrity_check``), give back a transcript that
reconstructs balanced, and hold an event record numbered 1..n without gaps or duplicates that never lost
what a previous check saw; the next write must continue at n + 1. ``STEADYLOOP_CRASH_ITERATIONS`` sets the
count (30 by default) and ``STEADYLOOP_CRASH_SEED`` replays a run; the summary line is printed either way.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from steadyloop.events import Notice
from steadyloop.sessions import SessionConfig, SessionStore, is_balanced, open_store, reconstruct

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

WRITER = Path(__file__).with_name("crash_writer.py")
AGENT, SID = "crash-agent", "crash-session"
CONFIG = SessionConfig(max_history_entries=40)  # as crash_writer.py uses


def _integrity(path: Path) -> tuple[str, str]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0], conn.execute(
            "PRAGMA journal_mode"
        ).fetchone()[0]
    finally:
        conn.close()


def _event_span(path: Path) -> tuple[int, int | None, int]:
    conn = sqlite3.connect(path)
    try:
        count, lowest, highest = conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM events").fetchone()
        return count, lowest, highest or 0
    finally:
        conn.close()


def _pg_event_span(url: str) -> tuple[int, int | None, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM steadyloop.events").fetchone()
    assert row is not None
    return row[0], row[1], row[2] or 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_sigkill_at_random_points_never_breaks_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, request: pytest.FixtureRequest
) -> None:
    iterations = int(os.environ.get("STEADYLOOP_CRASH_ITERATIONS", "30"))
    seed = int(os.environ.get("STEADYLOOP_CRASH_SEED", str(random.randrange(2**32))))
    rng = random.Random(seed)
    path = tmp_path / "data" / "sessions.db"
    target = str(path) if kind == "sqlite" else request.getfixturevalue("postgres_url")
    started = time.monotonic()
    last_seq = 0
    checked = before_session = 0
    dropped_messages = 0
    mid_turn = 0

    for run in range(1, iterations + 1):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WRITER), target, SID, str(run),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        # Every fifth kill may land during start-up (opening, migrating, creating the session); the rest
        # land while the run is writing turns.
        if run % 5 != 1:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
            assert line == b"ready\n", (await proc.communicate())[1].decode()
        # The random moment is the point of the test: there is nothing to wait for.
        await asyncio.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        _, err = await proc.communicate()
        assert proc.returncode == -signal.SIGKILL, f"the writer died on its own: {err.decode()}"

        store: SessionStore = open_store(target, config=CONFIG)
        try:
            info = await store.get(SID, agent_id=AGENT)  # a kill before the file existed must open too
            if kind == "sqlite":
                integrity, journal = await asyncio.to_thread(_integrity, path)
                assert (integrity, journal) == ("ok", "wal")
            if info is None:
                assert last_seq == 0, "a session that existed is gone"
                before_session += 1
                continue
            stored = await store.load_messages(SID, agent_id=AGENT)
            rebuilt = reconstruct(stored)
            assert is_balanced(rebuilt)
            dropped_messages += len(stored) - len(rebuilt)
            kept = reconstruct(stored, replay_reasoning=True)
            mid_turn += bool(stored) and (not kept or kept[-1] is not stored[-1])  # its tail was left out
            # Earlier checks read 1..last_seq; only what this run wrote needs reading again.
            count, lowest, highest = await asyncio.to_thread(
                *((_event_span, path) if kind == "sqlite" else (_pg_event_span, target))
            )
            assert count == highest and lowest in (1, None), "event seqs have a gap or a duplicate"
            assert count >= last_seq, "events a previous check saw were lost"
            events = await store.load_events(SID, agent_id=AGENT, after_seq=last_seq)
            assert [seq for seq, _ in events] == list(range(last_seq + 1, count + 1))
            if events:  # this run wrote: it started right after the last check's event
                assert (events[0][1].type, events[0][1].run_id) == ("agent_start", str(run))
            assert info.last_event_seq == count
            last_seq = await store.append_events(
                SID, [Notice(text=f"checked after kill {run}")], agent_id=AGENT
            )
            assert last_seq == count + 1
            checked += 1
        finally:
            await store.close()

    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\ncrash test ({kind}): {iterations} SIGKILLs (seed {seed}) in {elapsed:.1f}s; store opened "
            f"{'and integrity_check ok ' if kind == 'sqlite' else ''}{iterations}/{iterations}; {checked} reloads balanced with seqs 1..n "
            f"continuing ({before_session} kills before the session existed); {last_seq} events recorded; "
            f"{mid_turn} kills left a turn unfinished; {dropped_messages} stored messages left out by "
            f"reconstruct in all"
        )
    assert checked >= iterations // 2
