"""llama-server's slots share one cache: requests that each fit their window can fill it together, and the
server then ends their streams with a 500 "Context size has been exceeded.". That is a wait, not a
conversation too long: the step is sent again after a backoff and nothing is folded.

The two replies are byte-exact captures of a real llama-server (b11434, 4 slots sharing 1,024 tokens, three
requests of about 500 tokens at once): one refused before any output, one after some.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from steadyloop import Agent, ContextPolicy, Endpoint
from steadyloop.errors import ContextOverflow, RunEndpointUnavailable
from steadyloop.events import Event, Notice, Retry
from steadyloop.loop import LoopPolicy
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capacity import BUSY_QUIET_S, mark_busy, one_at_a_time
from steadyloop.wire.failures import classify_failure, shared_cache_full

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
FULL = CAPTURES / "cache_full_stream.response.txt"
FULL_AFTER_OUTPUT = CAPTURES / "cache_full_after_output.response.txt"
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


def test_the_shared_cache_filling_is_a_wait_and_a_window_too_small_is_not() -> None:
    full = {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}
    assert classify_failure(500, full).kind == "transient" and shared_cache_full(
        500, "Context size has been exceeded."
    )
    relayed = {"error": {"code": 500, "message": "decode() failed: Context size has been exceeded."}}
    assert classify_failure(500, relayed).kind == "transient"
    assert shared_cache_full(500, "decode() failed: Context size has been exceeded.")
    assert not shared_cache_full(503, "Context size has been exceeded.") and not shared_cache_full(
        500, "boom"
    )
    # the same words with another status are a server's own overflow (LM Studio's engines)
    assert classify_failure(400, "Context size has been exceeded").kind == "context_overflow"
    # and a request longer than llama-server's window is refused before it runs, as an overflow
    alone = {"error": {"code": 400, "message": "request (1249 tokens) exceeds the available context size "
                       "(1024 tokens), try increasing it", "type": "exceed_context_size_error"}}  # fmt: skip
    assert classify_failure(400, alone).kind == "context_overflow"


async def test_a_step_refused_for_a_full_shared_cache_is_sent_again_and_nothing_is_folded() -> None:
    events: list[Event] = []
    policy = LoopPolicy(retry=FAST, context=ContextPolicy(), context_limit=1024)
    async with ScriptedServer(Reply.from_capture(FULL), Reply.stream(text_chunks("All done."))) as server:
        agent = Agent(Endpoint(server.base_url), "m", policy=policy)
        agent.subscribe(events.append)
        turn = await agent.prompt("Count the items.")
        sent = server.chat_requests
    assert turn.content == "All done."
    assert len(sent) == 2 and sent[0].json["messages"] == sent[1].json["messages"]  # the same step, whole
    (retry,) = [e for e in events if isinstance(e, Retry)]
    assert "Context size has been exceeded" in retry.reason
    assert not [e for e in events if isinstance(e, Notice) and e.name == "compaction"]


async def test_a_full_shared_cache_after_output_stops_the_run_as_unavailable_not_as_too_long() -> None:
    # (carrying the answer on is tests/run/test_carry_on_cut.py's; here the policy turns it off)
    retry = RetryPolicy(base_delay_s=0.01, carry_on_cut_answers=False)
    async with ScriptedServer(Reply.from_capture(FULL_AFTER_OUTPUT)) as server:
        agent = Agent(Endpoint(server.base_url), "m", policy=LoopPolicy(retry=retry))
        with pytest.raises(RunEndpointUnavailable) as caught:
            await agent.prompt("Count the items.")
        assert len(server.chat_requests) == 1  # what was shown is not shown twice
    assert not isinstance(caught.value, ContextOverflow)
    assert caught.value.kind == "transient" and caught.value.status == 500


async def test_after_a_busy_answer_this_process_sends_that_endpoint_one_request_at_a_time() -> None:
    busy, other = Endpoint("http://127.0.0.1:9/v1"), Endpoint("http://127.0.0.1:10/v1")
    inside = {"busy": 0, "other": 0}
    most = {"busy": 0, "other": 0}

    async def attempt(name: str, endpoint: Endpoint) -> None:
        async with one_at_a_time(endpoint):
            inside[name] += 1
            most[name] = max(most[name], inside[name])
            await asyncio.sleep(0.02)
            inside[name] -= 1

    mark_busy(busy)
    await asyncio.gather(
        *(attempt("busy", busy) for _ in range(4)), *(attempt("other", other) for _ in range(4))
    )
    assert most == {"busy": 1, "other": 4}
    mark_busy(busy, now=time.monotonic() - BUSY_QUIET_S)  # quiet long enough: all at once again
    most["busy"] = 0
    await asyncio.gather(*(attempt("busy", busy) for _ in range(4)))
    assert most["busy"] == 4


async def test_concurrent_steps_cut_by_a_full_cache_all_finish_one_after_another() -> None:
    # Three steps at once; the server ends the first two streams for its full cache. After that, the
    # endpoint gets one request at a time, and every step answers.
    replies = [Reply.from_capture(FULL), Reply.from_capture(FULL)] + [
        Reply.stream(text_chunks(["Done ", "here."]), delay=0.05) for _ in range(3)
    ]
    async with ScriptedServer(*replies) as server:
        endpoint = Endpoint(server.base_url)

        async def step(i: int) -> str:
            agent = Agent(endpoint, "m", policy=LoopPolicy(retry=FAST))
            return (await agent.prompt(f"Count the items, {i}.")).content

        answers = await asyncio.gather(*(step(i) for i in range(3)))
        assert len(server.chat_requests) == 5
    assert answers == ["Done here."] * 3


async def test_a_cache_other_processes_keep_full_is_waited_out_without_spending_retries() -> None:
    # Other processes' requests are not seen by this one: their steps hold the cache for tens of seconds,
    # and three quick retries ran out while they did (three processes on one bundled server).
    events: list[Event] = []
    retry = RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02, busy_timeout_s=30)
    replies = [Reply.from_capture(FULL) for _ in range(6)] + [Reply.stream(text_chunks("All done."))]
    async with ScriptedServer(*replies) as server:
        agent = Agent(Endpoint(server.base_url), "m", policy=LoopPolicy(retry=retry))
        agent.subscribe(events.append)
        turn = await agent.prompt("Count the items.")
        assert len(server.chat_requests) == 7
    assert turn.content == "All done."
    assert [e.attempt for e in events if isinstance(e, Retry)] == [1, 2, 3, 4, 5, 6]


async def test_a_cache_still_full_past_the_busy_timeout_stops_the_run_as_unavailable() -> None:
    retry = RetryPolicy(max_retries=5, base_delay_s=0.02, max_delay_s=0.02, busy_timeout_s=0.1)
    async with ScriptedServer(*[Reply.from_capture(FULL) for _ in range(40)]) as server:
        agent = Agent(Endpoint(server.base_url), "m", policy=LoopPolicy(retry=retry))
        started = time.monotonic()
        with pytest.raises(RunEndpointUnavailable) as caught:
            await agent.prompt("Count the items.")
        sent = len(server.chat_requests)
    assert caught.value.status == 500 and not isinstance(caught.value, ContextOverflow)
    assert 2 <= sent < 40 and time.monotonic() - started < 5
    # off: such a failure spends retries like any transient one
    off = RetryPolicy(max_retries=2, base_delay_s=0.01, busy_timeout_s=0)
    async with ScriptedServer(*[Reply.from_capture(FULL) for _ in range(5)]) as server:
        agent = Agent(Endpoint(server.base_url), "m", policy=LoopPolicy(retry=off))
        with pytest.raises(RunEndpointUnavailable):
            await agent.prompt("Count the items.")
        assert len(server.chat_requests) == 3
