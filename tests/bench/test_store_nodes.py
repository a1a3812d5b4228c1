"""bench/store_nodes.py at tiny sizes on a real PostgreSQL, so the bench cannot rot unnoticed: every cell
measures, the writers' events all reach the record, the follower on the other node hears the probe, and
the report's ratios are the cells' own."""

from __future__ import annotations

import glob
import os

import pytest

from ._bench import load

load("store")  # its neighbour, imported first under its own name
store_nodes = load("store_nodes")
Cell = store_nodes.Cell

# scripts/pg installs Debian's package where it is missing, but only as root.
_NO_POSTGRES = not glob.glob("/usr/lib/postgresql/*/bin/initdb") and os.geteuid() != 0
needs_postgres = pytest.mark.skipif(
    _NO_POSTGRES, reason="PostgreSQL's binaries are missing and installing them needs root"
)


@needs_postgres
async def test_every_cell_measures_and_every_event_is_recorded(postgres_url: str) -> None:
    import psycopg

    settings = store_nodes.Settings(plan=((2, 3), (5, 1)), pool_size=2, watch_every=2)
    cells = await store_nodes.run(postgres_url, settings)
    assert [(c.sessions, c.events, c.nodes) for c in cells] == [(2, 3, 1), (2, 3, 2), (5, 1, 1), (5, 1, 2)]
    # Sessions 0, 2, 4 are watched: every append they made was heard, on two nodes by the other node.
    assert [len(c.latencies) for c in cells] == [3, 3, 3, 3]
    for cell in cells:
        assert cell.rate > 0 and min(cell.latencies) > 0
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT count(*) FROM steadyloop.events").fetchone()
    # Each cell: its writers' events and one untimed warm-up event per watched session.
    assert row is not None and row[0] == (2 * 3 + 1) * 2 + (5 * 1 + 3) * 2


def _cell(sessions: int, nodes: int, rate: float, latency: float) -> object:
    return Cell(sessions=sessions, events=4, nodes=nodes, rate=rate, latencies=(latency,) * 3)


def test_the_report_gives_two_nodes_over_one_and_the_growth_over_sessions() -> None:
    cells = [
        _cell(10, 1, 400.0, 0.010),
        _cell(10, 2, 600.0, 0.020),
        _cell(1000, 1, 200.0, 0.100),
        _cell(1000, 2, 500.0, 0.050),
    ]
    text = store_nodes.report(cells, store_nodes.Settings(), (1.0, 2.0, 3.0), (1.5, 2.5, 3.5))
    lines = text.splitlines()
    assert "1.00 -> 1.50, 2.00 -> 2.50, 3.00 -> 3.50" in lines[0]
    assert lines[lines.index(next(x for x in lines if x.startswith("2 nodes / 1 node"))) + 1].split() == [
        "10", "sessions", "1.50x", "2.00x", "2.00x",
    ]  # fmt: skip
    growth = lines.index(next(x for x in lines if x.startswith("1,000 / 10 sessions")))
    assert lines[growth + 1].split() == ["1", "node", "0.50x", "10.00x", "10.00x"]
    assert lines[growth + 2].split() == ["2", "nodes", "0.83x", "2.50x", "2.50x"]


def test_the_command_line_sets_events_per_count_or_one_for_all() -> None:
    assert store_nodes.settings_of([]) == store_nodes.Settings(((10, 200), (100, 20), (1000, 4)), 10, 10)
    given = ["--sessions", "5,50", "--events", "3", "--pool-size", "4", "--watch-every", "2"]
    assert store_nodes.settings_of(given) == store_nodes.Settings(((5, 3), (50, 3)), 4, 2)
    wrongs = (
        ["--sessions", "5,50", "--events", "1,2,3"],
        ["--sessions", "0"],
        ["--events", "x"],
        ["--watch-every", "0"],
    )
    for wrong in wrongs:
        with pytest.raises(SystemExit):
            store_nodes.settings_of(wrong)
