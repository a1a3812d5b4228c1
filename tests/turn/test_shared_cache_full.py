"""llama-server's slots share one cache: requests that each fit their window can fill it together, and the
server then ends their streams with a 500 "Context size has been exceeded.". That is a wait, not a
conversation too long: the step is sent again after a backoff and nothing is folded.

The two replies are byte-exact captures of a real llama-server (b11434, 4 slots sharing 1,024 tokens, three
requests of about 500 tokens at once): one refused before any output, one after some.
"""

from __future__ import annotations

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
from steadyloop.wire.failures import classify_failure

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
FULL = CAPTURES / "cache_full_stream.response.txt"
FULL_AFTER_OUTPUT = CAPTURES / "cache_full_after_output.response.txt"
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


def test_the_shared_cache_filling_is_a_wait_and_a_window_too_small_is_not() -> None:
    full = {"error": {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}}
    assert classify_failure(500, full).kind == "transient"
    relayed = {"error": {"code": 500, "message": "decode() failed: Context size has been exceeded."}}
    assert classify_failure(500, relayed).kind == "transient"
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
    async with ScriptedServer(Reply.from_capture(FULL_AFTER_OUTPUT)) as server:
        agent = Agent(Endpoint(server.base_url), "m", policy=LoopPolicy(retry=FAST))
        with pytest.raises(RunEndpointUnavailable) as caught:
            await agent.prompt("Count the items.")
        assert len(server.chat_requests) == 1  # what was shown is not shown twice
    assert not isinstance(caught.value, ContextOverflow)
    assert caught.value.kind == "transient" and caught.value.status == 500
