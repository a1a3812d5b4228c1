"""A durable node killed (SIGKILL) while ``run_shell`` runs a command that started processes of its own:
the command's whole process group ends with the node, at once, where it used to run on and write after
the node that took the run over had closed its call as interrupted."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest

from ._two_nodes import durable_nodes, post, watch

pytest.importorskip("dbos")

# The shell, a sleeper, and a subshell that would write once the sleeper is done; each says its pid first.
COMMAND = (
    "echo $$ > pids; sleep 60 & echo $! >> pids; (sleep 60; echo late > late.txt) & echo $! >> pids; wait"
)


def respond(request: RecordedRequest) -> ScriptedReply:
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return Reply.stream([*text_chunks(["The command ", "was cut short."]), usage_chunk(20, 5)])
    call = {"id": "call_shell", "name": "run_shell", "arguments": {"command": COMMAND}}
    return Reply.stream([*tool_call_chunks([call]), usage_chunk(20, 9)])


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no one reaped yet has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def until(test: Callable[[], bool], within_s: float) -> None:
    """Look at the processes until ``test()`` holds (they have no event to wait on)."""
    async with asyncio.timeout(within_s):
        for _ in itertools.count():
            if test():
                return
            await asyncio.sleep(0.05)


async def test_a_killed_nodes_tool_processes_end_with_it(tmp_path: Path, postgres_url: str) -> None:
    async with durable_nodes(tmp_path, postgres_url, respond) as nodes:
        on_a, on_b = nodes.clients
        pids_file = nodes.ledger / "pids"
        sid = (await on_a.post("/sessions", json={"title": "case 1"})).json()["id"]
        posted = asyncio.create_task(post(on_a, sid, 1))
        await until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 3, 60)
        pids = [int(pid) for pid in pids_file.read_text().split()]
        assert all(alive(pid) for pid in pids)
        await nodes.kill()
        await until(lambda: not any(alive(pid) for pid in pids), 10)
        seen = await asyncio.wait_for(watch([on_b, on_a], 1, sid), 120)
        await posted
        detail = (await on_b.get(f"/sessions/{sid}")).json()
    result = next(m for m in detail["messages"] if m["role"] == "tool")
    assert result["content"].startswith("interrupted") and result["is_error"], result
    assert json.loads(seen[-1][2])["outcome"] == "completed"
    assert not (nodes.ledger / "late.txt").exists()
