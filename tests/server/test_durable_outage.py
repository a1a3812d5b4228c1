"""Two durable nodes, each reaching the database through a TCP proxy of its own, and a stamp in flight on
node a when the database goes away.

- Away for both (a failover, a restart) for longer than a node may be silent, and back for node b first:
  node b does not take node a's run, since node a's beats were missed while node b had no database
  either; node a finishes the run itself, its stamp's result kept, nothing closed as interrupted.
- Away for node a alone for that long: node b, which had the database the whole time, takes the run over
  and finishes it. Node a, back, writes nothing into the run it lost (no end of its own, no state), and
  tells in the record what it finished meanwhile: the stamp, completed after all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx2 as httpx
import pytest

from steadyloop.messages import messages_from_json
from steadyloop.sessions import is_balanced

from ._pg_proxy import pg_proxy
from ._two_nodes import (
    Seen,
    assert_all_closed,
    assert_each_once_in_order,
    durable_nodes,
    ends,
    handed_over,
    post,
    watch,
)
from .conftest import read_sse

pytest.importorskip("dbos")

from steadyloop.server.nodes import STALE_S


def stamping_on(node: str) -> tuple[asyncio.Event, Callable[[list[str]], None]]:
    """An event set once a stamp starts on ``node``, and the ``heard`` that sets it."""
    started = asyncio.Event()

    def heard(line: list[str]) -> None:
        if line[1:] == [node, "stamp_visit"]:
            started.set()

    return started, heard


async def record_until(http: httpx.AsyncClient, sid: str, done: Callable[[Seen], bool]) -> Seen:
    """The session's record from its start, following it, until ``done`` says so."""
    seen: Seen = []
    async with http.stream("GET", f"/sessions/{sid}/events", params={"after": 0, "follow": "session"}) as r:
        assert r.status_code == 200
        async for event in read_sse(r):
            if event.id is not None:
                seen.append((event.id, event.event, json.dumps(event.data, sort_keys=True)))
                if done(seen):
                    return seen
    raise AssertionError("the stream ended first")


async def record_of(http: httpx.AsyncClient, sid: str) -> Seen:
    """The session's whole record (no run goes: the replay ends)."""
    async with http.stream("GET", f"/sessions/{sid}/events", params={"after": 0, "follow": "run"}) as r:
        assert r.status_code == 200
        events = [e async for e in read_sse(r)]
    return [(e.id, e.event, json.dumps(e.data, sort_keys=True)) for e in events if e.id is not None]


async def test_a_database_outage_for_every_node_takes_no_run_from_a_node_that_is_alive(
    tmp_path: Path, postgres_url: str
) -> None:
    stamping, heard = stamping_on("node-a")
    async with pg_proxy(postgres_url) as to_a, pg_proxy(postgres_url) as to_b:
        stores = {"node-a": to_a.url, "node-b": to_b.url}
        async with durable_nodes(tmp_path, postgres_url, heard=heard, stores=stores) as nodes:
            on_a, on_b = nodes.clients
            sid = (await on_a.post("/sessions", json={"title": "case 7"})).json()["id"]
            posted = asyncio.create_task(post(on_a, sid, 7))
            await asyncio.wait_for(stamping.wait(), 60)
            await to_a.cut()
            await to_b.cut()
            await asyncio.sleep(STALE_S + 2)  # the outage: longer than a node may be silent
            await to_b.restore()  # node b has the database again first, node a two seconds later
            await asyncio.sleep(2)
            await to_a.restore()
            seen = await asyncio.wait_for(watch([on_b, on_a], 0, sid), 120)
            await posted
            detail = (await on_b.get(f"/sessions/{sid}")).json()
    assert_each_once_in_order(seen)
    assert_all_closed(seen)
    assert [end["outcome"] for end in ends(seen)] == ["completed"], "one run, never taken over"
    assert not any("resumed on" in data for _, kind, data in seen if kind == "notice")
    assert [line[1:] for line in nodes.ran("stamp_visit")] == [["node-a", "stamp_visit"]]
    messages = detail["messages"]
    assert is_balanced(messages_from_json(json.dumps(messages)))
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["case-7 is on file", "stamped v7"]
    assert messages[-1]["content"].startswith("Done with case 7"), "the answer is kept"


async def test_a_node_that_lost_its_run_while_cut_off_writes_nothing_into_it_and_tells_what_it_finished(
    tmp_path: Path, postgres_url: str
) -> None:
    stamping, heard = stamping_on("node-a")
    async with (
        pg_proxy(postgres_url) as to_a,
        durable_nodes(tmp_path, postgres_url, heard=heard, stores={"node-a": to_a.url}) as nodes,
    ):
        on_a, on_b = nodes.clients
        sid = (await on_a.post("/sessions", json={"title": "case 8"})).json()["id"]
        posted = asyncio.create_task(post(on_a, sid, 8))
        await asyncio.wait_for(stamping.wait(), 60)
        await to_a.cut()  # node a alone: node b has the database the whole time, and takes the run
        finished = await asyncio.wait_for(watch([on_b], 0, sid), 120)
        await to_a.restore()
        await asyncio.wait_for(  # node a, back, tells what it finished
            record_until(
                on_b, sid, lambda seen: any(k == "tool_execution_late_settlement" for _, k, _ in seen)
            ),
            120,
        )
        await posted  # node a's run has ended there: whatever it would write, it has
        record = await record_of(on_b, sid)
        detail = (await on_b.get(f"/sessions/{sid}")).json()
        after = await on_a.get(f"/sessions/{sid}")
    assert [end["outcome"] for end in ends(finished)] == ["cancelled", "completed"]
    assert handed_over(ends(finished)[0]), "node b closed node a's run, and went on with it"
    assert_all_closed(record)
    assert_each_once_in_order(record)
    assert ends(record) == ends(finished), "node a wrote no end into the run it lost"
    (late,) = [json.loads(data) for _, kind, data in record if kind == "tool_execution_late_settlement"]
    assert late["name"] == "stamp_visit" and late["outcome"] == "completed"
    assert late["text"].startswith("completed on node-a") and late["text"].endswith("stamped v8")
    assert [line[1:] for line in nodes.ran("stamp_visit")] == [["node-a", "stamp_visit"]], "never twice"
    results = [m for m in detail["messages"] if m["role"] == "tool"]
    assert [m["name"] for m in results] == ["look_up", "stamp_visit"]
    assert results[1]["content"].startswith("interrupted"), "node b could not know; the record now does"
    assert detail["status"] == "idle" and after.status_code == 200
