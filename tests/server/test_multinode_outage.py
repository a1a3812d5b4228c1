"""Two nodes on one PostgreSQL store, one of them cut off from it (a TCP proxy between them): the cut-off
node answers 503 ``unavailable`` within a bounded wait, at once after the first, with no traceback in its
log; its ``/ready`` says it cannot serve while ``/health`` says it is alive; the other node serves on; and
when the database is back, so is the node. A node asked to drain says so on ``/ready``, takes no new run,
and finishes the one it has."""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections.abc import Awaitable, Callable

import httpx2 as httpx

from steadyloop.server import ServerSettings
from steadyloop.testing import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

from .._log_lines import LogLines, captured
from ._pg_proxy import pg_proxy
from .conftest import LiveServer


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float = 30.0) -> None:
    """Ask ``check`` until it holds (a node's state seen from outside has no event to wait on)."""
    async with asyncio.timeout(within_s):
        for _ in itertools.count():
            if await check():
                return
            await asyncio.sleep(0.1)


async def status(http: httpx.AsyncClient, path: str) -> int:
    return (await http.get(path)).status_code


async def test_a_node_cut_off_from_its_database_answers_503_says_it_is_not_ready_and_comes_back(
    postgres_url: str, settings_for: Callable[..., ServerSettings]
) -> None:
    lines = LogLines(re.compile(r"(?!)"))
    async with pg_proxy(postgres_url) as proxy, ScriptedServer() as model:
        a = settings_for(model.base_url, store=proxy.url, node="node-a")
        b = settings_for(model.base_url, store=postgres_url, node="node-b")
        with captured("steadyloop", lines):
            async with (
                LiveServer(a) as node_a,
                LiveServer(b) as node_b,
                node_a.client() as on_a,
                node_b.client() as on_b,
            ):
                sid = (await on_a.post("/sessions", json={})).json()["id"]
                assert await status(on_a, "/ready") == 200
                await proxy.cut()
                took: list[float] = []
                answers: list[httpx.Response] = []
                for path in ("/sessions", f"/sessions/{sid}", f"/sessions/{sid}/tree"):
                    started = time.monotonic()
                    answers.append(await on_a.get(path))
                    took.append(time.monotonic() - started)
                await eventually(lambda: has_status(on_a, "/ready", 503, "unavailable"))
                alive = await status(on_a, "/health")
                other = [await status(on_b, "/ready"), await status(on_b, f"/sessions/{sid}")]
                await proxy.restore()
                await eventually(lambda: has_status(on_a, "/ready", 200, "ready"))
                back = await status(on_a, f"/sessions/{sid}")
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "unavailable"
        assert answer.headers["retry-after"] == "2"
    assert max(took) < 2, took  # at once: the pool's attempts to connect fail, and that is the answer
    assert alive == 200, "alive, though it cannot serve"
    assert other == [200, 200], "the other node serves on"
    assert back == 200
    assert not [r for r in lines.records if r.exc_info or r.levelno >= logging.ERROR], "no traceback"
    said = [r.getMessage() for r in lines.records if "answers 503" in r.getMessage()]
    assert len(said) == 1, said


async def has_status(http: httpx.AsyncClient, path: str, code: int, said: str) -> bool:
    answer = await http.get(path)
    return answer.status_code == code and answer.json()["status"] == said


async def test_a_draining_node_says_so_takes_no_new_run_and_finishes_the_one_it_has(
    postgres_url: str, settings_for: Callable[..., ServerSettings]
) -> None:
    words = [f"w{i} " for i in range(30)]
    slow = Reply.stream(stream_of(words), delay=0.05)  # a run a second or two long
    async with ScriptedServer(slow) as model:
        a = settings_for(model.base_url, store=postgres_url, node="node-a")
        async with LiveServer(a) as node_a, node_a.client() as on_a:
            first, second = [(await on_a.post("/sessions", json={})).json()["id"] for _ in range(2)]
            running = asyncio.create_task(on_a.post(f"/sessions/{first}/messages", json={"text": "go"}))
            await model.wait_for_requests(1)
            drained = await on_a.post("/drain")
            ready = await on_a.get("/ready")
            refused = await on_a.post(f"/sessions/{second}/messages", json={"text": "go"})
            forwarded = await on_a.post("/drain", headers={"X-Forwarded-For": "10.0.0.9"})
            finished = (await running).json()
            after = (await on_a.get("/ready")).json()
    assert drained.status_code == 202 and drained.json() == {
        "status": "draining",
        "node": "node-a",
        "running": 1,
    }
    assert ready.status_code == 503 and ready.json()["status"] == "draining"
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "unavailable", refused.text
    assert forwarded.status_code == 403, "drained from the node's own machine only"
    assert finished["outcome"] == "completed" and finished["answer"] == "".join(words)
    assert after == {"status": "draining", "node": "node-a", "running": 0}
    assert len(model.chat_requests) == 1
