"""The same behaviour over every wire: each provider's recorded sequences, served on loopback, read by
its real client (the OpenAI SDK, ``anthropic``, Gemini's REST API) under the same runtime.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import (
    ContextOverflow,
    EndpointError,
    EndpointSilent,
    EndpointUnavailable,
    InterceptorFailed,
    ModelRefusal,
    RetryDelayTooLong,
)
from steadyloop.events import MessageUpdate, Retry
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.interceptors import Interceptors, ResponseInfo, SseEvent

from .provider_doubles import DOUBLES, Double, error_reply

pytestmark = pytest.mark.timeout(60)

QUICK = RetryPolicy(max_retries=2, base_delay_s=0.0, max_retry_delay_s=0.01)
NO_RETRY = RetryPolicy(max_retries=0)


@pytest.fixture(params=sorted(DOUBLES))
def double(request: pytest.FixtureRequest) -> Double:
    return DOUBLES[request.param]()


def endpoint_for(server: ScriptedServer, double: Double, **timeouts: Any) -> Endpoint:
    url = server.base_url
    if double.api == "gemini":  # Gemini's base URL names its API version
        url = url.removesuffix("/v1") + "/v1beta"
    return Endpoint(url, "test-key", api=double.api, **timeouts)  # type: ignore[arg-type]


def body(double: Double, text: str = "hi", **extra: Any) -> dict[str, Any]:
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather somewhere.",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
    }
    return {"model": double.model, "messages": [{"role": "user", "content": text}], "tools": [tool], **extra}


def sent(server: ScriptedServer, n: int = -1) -> dict[str, Any]:
    payload: dict[str, Any] = server.chat_requests[n].json
    return payload


async def test_a_plain_answer(double: Double) -> None:
    async with ScriptedServer(double.plain) as server:
        shown: list[str] = []
        turn = await run_turn(endpoint_for(server, double), body(double), on_output=shown.append)
    assert turn.content == double.plain_text
    assert "".join(shown) == double.plain_text
    assert turn.finish_reason == "stop"
    assert turn.tool_calls == []


async def test_a_streamed_call_with_its_arguments_in_pieces(double: Double) -> None:
    async with ScriptedServer(double.split_call) as server:
        turn = await run_turn(endpoint_for(server, double), body(double))
    assert turn.finish_reason == "tool_calls"
    assert [c.name for c in turn.tool_calls] == [double.split_call_name]
    assert turn.tool_calls[0].arguments == double.split_call_arguments
    assert turn.tool_calls[0].id


async def test_parallel_calls(double: Double) -> None:
    async with ScriptedServer(double.parallel) as server:
        turn = await run_turn(endpoint_for(server, double), body(double))
    assert len(turn.tool_calls) == double.parallel_count
    assert len({c.id for c in turn.tool_calls}) == double.parallel_count
    assert all(c.name for c in turn.tool_calls)


async def test_thinking_then_a_call_then_the_answer_replays_the_signature(double: Double) -> None:
    @sl.tool
    def get_temperature(city: str) -> str:
        """The temperature in a city."""
        return f"12 degrees in {city}"

    async with ScriptedServer(double.thinking_call, double.answer) as server:
        agent = sl.Agent(endpoint_for(server, double), double.model, tools=[get_temperature], thinking="low")
        thought: list[str] = []
        agent.subscribe(
            lambda e: (
                thought.append(e.delta) if isinstance(e, MessageUpdate) and e.kind == "thinking" else None
            )
        )
        turn = await agent.prompt("How warm is it in Utrecht?")
        second = sent(server, 1)
        second_raw = server.chat_requests[1].body
    assert turn.content == double.answer_text
    calls = [m for m in agent.state.messages if isinstance(m, sl.AssistantMessage) and m.tool_calls]
    assert [c.name for c in calls[0].tool_calls] == [double.thinking_call_name]
    if double.api != "gemini":  # Gemini's signed call came with no thought summary; its answer did
        assert calls[0].reasoning
    assert "".join(thought)  # the reasoning streamed as reasoning
    if double.signature is not None:
        _assert_signature_replayed(second, double, calls[0], second_raw)


def _assert_signature_replayed(
    request: dict[str, Any], double: Double, kept: sl.AssistantMessage, raw: bytes | None = None
) -> None:
    if double.api == "anthropic":
        replayed = next(m for m in request["messages"] if m["role"] == "assistant")["content"]
        kinds = [block.get("type") for block in replayed]
        assert kinds.index("thinking") < kinds.index("tool_use")  # before the call it preceded
        thinking = next(b for b in replayed if b.get("type") == "thinking")
        assert thinking["signature"] == double.signature  # byte for byte
        assert thinking["thinking"] == kept.thinking[0].text
    elif double.api == "gemini":
        replayed = next(c for c in request["contents"] if c["role"] == "model")["parts"]
        call = next(p for p in replayed if "functionCall" in p)
        assert call["functionCall"]["name"] == double.thinking_call_name
        # On the call's own part, the very text the server sent (standard base64 with '+' and '/'), not
        # the same bytes re-encoded: the outgoing body holds it verbatim.
        assert call["thoughtSignature"] == double.signature
        assert set(double.signature) & {"+", "/"}  # the capture tells the two alphabets apart
        assert raw is not None and f'"thoughtSignature":"{double.signature}"'.encode() in raw
    else:
        raise AssertionError(f"no signed thinking on the {double.api} wire")


async def test_a_refusal_is_a_typed_error_naming_the_category(double: Double) -> None:
    if double.refusal is None:
        pytest.skip(f"the {double.api} wire has no refusal stop of its own")
    async with ScriptedServer(double.refusal) as server:
        with pytest.raises(ModelRefusal) as caught:
            await run_turn(endpoint_for(server, double), body(double), policy=QUICK)
        assert len(server.chat_requests) == 1  # never re-sent: it would refuse again
    assert caught.value.kind == "refusal"
    assert "category" in str(caught.value)


async def test_an_overflow_in_the_providers_words(double: Double) -> None:
    async with ScriptedServer(double.overflow) as server:
        with pytest.raises(ContextOverflow) as caught:
            await run_turn(endpoint_for(server, double), body(double), policy=QUICK)
        assert len(server.chat_requests) == 1
    assert caught.value.kind == "context_overflow"
    assert caught.value.limit and caught.value.requested and caught.value.requested > caught.value.limit


async def test_a_429_asking_past_the_cap_fails_at_once_with_the_wait_asked(double: Double) -> None:
    # Each provider's recorded 429 asks for seconds (8 s, 26 s): past the policy's cap, the turn fails now
    # with the wait the provider asked for, rather than sleeping the cap and sending again.
    async with ScriptedServer(double.rate_limited, double.plain) as server:
        retries: list[Retry] = []
        with pytest.raises(RetryDelayTooLong) as too_long:
            await run_turn(
                endpoint_for(server, double),
                body(double),
                policy=QUICK,
                on_event=lambda e: retries.append(e) if isinstance(e, Retry) else None,
            )
        assert len(server.chat_requests) == 1
    assert retries == []
    assert too_long.value.retry_after == double.retry_after

    async with ScriptedServer(double.rate_limited) as server:
        with pytest.raises(EndpointUnavailable) as caught:
            await run_turn(endpoint_for(server, double), body(double), policy=NO_RETRY)
    assert caught.value.kind == "rate_limited"
    assert caught.value.retry_after == double.retry_after


async def test_an_overloaded_provider_is_transient(double: Double) -> None:
    async with ScriptedServer(double.overloaded, double.plain) as server:
        turn = await run_turn(endpoint_for(server, double), body(double), policy=QUICK)
        assert len(server.chat_requests) == 2
    assert turn.content == double.plain_text


async def test_an_overloaded_event_inside_the_stream_is_transient(double: Double) -> None:
    if double.overloaded_in_stream is None:
        pytest.skip(f"the {double.api} wire has no in-stream overloaded event")
    async with ScriptedServer(double.overloaded_in_stream) as server:
        with pytest.raises(EndpointUnavailable) as caught:
            await run_turn(endpoint_for(server, double), body(double), policy=NO_RETRY)
    assert caught.value.kind == "transient"
    async with ScriptedServer(double.overloaded_in_stream, double.plain) as server:
        turn = await run_turn(endpoint_for(server, double), body(double), policy=QUICK)
    assert turn.content == double.plain_text


async def test_a_stall_after_the_first_event_is_silence(double: Double) -> None:
    async with ScriptedServer(double.plain_with(stall_after=1)) as server:
        endpoint = endpoint_for(server, double, request_timeout=0.3, first_token_timeout=0.3)
        with pytest.raises(EndpointSilent):
            await run_turn(endpoint, body(double), policy=NO_RETRY)


async def test_a_cut_stream_is_an_unavailable_endpoint(double: Double) -> None:
    async with ScriptedServer(double.plain_with(disconnect_after=2)) as server:
        with pytest.raises(EndpointUnavailable) as caught:
            await run_turn(endpoint_for(server, double), body(double), policy=NO_RETRY)
    assert caught.value.kind == "transient"


WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}
WEATHER_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "weather", "schema": WEATHER, "strict": True},
}


def schema_sent(api: str, request: dict[str, Any]) -> Any:
    """The response schema as each wire spells it in its request."""
    if api == "anthropic":
        assert request["output_config"]["format"]["type"] == "json_schema"
        return request["output_config"]["format"]["schema"]
    if api == "gemini":
        assert request["generationConfig"]["responseMimeType"] == "application/json"
        return request["generationConfig"]["responseJsonSchema"]
    assert request["response_format"]["type"] == "json_schema"
    return request["response_format"]["json_schema"]["schema"]


async def test_structured_output(double: Double) -> None:
    # The schema goes out in the wire's own field; an answer off it goes back with the problem, and the
    # fixed answer is the run's output.
    replies = [double.say('{"city": "Paris"}'), double.say('{"city": "Paris", "temp": 18.5}')]
    async with ScriptedServer(*replies) as server:
        result = await sl.run_agent_loop(
            endpoint_for(server, double),
            sl.ModelParams(model=double.model, response_format=WEATHER_FORMAT),
            messages=[sl.UserMessage(content="The weather in Paris, as JSON.")],
        )
        first, second = (r.json for r in server.chat_requests)
    assert result.output == {"city": "Paris", "temp": 18.5}
    for request in (first, second):
        schema = schema_sent(double.api, request)
        assert set(schema["properties"]) == {"city", "temp"} and schema["required"] == ["city", "temp"]
    assert "lacks the field" not in json.dumps(first) and "lacks the field" in json.dumps(second)


async def test_an_agent_over_the_named_provider_from_the_environment(double: Double) -> None:
    # sl.provider(name) reads <NAME>_BASE_URL and <NAME>_API_KEY; the Agent over it behaves as over any
    # endpoint, with the same events.
    async with ScriptedServer(double.plain) as server:
        url = endpoint_for(server, double).base_url
        prefix = double.api.upper()
        endpoint = sl.provider(double.api, env={f"{prefix}_BASE_URL": url, f"{prefix}_API_KEY": "k-test"})
        assert endpoint.api == double.api
        agent = sl.Agent(endpoint, double.model)
        events: list[Any] = []
        agent.subscribe(events.append)
        turn = await agent.prompt("hi")
        (request,) = server.chat_requests
    assert turn.content == double.plain_text
    assert "k-test" in (
        request.header("authorization")
        or request.header("x-api-key")
        or request.header("x-goog-api-key")
        or ""
    )
    kinds = [type(e).__name__ for e in events]
    for kind in ("AgentStart", "TurnStart", "MessageEnd", "UsageReport", "TurnEnd", "AgentEnd"):
        assert kind in kinds, (double.api, kind)


async def test_an_agent_run_with_a_tool_call(double: Double) -> None:
    async def weather(arguments: dict[str, Any], context: Any) -> str:
        return f"sunny in {arguments}"

    schema = {"type": "object", "properties": {k: {"type": "string"} for k in double.split_call_arguments}}
    lookup = sl.Tool(
        name=double.split_call_name, description="The weather somewhere.", parameters=schema, execute=weather
    )
    async with ScriptedServer(double.split_call, double.plain) as server:
        agent = sl.Agent(endpoint_for(server, double), double.model, tools=[lookup])
        turn = await agent.prompt("What is the weather?")
        second = sent(server, 1)
    assert turn.content == double.plain_text
    results = [m for m in agent.state.messages if isinstance(m, sl.ToolResultMessage)]
    assert results and "sunny in" in str(results[0].content)
    assert "sunny in" in json.dumps(second)


async def test_an_overflow_in_the_providers_words_is_folded_and_sent_again(double: Double) -> None:
    from steadyloop.context.keeper import ContextPolicy
    from steadyloop.events import ContextCompacted
    from steadyloop.loop import LoopPolicy

    async def summarise(text: str) -> str:
        return "Read logs 0-7; nothing unusual."

    history: list[Any] = [sl.UserMessage(content="Read the logs one by one.")]
    for n in range(8):
        history.append(
            sl.AssistantMessage(tool_calls=(sl.ToolCall(f"r{n}", "get_weather", {"location": f"c{n}"}),))
        )
        history.append(sl.ToolResultMessage(call_id=f"r{n}", content="x" * 2000, name="get_weather"))
        history.append(sl.AssistantMessage(content=f"Noted log {n}."))
        history.append(sl.UserMessage(content=f"Next one please ({n})."))
    policy = LoopPolicy(context_limit=100_000, context=ContextPolicy(summarise=summarise))
    async with ScriptedServer(double.overflow, double.plain) as server:
        agent = sl.Agent(endpoint_for(server, double), double.model, messages=history, policy=policy)
        events: list[Any] = []
        agent.subscribe(events.append)
        turn = await agent.continue_()
        first, second = (json.dumps(r.json) for r in server.chat_requests)
    assert turn.content == double.plain_text
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert compacted and compacted[0].forced
    assert "nothing unusual" in second
    # How far it folds depends on the window the provider named (4097 tokens here for OpenAI, 200,000 for
    # Anthropic, 1,048,576 for Gemini); every wire's second request is the smaller.
    assert len(second) < len(first)


async def test_interceptors_see_each_providers_responses_and_events(double: Double) -> None:
    # on_response and on_sse_event hold on every wire, not only chat completions: a host that logs a
    # provider's status, headers and events does not change when the provider does.
    seen_status: list[int] = []
    seen_events: list[SseEvent] = []
    payloads: list[str] = []

    def on_payload(request: dict[str, Any]) -> dict[str, Any]:
        payloads.append(request["messages"][-1]["content"])
        return {**request, "messages": [{"role": "user", "content": "rewritten"}]}

    hooks = Interceptors(
        on_payload=on_payload,
        on_response=lambda info: seen_status.append(info.status),
        on_sse_event=seen_events.append,
    )
    async with ScriptedServer(double.plain) as server:
        turn = await run_turn(endpoint_for(server, double), body(double), policy=QUICK, interceptors=hooks)
        assert "rewritten" in json.dumps(sent(server))
    assert turn.content == double.plain_text
    assert payloads == ["hi"]
    assert seen_status == [200]
    assert seen_events and all(isinstance(e.data, str) and e.data for e in seen_events)

    async with ScriptedServer(double.rate_limited) as server:
        seen_status.clear()
        with pytest.raises(EndpointUnavailable):
            await run_turn(endpoint_for(server, double), body(double), policy=NO_RETRY, interceptors=hooks)
    assert seen_status == [429]


async def test_an_interceptor_that_raises_ends_the_turn_typed_on_every_wire(double: Double) -> None:
    def broken(info: ResponseInfo) -> None:
        raise RuntimeError("logging backend down")

    async with ScriptedServer(double.plain, double.plain) as server:
        with pytest.raises(InterceptorFailed) as caught:
            await run_turn(
                endpoint_for(server, double),
                body(double),
                policy=QUICK,
                interceptors=Interceptors(on_response=broken),
            )
        assert len(server.chat_requests) == 1  # not retried
    assert caught.value.interceptor == "on_response"


# Each native wire's recorded error bodies (row of errors.jsonl, from 1), as their servers sent them.
ERROR_TABLE = [
    ("anthropic", 1, "context_overflow", "ContextOverflow"),
    ("anthropic", 2, "context_overflow", "ContextOverflow"),
    ("anthropic", 5, "auth", "EndpointRefused"),
    ("anthropic", 6, "not_found", "EndpointRefused"),
    ("anthropic", 8, "rate_limited", "EndpointUnavailable"),
    ("anthropic", 10, "transient", "EndpointUnavailable"),
    ("anthropic", 15, "transient", "EndpointUnavailable"),
    ("gemini", 1, "context_overflow", "ContextOverflow"),
    ("gemini", 3, "auth", "EndpointRefused"),
    ("gemini", 4, "rate_limited", "EndpointUnavailable"),
    ("gemini", 5, "transient", "EndpointUnavailable"),
    ("gemini", 6, "transient", "EndpointUnavailable"),
    ("gemini", 7, "not_found", "EndpointRefused"),
    ("gemini", 8, "not_found", "EndpointRefused"),
]


@pytest.mark.parametrize(("api", "row", "kind", "error_type"), ERROR_TABLE)
async def test_recorded_error_bodies_read_into_the_shared_kinds(
    api: str, row: int, kind: str, error_type: str
) -> None:
    double = DOUBLES[api]()
    async with ScriptedServer(error_reply(api, row)) as server:
        with pytest.raises(EndpointError) as caught:
            await run_turn(endpoint_for(server, double), body(double), policy=NO_RETRY)
    assert caught.value.kind == kind
    assert type(caught.value).__name__ == error_type
    if kind == "context_overflow":
        assert caught.value.requested and caught.value.limit  # type: ignore[attr-defined]
