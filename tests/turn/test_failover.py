"""A failover chain across two scripted servers on loopback: who hops, who does not, and retry around it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steadyloop.errors import (
    ContextOverflow,
    EndpointError,
    EndpointRefused,
    EndpointSilent,
    EndpointUnavailable,
)
from steadyloop.events import Event, Failover, Retry, event_from_json, event_to_json
from steadyloop.testing.chunks import text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.turn.capabilities import model_capabilities_for
from steadyloop.turn.failover import hops
from steadyloop.wire.endpoints import Endpoint, Target

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, loading_poll_s=0.05, loading_timeout_s=5.0)


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "primary-model", "messages": [{"role": "user", "content": "hi"}], **extra}


def error(message: str, status: int, kind: str = "invalid_request_error", **headers: str) -> Any:
    return Reply.json({"error": {"message": message, "type": kind}}, status=status, headers=headers or None)


def answer(text: str) -> Any:
    return Reply.stream([*text_chunks(text), usage_chunk(5, 2)])


def chain(first: ScriptedServer, second: ScriptedServer, model: str | None = "backup-model") -> Endpoint:
    return Endpoint(first.base_url).with_fallbacks(Target(Endpoint(second.base_url), model))


async def run(endpoint: Endpoint, **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    options.setdefault("policy", FAST)
    turn = await run_turn(endpoint, options.pop("request", body()), on_event=events.append, **options)
    return turn, events


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (error("Incorrect API key provided", 401, "invalid_api_key"), "auth"),
        (error("Rate limit reached for requests", 429, "requests", **{"Retry-After": "30"}), "rate_limited"),
        (error("The model `primary-model` does not exist", 404, "not_found_error"), "not_found"),
        (error("Overloaded", 529, "overloaded_error"), "transient"),
        (
            Reply.json({"error": {"message": "Loading model", "type": "unavailable_error"}}, 503),
            "model_loading",
        ),
        (Reply.drop(), "transient"),  # the wire reads a dropped connection as transient
    ],
)
async def test_a_failure_before_the_first_event_hands_over_at_once(failure: Any, kind: str) -> None:
    async with ScriptedServer(failure) as first, ScriptedServer(answer("from backup")) as second:
        turn, events = await run(chain(first, second))
        assert turn.content == "from backup"
        assert second.chat_requests[0].json["model"] == "backup-model"
        assert len(first.chat_requests) == 1  # no retry against the failing one before hopping
    (hop,) = [e for e in events if isinstance(e, Failover)]
    assert not [e for e in events if isinstance(e, Retry)]  # no backoff before a hop
    assert (hop.from_endpoint, hop.from_model) == (first.base_url, "primary-model")
    assert (hop.to_endpoint, hop.to_model) == (second.base_url, "backup-model")
    assert hop.kind == kind and hop.cause
    assert event_from_json(event_to_json(hop)) == hop


async def test_a_fallback_without_a_model_asks_for_the_runs_model() -> None:
    async with ScriptedServer(error("Bad gateway", 502)) as first, ScriptedServer(answer("ok")) as second:
        await run(chain(first, second, model=None))
        assert second.chat_requests[0].json["model"] == "primary-model"


async def test_a_silent_first_candidate_hands_over() -> None:
    silent = Reply.stream(text_chunks("never"), headers_delay=5.0)
    async with ScriptedServer(silent) as first, ScriptedServer(answer("ok")) as second:
        endpoint = Endpoint(first.base_url, request_timeout=0.1, first_token_timeout=0.2)
        turn, events = await run(endpoint.with_fallbacks(Target(Endpoint(second.base_url), "b")))
    assert turn.content == "ok"
    assert [e.kind for e in events if isinstance(e, Failover)] == ["silent"]


async def test_once_something_was_shown_the_error_propagates() -> None:
    torn = Reply.stream(text_chunks("half an ans"), disconnect_after=2)
    async with ScriptedServer(torn) as first, ScriptedServer(answer("stitched")) as second:
        shown: list[str] = []
        with pytest.raises(EndpointError):
            await run(chain(first, second), on_output=shown.append)
        assert second.chat_requests == []
    assert "".join(shown).startswith("half")


@pytest.mark.parametrize(
    "refusal",
    [
        error("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens", 400),
        error("Invalid value for 'messages[0].role'", 400),
    ],
)
async def test_a_refusal_of_the_request_itself_does_not_hop(refusal: Any) -> None:
    async with ScriptedServer(refusal) as first, ScriptedServer(answer("no")) as second:
        with pytest.raises(EndpointRefused):
            await run(chain(first, second))
        assert second.chat_requests == []


async def test_a_full_outage_backs_off_and_starts_again_from_the_top() -> None:
    async with (
        ScriptedServer(error("Bad gateway", 502), answer("primary is back")) as first,
        ScriptedServer(error("Service unavailable", 503)) as second,
    ):
        turn, events = await run(chain(first, second))
        assert turn.content == "primary is back"
        assert len(first.chat_requests) == 2 and len(second.chat_requests) == 1
    kinds = [type(e).__name__ for e in events if isinstance(e, Failover | Retry)]
    assert kinds == ["Failover", "Retry"]


async def test_retries_spent_over_a_dead_chain_raise_the_last_failure() -> None:
    async with (
        ScriptedServer(*[error("Bad gateway", 502)] * 2) as first,
        ScriptedServer(*[error("Service unavailable", 503)] * 2) as second,
    ):
        with pytest.raises(EndpointUnavailable) as caught:
            await run(chain(first, second), policy=RetryPolicy(max_retries=1, base_delay_s=0.01))
        assert caught.value.status == 503
        assert len(first.chat_requests) == 2 and len(second.chat_requests) == 2


async def test_a_cancellation_never_hops() -> None:
    async with (
        ScriptedServer(Reply.stream(text_chunks("slow"), headers_delay=30.0)) as first,
        ScriptedServer(answer("no")) as second,
    ):
        task = asyncio.ensure_future(run(chain(first, second)))
        await first.wait_for_requests(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert second.chat_requests == []


async def test_each_candidate_keeps_its_own_latches() -> None:
    refused = error("Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead.", 400)
    async with (
        ScriptedServer(error("Bad gateway", 502)) as first,
        ScriptedServer(refused, answer("ok")) as second,
    ):
        backup = Endpoint(second.base_url)
        endpoint = Endpoint(first.base_url).with_fallbacks(Target(backup, "backup-model"))
        await run(endpoint, request=body(max_tokens=50))
        assert "max_completion_tokens" in second.chat_requests[1].json
    assert model_capabilities_for(backup, "backup-model").legacy_token_limit is False
    assert model_capabilities_for(Endpoint(first.base_url), "primary-model").legacy_token_limit is True


def test_what_hops() -> None:
    assert hops(EndpointSilent("quiet", waited=1.0, produced=False))
    assert hops(EndpointUnavailable("refused connection"))
    assert hops(EndpointError("x", status=503))
    assert not hops(ContextOverflow("too big", kind="context_overflow", status=400))
    assert not hops(EndpointRefused("bad field", kind="refused_field", status=400))
    assert not hops(EndpointError("bad request", status=400))


def test_a_chain_is_flat() -> None:
    inner = Endpoint("http://127.0.0.1:1/v1").with_fallbacks(Endpoint("http://127.0.0.1:2/v1"))
    with pytest.raises(ValueError, match="fallbacks of its own"):
        Endpoint("http://127.0.0.1:3/v1").with_fallbacks(inner)
    assert "fallbacks=1" in repr(inner) and inner.fallbacks[0].model is None


async def test_a_cut_answer_is_carried_on_by_the_model_that_wrote_it() -> None:
    import steadyloop as sl

    cut = Reply.stream(text_chunks(["The answer begins here and"], finish="length"))
    rest = Reply.stream(text_chunks([" ends here."]))
    async with (
        ScriptedServer(error("Bad gateway", 502)) as first,
        ScriptedServer(cut, rest) as second,
    ):
        endpoint = chain(first, second)
        agent = sl.Agent(endpoint, "primary-model", policy=sl.LoopPolicy(max_continuations=1, retry=FAST))
        await agent.prompt("hi")
        assert len(first.chat_requests) == 1  # the continuation never went back to the primary
        carried_on = second.chat_requests[1].json
    assert carried_on["model"] == "backup-model"
    assert carried_on["messages"][-1] == {"role": "assistant", "content": "The answer begins here and"}
    assert agent.state.messages[-1].content == "The answer begins here and ends here."
