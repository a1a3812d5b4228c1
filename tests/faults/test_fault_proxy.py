"""Acceptance: many concurrent runs with tools, each its own endpoint, through a proxy injecting every fault.

200 runs at once, more endpoints than the client pool holds (half by API key, half by tenant base URL),
each asking a tool for its own code and answering with it. The proxy plays 429s with Retry-After, 503
"Loading model", 500s, resets and stalls before and after the first event, keep-alive storms and junk
events on half of the first two sendings of every request. At least 99% of runs must finish with the
right answer and the rest fail typed; none may hang, none may leave a call without exactly one result,
and no tool may run twice.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from typing import Any, Literal

import pytest

from steadyloop.context.integrity import check_transcript
from steadyloop.errors import RunError, SteadyloopError
from steadyloop.loop import LoopPolicy, LoopResult, run_agent_loop
from steadyloop.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import text_chunks, tool_call_chunks, usage_chunk
from steadyloop.testing.fault_proxy import ALL_FAULTS, FaultProxy
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import RecordedRequest, ScriptedServer
from steadyloop.tools.definition import Tool, ToolContext
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import client_settings, configure_clients, open_entries, pool_size

Transport = Literal["httpx2", "aiohttp"]
RUNS = 200
# Bounds the whole acceptance: a run still going after this has hung.
DEADLINE_S = 420.0
POLICY = LoopPolicy(
    retry=RetryPolicy(
        max_retries=4, base_delay_s=0.05, max_delay_s=0.5, loading_poll_s=0.1, loading_timeout_s=30.0
    )
)
ASKED = re.compile(r"code of run (\d+)")


def code_of(run: int) -> str:
    return f"K{run * 7919 % 100003:05d}"


def respond(request: RecordedRequest) -> ScriptedReply:
    """The model: asks the tool for the run's code, then answers with what the tool said."""
    messages = request.json["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        answer = ["The code ", "is ", f"{last['content']}", "."]
        return Reply.stream([*text_chunks(answer), usage_chunk(40, 6)])
    run = ASKED.search(json.dumps(messages)).group(1)  # type: ignore[union-attr]
    call = {"id": f"call_{run}", "name": "lookup", "arguments": {"run": int(run)}}
    return Reply.stream([*tool_call_chunks([call], split_arguments_every=4), usage_chunk(30, 9)])


@pytest.mark.parametrize("transport", ["httpx2", "aiohttp"])
async def test_runs_survive_a_proxy_that_injects_every_fault(transport: Transport) -> None:
    configure_clients(transport=transport)
    executions: Counter[str] = Counter()

    async def lookup(arguments: dict[str, Any], context: ToolContext) -> str:
        executions[context.call_id] += 1
        return code_of(int(arguments["run"]))

    tool = Tool(
        "lookup",
        "the code of a run",
        {"type": "object", "properties": {"run": {"type": "integer"}}, "required": ["run"]},
        lookup,
    )

    async with (
        ScriptedServer(respond=respond) as upstream,
        FaultProxy(
            upstream.base_url, faults=ALL_FAULTS, rate=0.5, clean_after=2, seed=12, retry_after_s=0.2
        ) as proxy,
    ):

        def endpoint(run: int) -> Endpoint:
            url = proxy.base_url if run % 2 else proxy.tenant_base_url(f"tenant-{run}")
            return Endpoint(url, api_key=f"sk-user-{run}", request_timeout=15.0, first_token_timeout=15.0)

        async def one(run: int) -> LoopResult:
            return await run_agent_loop(
                endpoint(run),
                ModelParams(model="m"),
                messages=[UserMessage(content=f"What is the code of run {run}?")],
                tools=[tool],
                policy=POLICY,
            )

        tasks = {asyncio.create_task(one(run)): run for run in range(RUNS)}
        done, pending = await asyncio.wait(tasks, timeout=DEADLINE_S)
        for task in pending:
            task.cancel()
        hung = sorted(tasks[task] for task in pending)

    assert hung == [], f"runs still going after {DEADLINE_S}s: {hung}"
    right: list[int] = []
    failed: dict[int, BaseException] = {}
    transcripts: list[list[Message]] = []
    for task in done:
        run = tasks[task]
        error = task.exception()
        if error is None:
            result = task.result()
            transcripts.append(result.messages)
            if result.turn.content == f"The code is {code_of(run)}.":
                right.append(run)
            else:
                failed[run] = AssertionError(f"wrong answer {result.turn.content!r}")
        else:
            failed[run] = error
            if isinstance(error, RunError):
                transcripts.append(error.messages)

    summary = Counter(f"{type(e).__name__}: {str(e)[:90]}" for e in failed.values())
    assert len(right) >= 0.99 * RUNS, (
        f"{len(right)}/{RUNS} right; failures: {summary.most_common(8)}; faults played: {dict(proxy.injected)}"
    )
    assert all(isinstance(e, SteadyloopError) for e in failed.values()), summary
    # Every fault was played, and the pool held more endpoints than it keeps.
    assert set(proxy.injected) == set(ALL_FAULTS), proxy.injected
    assert client_settings().max_clients < RUNS and open_entries() == pool_size()
    for messages in transcripts:
        assert check_transcript(messages) == messages
        calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
        results = Counter(m.call_id for m in messages if isinstance(m, ToolResultMessage))
        assert all(results[call] == 1 for call in calls) and set(results) == set(calls)
    assert executions and max(executions.values()) == 1
