"""The stable prefix against the real llama-server at -c 2048: a conversation of several prompts with hook
context on each question, pruning and a fold. Between folds, every request the Agent sends starts with the
bytes the request before it sent (seen on the wire, through a recording proxy); that is what the runtime
controls. How much of each prompt the server then took from its cache depends on the model and its chat
template, so it is printed (pytest -s), not asserted."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from steadyloop.agent import Agent
from steadyloop.context.folding import SUMMARY_PROMPT, summariser
from steadyloop.context.keeper import ContextPolicy
from steadyloop.events import ContextCompacted, ContextPruned, Event, PrefixRewritten, UsageReport
from steadyloop.hooks import HookContext, HookOutcome
from steadyloop.local import key_for
from steadyloop.loop import LifecycleHooks, LoopPolicy
from steadyloop.request_body import ModelParams
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint

FILES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


@tool
def read_record(name: str) -> str:
    """Read a record file from the project folder.

    Args:
        name: the file name, for example alpha.txt.
    """
    stem = name.split(".")[0].strip().lower() or "unknown"
    return "\n".join(f"{stem} record {i}: status nominal, reading {i * 37 % 101:03d}." for i in range(24))


class Recorder:
    """A loopback proxy in front of the server that keeps every chat request body as it was sent."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.bodies: list[bytes] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if request.path.endswith("/chat/completions"):
            self.bodies.append(body)
        root = self.upstream.removesuffix("/v1")
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization")}
        async with (
            aiohttp.ClientSession() as client,
            client.request(
                request.method, root + request.path_qs, data=body or None, headers=headers
            ) as upstream,
        ):
            response = web.StreamResponse(status=upstream.status)
            response.content_type = upstream.content_type
            await response.prepare(request)
            async for piece in upstream.content.iter_any():
                await response.write(piece)
            await response.write_eof()
            return response


@pytest.fixture
async def recorder(llama_2k_base_url: str) -> AsyncIterator[Recorder]:
    proxy = Recorder(llama_2k_base_url)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    proxy.base_url = f"http://127.0.0.1:{port}/v1"
    yield proxy
    await runner.cleanup()


def notes() -> LifecycleHooks:
    count = 0

    async def run(event: Any, context: HookContext, *, cancel: Any = None) -> list[HookOutcome]:
        nonlocal count
        if event != "before_turn":
            return []
        count += 1
        return [HookOutcome(hook_id="notes", text=f"Turn {count}. One sentence per file, please.")]

    return LifecycleHooks(run=run, preface="Notes for this turn:")


async def test_between_folds_every_request_starts_with_the_bytes_of_the_one_before(
    recorder: Recorder,
) -> None:
    endpoint = Endpoint(recorder.base_url, key_for(recorder.upstream), request_timeout=600.0)
    agent = Agent(
        endpoint,
        ModelParams(model="qwen", temperature=0, max_tokens=40),
        system="You read records with read_record when asked, then say in one sentence what you read.",
        tools=[read_record],
        policy=LoopPolicy(
            context_limit=2048,
            context=ContextPolicy(
                keep_last=2, max_chars=400, summarise=summariser(endpoint, "qwen", max_tokens=120)
            ),
        ),
        lifecycle=notes(),
    )
    events: list[Event] = []
    agent.subscribe(events.append)
    for name in FILES:
        await agent.prompt(f"Read {name}.txt with read_record.")

    sent = [json.loads(b) for b in recorder.bodies]
    main = [b for b in sent if b["messages"][0]["content"] != SUMMARY_PROMPT]
    reports = [e for e in events if isinstance(e, UsageReport)]
    assert len(main) == len(reports)  # one body per request the run reported (no retries here)
    folds = {(e.run_id, e.step) for e in events if isinstance(e, ContextCompacted | ContextPruned)}
    assert any(isinstance(e, ContextCompacted) for e in events), "the window never filled"
    assert not any(isinstance(e, PrefixRewritten) for e in events)

    checked = 0
    print(f"\n{'request':>7} {'prompt':>6} {'cached':>6} {'share':>6}  fold")
    for index, (body, report) in enumerate(zip(main, reports, strict=True)):
        turn = report.turn
        folded = (report.run_id, report.step) in folds
        share = turn.cached_tokens / turn.prompt_tokens if turn.prompt_tokens else 0.0
        print(
            f"{index:>7} {turn.prompt_tokens:>6} {turn.cached_tokens:>6} {share:>6.1%}  {'yes' if folded else ''}"
        )
        if index == 0 or folded:
            continue
        before = main[index - 1]
        assert body["messages"][0] == before["messages"][0] and body["tools"] == before["tools"]
        was = json.dumps(before["messages"], ensure_ascii=False)
        now = json.dumps(body["messages"], ensure_ascii=False)
        assert now.startswith(was[:-1]), f"request {index} rewrote what request {index - 1} sent"
        checked += 1
    assert checked >= len(FILES)
