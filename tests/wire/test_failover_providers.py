"""A failover chain across two providers' doubles on loopback: each wire's own failure words hand the turn
to another wire, whose answer arrives through its own stream; a refusal of the request does not hop."""

from __future__ import annotations

import json
from itertools import permutations
from typing import Any

import pytest

from steadyloop.errors import ContextOverflow, EndpointUnavailable
from steadyloop.events import Event, Failover, Retry
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.provider_streams import anthropic_events, anthropic_stream, gemini_stream
from steadyloop.testing.replies import BodyReply, Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.turn.capabilities import capabilities_for
from steadyloop.wire.endpoints import Endpoint, Target

from .provider_doubles import DOUBLES, Double, error_reply

pytestmark = pytest.mark.timeout(60)

NO_RETRY = RetryPolicy(max_retries=0)
PAIRS = list(permutations(sorted(DOUBLES), 2))


def endpoint_for(server: ScriptedServer, double: Double) -> Endpoint:
    url = server.base_url
    if double.api == "gemini":  # Gemini's base URL names its API version
        url = url.removesuffix("/v1") + "/v1beta"
    return Endpoint(url, "test-key", api=double.api)  # type: ignore[arg-type]


def body(double: Double) -> dict[str, Any]:
    return {"model": double.model, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("failure", ["overloaded", "rate_limited"])
@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
async def test_one_providers_failure_hands_over_to_another_provider(
    first: str, second: str, failure: str
) -> None:
    primary, backup = DOUBLES[first](), DOUBLES[second]()
    async with ScriptedServer(getattr(primary, failure)) as a, ScriptedServer(backup.plain) as b:
        endpoint = endpoint_for(a, primary).with_fallbacks(Target(endpoint_for(b, backup), backup.model))
        events: list[Event] = []
        shown: list[str] = []
        turn = await run_turn(
            endpoint, body(primary), policy=NO_RETRY, on_event=events.append, on_output=shown.append
        )
        assert len(b.chat_requests) == 1
    assert turn.content == backup.plain_text == "".join(shown)
    (hop,) = [e for e in events if isinstance(e, Failover)]
    assert (hop.from_model, hop.to_model) == (primary.model, backup.model)
    assert hop.kind == ("rate_limited" if failure == "rate_limited" else "transient")
    assert not [e for e in events if isinstance(e, Retry)]
    # Each candidate keeps its latches under its own endpoint.
    assert capabilities_for(endpoint) is not capabilities_for(endpoint.fallbacks[0].endpoint)


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
async def test_an_overflow_in_a_providers_own_words_does_not_hop(first: str, second: str) -> None:
    primary, backup = DOUBLES[first](), DOUBLES[second]()
    async with ScriptedServer(primary.overflow) as a, ScriptedServer(backup.plain) as b:
        endpoint = endpoint_for(a, primary).with_fallbacks(Target(endpoint_for(b, backup), backup.model))
        with pytest.raises(ContextOverflow):
            await run_turn(endpoint, body(primary), policy=NO_RETRY)
        assert b.chat_requests == []


async def test_an_overloaded_event_inside_an_anthropic_stream_before_any_text_hands_over() -> None:
    primary, backup = DOUBLES["anthropic"](), DOUBLES["openai"]()
    assert primary.overloaded_in_stream is not None
    async with ScriptedServer(primary.overloaded_in_stream) as a, ScriptedServer(backup.plain) as b:
        endpoint = endpoint_for(a, primary).with_fallbacks(Target(endpoint_for(b, backup), backup.model))
        events: list[Event] = []
        turn = await run_turn(endpoint, body(primary), policy=NO_RETRY, on_event=events.append)
    assert turn.content == backup.plain_text
    assert [e.status for e in events if isinstance(e, Failover)] == [529]


def shown_then_overloaded(double: Double) -> Any:
    """A reply that shows some answer, then fails with the provider's own in-stream error."""
    if double.api == "gemini":
        said = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}]}
        recorded = error_reply("gemini", 5)  # Gemini's 503 UNAVAILABLE body
        assert isinstance(recorded, BodyReply)
        unavailable = json.loads(recorded.body)
        return gemini_stream([said, unavailable])
    if double.api == "anthropic":
        message = {"content": [{"type": "text", "text": "Hel"}], "stop_reason": "end_turn", "usage": {}}
        events = [e for e in anthropic_events(message) if e["type"] not in ("message_delta", "message_stop")]
        overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return anthropic_stream([*events, overloaded])
    error = {"code": "server_error", "message": "Provider disconnected unexpectedly"}
    cut = {"error": error, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}
    return Reply.stream([*text_chunks("Hel")[:-1], cut])


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
async def test_once_a_providers_answer_was_shown_its_error_propagates(first: str, second: str) -> None:
    primary, backup = DOUBLES[first](), DOUBLES[second]()
    async with ScriptedServer(shown_then_overloaded(primary)) as a, ScriptedServer(backup.plain) as b:
        endpoint = endpoint_for(a, primary).with_fallbacks(Target(endpoint_for(b, backup), backup.model))
        events: list[Event] = []
        shown: list[str] = []
        with pytest.raises(EndpointUnavailable) as caught:
            await run_turn(
                endpoint, body(primary), policy=NO_RETRY, on_event=events.append, on_output=shown.append
            )
        assert b.chat_requests == []  # no stitched answer
    assert "".join(shown) == "Hel"
    assert caught.value.kind == "transient"
    assert not [e for e in events if isinstance(e, Failover)]
