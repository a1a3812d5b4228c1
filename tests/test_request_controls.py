"""Sampling controls, thinking budgets and request metadata: sent, negotiated, never dropped in silence."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput, RunError
from steadyloop.events import Downgrade, Event, Notice
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams, RequestMetadata, build_body
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capabilities import EndpointCapabilities, model_capabilities_for
from steadyloop.turn.side_tasks import ask
from steadyloop.turn.thinking_budgets import DEFAULT_THINKING_BUDGETS, budget_fields, budget_tokens
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.failures import classify_failure

FAST = LoopPolicy(retry=RetryPolicy(base_delay_s=0.01, max_retries=0))
QUESTION = [UserMessage(content="Hi")]
SAMPLING = {
    "top_p": 0.9,
    "top_k": 40,
    "min_p": 0.05,
    "presence_penalty": 0.1,
    "frequency_penalty": 0.2,
    "repetition_penalty": 1.1,
    "seed": 7,
    "service_tier": "flex",
}

# Real refusals, as servers word them (tests/data/error_bodies): OpenAI, OpenAI behind LiteLLM, xAI.
REFUSALS = [
    (
        "top_k",
        {
            "error": {
                "message": "Unrecognized request argument supplied: top_k",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
    ),
    (
        "stop",
        "litellm.BadRequestError: OpenAIException - Unsupported parameter: 'stop' is not supported with this "
        "model.",
    ),
    (
        "frequency_penalty",
        {
            "code": "Client specified an invalid argument",
            "error": "Argument not supported on this model: frequencyPenalty",
        },
    ),
]


def answer(text: str = "Hello.") -> Any:
    return Reply.stream(stream_of(text))


async def run(server: ScriptedServer, params: ModelParams) -> list[Event]:
    events: list[Event] = []
    await run_agent_loop(
        Endpoint(server.base_url), params, messages=QUESTION, policy=FAST, on_event=events.append
    )
    return events


def build(params: ModelParams, refused: set[str] | None = None) -> dict[str, Any]:
    caps = EndpointCapabilities()
    latches = caps.model(params.model)
    latches.refused_fields |= refused or set()
    return build_body(params, None, QUESTION, (), caps, latches)


def test_every_sampling_control_is_sent_under_its_own_name() -> None:
    body = build(ModelParams(model="m", stop=["END", "\n\n"], **SAMPLING))
    for name, value in SAMPLING.items():
        assert body[name] == value
    assert body["stop"] == ["END", "\n\n"]
    assert "top_p" not in build(ModelParams(model="m"))


def test_bad_sampling_values_and_a_field_set_twice_are_typed_errors() -> None:
    with pytest.raises(InvalidInput, match="top_p"):
        ModelParams(model="m", top_p=float("nan"))
    with pytest.raises(InvalidInput, match="top_k"):
        ModelParams(model="m", top_k=2.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="stop"):
        ModelParams(model="m", stop=[1, 2])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="set both"):
        ModelParams(model="m", top_k=4, extra_body={"top_k": 5})
    with pytest.raises(InvalidInput, match="thinking-budget style"):
        ModelParams(model="m", thinking_budget="nobody")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="thinking_budgets"):
        ModelParams(model="m", thinking_budgets={"high": -1})


@pytest.mark.parametrize(("field", "body"), REFUSALS, ids=[f for f, _ in REFUSALS])
async def test_a_refused_control_is_dropped_latched_and_told(field: str, body: Any) -> None:
    assert classify_failure(400, body).field == field
    params = ModelParams(model="m", stop=["END"], **SAMPLING)
    async with ScriptedServer(Reply.json(body, 400), answer(), answer(), answer()) as server:
        events = await run(server, params)
        first, second = server.chat_requests[0].json, server.chat_requests[1].json
        assert field in first and field not in second
        # Everything else the caller set is still sent.
        assert {k for k in SAMPLING if k != field} <= set(second)
        # Latched for this model: the next run does not ask again...
        await run(server, params)
        assert field not in server.chat_requests[2].json
        # ...but another model on the same endpoint is asked.
        await run(server, ModelParams(model="other", stop=["END"], **SAMPLING))
        assert field in server.chat_requests[3].json
    downgrades = [e for e in events if isinstance(e, Downgrade)]
    assert [d.field for d in downgrades] == [field]
    assert any(isinstance(e, Notice) and e.name == "downgrade" and field in e.text for e in events)
    assert field in model_capabilities_for(Endpoint(server.base_url), "m").refused_fields


async def test_a_refused_value_fails_the_run_rather_than_being_dropped() -> None:
    out_of_range = {
        "object": "error",
        "message": "top_p must be in (0, 1], got 1.5.",
        "type": "BadRequestError",
    }
    async with ScriptedServer(Reply.json(out_of_range, 400)) as server:
        with pytest.raises(RunError, match=r"top_p must be in \(0, 1\]"):
            await run(server, ModelParams(model="m", top_p=1.5))
        assert len(server.chat_requests) == 1


def test_budget_table_and_styles() -> None:
    assert budget_tokens("high") == DEFAULT_THINKING_BUDGETS["high"]
    assert budget_tokens("high", {"high": 30000}) == 30000
    assert budget_tokens("off") is None and budget_tokens(None) is None and budget_tokens("xhigh") is None
    assert budget_fields("llama.cpp", 512) == {"thinking_budget_tokens": 512}
    assert budget_fields("anthropic", 0) == {"thinking": {"type": "disabled"}}
    assert budget_fields("anthropic", 2048) == {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert budget_fields("gemini", 800)["extra_body"]["google"]["thinking_config"]["thinking_budget"] == 800
    assert budget_fields(lambda n: {"think_tokens": n}, 9) == {"think_tokens": 9}


def test_a_budget_is_sent_instead_of_the_effort_and_the_effort_comes_back_when_it_is_refused() -> None:
    params = ModelParams(
        model="m", reasoning_effort="low", thinking_budget="llama.cpp", thinking_budgets={"low": 300}
    )
    body = build(params)
    assert body["thinking_budget_tokens"] == 300 and "reasoning_effort" not in body
    fallback = build(params, refused={"thinking_budget_tokens"})
    assert fallback["reasoning_effort"] == "low" and "thinking_budget_tokens" not in fallback
    off = build(ModelParams(model="m", reasoning_effort="none", thinking_budget="anthropic"))
    assert off["thinking"] == {"type": "disabled"}


async def test_a_refused_budget_falls_back_to_the_effort_over_the_wire() -> None:
    refusal = {
        "error": {
            "message": "Unrecognized request argument supplied: thinking",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    params = ModelParams(model="m", reasoning_effort="medium", thinking_budget="anthropic")
    async with ScriptedServer(Reply.json(refusal, 400), answer()) as server:
        events = await run(server, params)
        first, second = server.chat_requests[0].json, server.chat_requests[1].json
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 8192} and "reasoning_effort" not in first
    assert "thinking" not in second and second["reasoning_effort"] == "medium"
    assert any(isinstance(e, Downgrade) and e.field == "thinking" for e in events)


async def test_request_metadata_static_and_resolved_per_request() -> None:
    asked: list[str] = []
    counter = iter(range(100))

    def resolve(model: str) -> RequestMetadata:
        asked.append(model)
        return RequestMetadata(metadata={"request": str(next(counter))}, user="user-7")

    async with ScriptedServer(answer(), answer()) as server:
        await run(server, ModelParams(model="m", metadata=RequestMetadata(metadata={"team": "a"})))
        await run(server, ModelParams(model="m", metadata=resolve))
        static, resolved = server.chat_requests[0].json, server.chat_requests[1].json
    assert static["metadata"] == {"team": "a"} and "user" not in static
    assert resolved["user"] == "user-7" and resolved["metadata"]["request"].isdigit()
    assert asked and set(asked) == {"m"}


def test_a_resolver_that_returns_the_wrong_thing_is_a_typed_error() -> None:
    with pytest.raises(InvalidInput, match="metadata resolver"):
        build(ModelParams(model="m", metadata=lambda model: {"x": 1}))  # type: ignore[arg-type,return-value]


async def test_side_tasks_send_the_effort_the_model_accepts() -> None:
    refusal = {
        "error": {
            "message": "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
            "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
            "type": "invalid_request_error",
        }
    }
    async with ScriptedServer(Reply.json(refusal, 400), answer("One."), answer("Two.")) as server:
        endpoint = Endpoint(server.base_url)
        assert await ask(endpoint, "m", "Be brief.", "Q", reasoning_effort="none") == "One."
        assert await ask(endpoint, "m", "Be brief.", "Q", reasoning_effort="none") == "Two."
        sent = [r.json.get("reasoning_effort") for r in server.chat_requests]
    # The refused rung went once; from then on the side task sends the latched one.
    assert sent == ["none", "minimal", "minimal"]


_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@given(
    st.dictionaries(
        st.sampled_from(
            [*SAMPLING, "stop", "thinking_budget", "thinking_budgets", "reasoning_effort", "extra_body"]
        ),
        _ANY,
    )
)
def test_any_settings_build_a_body_or_fail_typed(values: dict[str, Any]) -> None:
    try:
        params = ModelParams(model="m", **values)
    except InvalidInput:
        return
    body = build(params)
    assert body["model"] == "m"
