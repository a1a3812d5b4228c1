"""A server asking to wait longer than the retry policy allows fails the turn at once, with the wait it asked."""

from __future__ import annotations

from typing import Any, Literal

import pytest

import steadyloop as sl
from steadyloop.errors import RunRetryDelayTooLong
from steadyloop.events import Event, Retry
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, backoff_delay, run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import configure_clients

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
OK = Reply.stream(text_chunks("ok"))
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


def limited(headers: dict[str, str] | None = None, message: str = "Rate limit reached") -> Any:
    return Reply.json({"error": {"message": message, "type": "rate_limit"}}, 429, headers)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("reply", "asked"),
    [
        (limited({"Retry-After": "120"}), 120.0),
        (limited({"retry-after-ms": "90000"}), 90.0),
        (limited(message="Rate limit reached. Please try again in 75s."), 75.0),
    ],
    ids=["retry-after", "retry-after-ms", "body"],
)
async def test_a_longer_ask_than_the_cap_fails_at_once_with_the_wait(
    transport: Transport, reply: Any, asked: float
) -> None:
    configure_clients(transport=transport)
    events: list[Event] = []
    async with ScriptedServer(reply, OK) as server:
        with pytest.raises(sl.RetryDelayTooLong) as caught:
            await run_turn(
                Endpoint(server.base_url),
                BODY,
                policy=RetryPolicy(max_retry_delay_s=60),
                on_event=events.append,
            )
        assert len(server.chat_requests) == 1  # not sent again
    error = caught.value
    assert error.retry_after == pytest.approx(asked) and error.max_delay_s == 60
    assert error.status == 429 and error.kind == "rate_limited"
    assert isinstance(error, sl.EndpointUnavailable)
    assert f"{asked:g}s" in str(error) and "max_retry_delay_s" in str(error)
    assert isinstance(error.__cause__, sl.EndpointUnavailable)
    assert not [e for e in events if isinstance(e, Retry)]  # no wait was announced, none was taken


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_ask_within_the_cap_is_waited_and_sent_again(transport: Transport) -> None:
    configure_clients(transport=transport)
    events: list[Event] = []
    async with ScriptedServer(limited({"Retry-After": "0.2"}), OK) as server:
        turn = await run_turn(
            Endpoint(server.base_url),
            BODY,
            policy=RetryPolicy(max_retry_delay_s=0.5),
            on_event=events.append,
        )
        assert len(server.chat_requests) == 2
    assert turn.content == "ok"
    assert [e.delay_s for e in events if isinstance(e, Retry)] == [pytest.approx(0.2)]


async def test_zero_lifts_the_cap() -> None:
    events: list[Event] = []
    async with ScriptedServer(limited({"Retry-After": "0.3"}), OK) as server:
        turn = await run_turn(
            Endpoint(server.base_url), BODY, policy=RetryPolicy(max_retry_delay_s=0), on_event=events.append
        )
    assert turn.content == "ok"
    assert [e.delay_s for e in events if isinstance(e, Retry)] == [pytest.approx(0.3)]
    assert backoff_delay(0, RetryPolicy(max_retry_delay_s=0), retry_after=3600) == 3600
    assert backoff_delay(0, RetryPolicy(max_retry_delay_s=60), retry_after=30) == 30


async def test_an_ask_past_the_cap_on_a_failure_that_is_not_retried_keeps_its_own_error() -> None:
    # A refusal is not re-sent whatever it asks, so it is raised as the refusal it is.
    refused = Reply.json(
        {"error": {"message": "bad field", "type": "invalid_request_error"}}, 400, {"Retry-After": "500"}
    )
    async with ScriptedServer(refused) as server:
        with pytest.raises(sl.EndpointRefused) as caught:
            await run_turn(Endpoint(server.base_url), BODY, policy=FAST)
    assert not isinstance(caught.value, sl.RetryDelayTooLong)


async def test_a_run_stopped_by_a_long_wait_is_both_the_run_error_and_the_wait() -> None:
    async with ScriptedServer(limited({"Retry-After": "3600"})) as server:
        with pytest.raises(sl.RetryDelayTooLong) as caught:
            await sl.run_agent_loop(
                sl.Endpoint(server.base_url),
                sl.ModelParams(model="m"),
                messages=[sl.UserMessage(content="hi")],
                policy=sl.LoopPolicy(retry=RetryPolicy(max_retry_delay_s=60)),
            )
    error = caught.value
    assert isinstance(error, RunRetryDelayTooLong) and isinstance(error, sl.RunError)
    assert error.retry_after == 3600 and error.max_delay_s == 60 and error.reason == "endpoint"
    assert [m.role for m in error.messages] == ["user"]
