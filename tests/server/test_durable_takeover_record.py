"""A durable node killed with a stamp in flight: the node that resumes its run closes, in the record,
everything the dead node's run opened (the stamp's execution, its step, the run itself), stamped with that
run, before the resumed run's own events; every watcher's stream closes all it opens."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ._two_nodes import (
    Seen,
    assert_all_closed,
    assert_each_once_in_order,
    durable_nodes,
    ends,
    follow,
    handed_over,
    post,
    until,
    watch,
)

pytest.importorskip("dbos")


async def test_a_takeover_closes_everything_the_dead_nodes_run_left_open(
    tmp_path: Path, postgres_url: str
) -> None:
    async with durable_nodes(tmp_path, postgres_url) as nodes:
        on_a, on_b = nodes.clients
        sid = (await on_a.post("/sessions", json={"title": "case 5"})).json()["id"]
        watcher = asyncio.create_task(watch([on_b, on_a], 0, sid))
        recorded: Seen = []
        news = asyncio.Event()
        following = asyncio.create_task(follow(on_b, sid, recorded, news))
        posted = asyncio.create_task(post(on_a, sid, 5))

        def stamp_started() -> bool:  # in the record: the call the dead node opened
            return any(k == "tool_execution_start" and '"stamp_visit"' in d for _, k, d in recorded)

        await until(stamp_started, news, 60)
        await nodes.kill()
        await asyncio.wait_for(following, 120)
        seen = await asyncio.wait_for(watcher, 120)
        await posted
    assert_each_once_in_order(seen)
    assert_all_closed(seen)
    events = [(kind, json.loads(data)) for _, kind, data in seen]
    dead_run = events[0][1]["run_id"]
    closed = [(kind, data) for kind, data in events if data.get("run_id") == dead_run]
    stamp = next(
        data for kind, data in closed if kind == "tool_execution_end" and data["name"] == "stamp_visit"
    )
    assert stamp["disposition"] == "aborted" and stamp["result"]["content"].startswith("interrupted")
    turn = [data for kind, data in closed if kind == "turn_end"][-1]
    assert turn["error"].startswith("interrupted")
    assert [kind for kind, _ in closed][-1] == "agent_end" and handed_over(closed[-1][1])
    assert [end["outcome"] for end in ends(seen)] == ["cancelled", "completed"]
