"""Silence before the first token is bounded over a whole turn, not once per attempt.

A dead endpoint (accepts the connection, never answers; or sends headers, then nothing) must fail typed
within two minutes by default, while a long CPU prefill on a live one still answers. The defaults are
checked by arithmetic; the behaviour on the scripted server with small allowances. A dead server is one
whose ``/models`` stalls too; a live one answers it.
"""

from __future__ import annotations

from typing import Any

import pytest

from steadyloop.errors import EndpointSilent
from steadyloop.events import Event, Retry
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
QUICK = {"base_delay_s": 0.01, "max_delay_s": 0.02, "probe_timeout_s": 0.3}
# A live server's probe answer is what these tests rely on, not how quickly it comes: on a loaded machine a
# /models round trip took longer than 0.3 s and the live endpoint was wrongly given up on.
LIVE = {**QUICK, "probe_timeout_s": 10.0}

NEVER_ANSWERS = Reply.stall()
HEADERS_THEN_NOTHING = Reply.stream(text_chunks("late"), stall_after=0)
ONLY_KEEPALIVES = Reply.stream(text_chunks("late"), stall_after=0, keepalive_every=0.05)
DEAD = {"models": Reply.stall()}


def test_the_defaults_fail_a_dead_endpoint_within_two_minutes() -> None:
    policy = RetryPolicy()
    bound = policy.silence_bound_s
    assert bound is not None and bound <= 120.0
    # A live endpoint's attempt may go on past the budget: a long prefill is never cut to make room for
    # re-sends of the same prefill.
    allowance = Endpoint("http://127.0.0.1:1/v1").first_chunk_timeout
    assert allowance is not None and policy.first_token_budget_s is not None
    assert allowance > policy.first_token_budget_s


def test_the_defaults_leave_room_for_a_long_cpu_prefill() -> None:
    # 2,500 prompt tokens at about 200 tokens a second on two cores is 13 s; the budget alone covers a
    # machine several times slower, and a live server is allowed its whole allowance past it.
    prefill_s = 2500 / 200
    budget = RetryPolicy().first_token_budget_s
    assert budget is not None and budget >= 5 * prefill_s
    allowance = Endpoint("http://127.0.0.1:1/v1").first_chunk_timeout
    assert allowance is not None and allowance >= 40 * prefill_s


def test_without_a_budget_the_bound_is_lifted() -> None:
    assert RetryPolicy(first_token_budget_s=None).silence_bound_s is None
    policy = RetryPolicy(first_token_budget_s=10, probe_timeout_s=2, max_retries=2, base_delay_s=1)
    assert policy.silence_bound_s == 15


@pytest.mark.parametrize("reply", [NEVER_ANSWERS, HEADERS_THEN_NOTHING, ONLY_KEEPALIVES])
async def test_a_dead_endpoint_is_given_up_on_when_the_budget_runs_out(reply: Any) -> None:
    policy = RetryPolicy(first_token_budget_s=0.5, **QUICK)
    async with ScriptedServer(default_reply=reply, **DEAD) as server:
        endpoint = Endpoint(server.base_url, request_timeout=30, first_token_timeout=30)
        with pytest.raises(EndpointSilent, match="did not answer a probe") as caught:
            await run_turn(endpoint, BODY, policy=policy)
        assert len(server.chat_requests) == 1
    assert caught.value.produced is False and caught.value.waited < 30


@pytest.mark.parametrize("dead", [True, False])
async def test_the_budget_is_shared_by_the_attempts(dead: bool) -> None:
    # Each attempt may wait 1 s; the turn 1.6 s in all before the endpoint must answer a probe. The first
    # attempt times out at 1 s; the second asks at 0.6 s: a dead endpoint fails there, a live one has
    # the rest of its second. Either way no third request, although five retries are allowed.
    policy = RetryPolicy(max_retries=5, first_token_budget_s=1.6, **(QUICK if dead else LIVE))
    events: list[Event] = []
    async with ScriptedServer(default_reply=NEVER_ANSWERS, **(DEAD if dead else {})) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.2, first_token_timeout=1.0)
        with pytest.raises(EndpointSilent) as caught:
            await run_turn(endpoint, BODY, policy=policy, on_event=events.append)
        assert len(server.chat_requests) == 2
        probes = [r for r in server.requests if r.path == "/v1/models"]
    assert caught.value.produced is False and caught.value.waited < 1.5
    assert ("did not answer a probe" in str(caught.value)) is dead
    assert len(probes) == 1
    assert [e.attempt for e in events if isinstance(e, Retry)] == [1]


async def test_a_live_endpoint_may_think_past_the_budget_up_to_its_allowance() -> None:
    # A long prefill: nothing for 1.2 s, four times the budget; the server answers its probes meanwhile.
    slow = Reply.stream(text_chunks("prefilled"), first_delay=1.2)
    policy = RetryPolicy(first_token_budget_s=0.3, **LIVE)
    async with ScriptedServer(slow) as server:
        endpoint = Endpoint(server.base_url, request_timeout=30, first_token_timeout=30)
        turn = await run_turn(endpoint, BODY, policy=policy)
        probes = [r for r in server.requests if r.path == "/v1/models"]
    assert turn.content == "prefilled" and turn.usage.retries == 0
    assert len(probes) >= 2  # asked at 0.3 s, and again every 0.3 s while it kept answering


async def test_a_stall_shorter_than_the_budget_is_retried() -> None:
    # A connection that hangs on a live server: the attempt's own allowance ends it, and a re-send works.
    policy = RetryPolicy(first_token_budget_s=10.0, **QUICK)
    async with ScriptedServer(NEVER_ANSWERS, Reply.stream(text_chunks("there"))) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.1, first_token_timeout=0.3)
        turn = await run_turn(endpoint, BODY, policy=policy)
    assert turn.content == "there" and turn.usage.timeouts == 1


async def test_without_a_budget_every_attempt_has_the_whole_allowance() -> None:
    policy = RetryPolicy(max_retries=2, first_token_budget_s=None, **QUICK)
    async with ScriptedServer(default_reply=NEVER_ANSWERS) as server:
        endpoint = Endpoint(server.base_url, request_timeout=0.1, first_token_timeout=0.3)
        with pytest.raises(EndpointSilent):
            await run_turn(endpoint, BODY, policy=policy)
        assert len(server.chat_requests) == 3


async def test_an_endpoint_told_to_wait_forever_is_not_bounded_by_the_budget() -> None:
    # request_timeout=None is what a slow local model asks for; the budget leaves it alone.
    slow = Reply.stream(text_chunks("patient"), first_delay=0.4)
    policy = RetryPolicy(first_token_budget_s=0.1, **QUICK)
    async with ScriptedServer(slow) as server:
        turn = await run_turn(Endpoint(server.base_url, request_timeout=None), BODY, policy=policy)
    assert turn.content == "patient"
