"""A hosted provider without its key fails before anything is sent, naming the variable to set; a local
server, a URL of one's own, a key given later by the run, and a chain that can hand the turn on are not
held to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import RunMissingApiKey
from steadyloop.events import Event, Failover, RequestSent
from steadyloop.testing import Reply, ScriptedServer, stream_of
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire import Target, provider_from
from steadyloop.wire.endpoints import Endpoint, missing_key, require_key
from steadyloop.wire.windows import context_limit_for, list_models

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


@pytest.mark.parametrize(
    ("name", "variables"),
    [
        ("openai", ("OPENAI_API_KEY",)),
        ("anthropic", ("ANTHROPIC_API_KEY",)),
        ("gemini", ("GEMINI_API_KEY", "GOOGLE_API_KEY")),
        ("grok", ("GROK_API_KEY", "XAI_API_KEY")),
        ("mistral", ("MISTRAL_API_KEY",)),
        ("openrouter", ("OPENROUTER_API_KEY",)),
    ],
)
def test_a_hosted_provider_at_its_own_url_needs_its_key(name: str, variables: tuple[str, ...]) -> None:
    endpoint = sl.provider(name, env={})
    error = missing_key(endpoint)
    assert isinstance(error, sl.MissingApiKey) and isinstance(error, sl.EndpointRefused)
    assert error.variables == variables and error.kind == "auth" and error.status is None
    assert f"set {variables[0]}" in str(error)
    with pytest.raises(sl.MissingApiKey):
        require_key(endpoint)
    assert missing_key(sl.provider(name, env={variables[-1]: "k"})) is None  # any of its variables will do
    assert missing_key(sl.provider(name, api_key="k", env={})) is None


@pytest.mark.parametrize("name", ["ollama", "vllm", "sglang", "lmstudio"])
def test_a_local_server_needs_no_key(name: str) -> None:
    assert missing_key(sl.provider(name, env={})) is None


def test_a_url_of_ones_own_needs_no_key_and_the_key_list_is_no_part_of_identity() -> None:
    assert missing_key(sl.provider("openai", base_url="http://127.0.0.1:8080/v1", env={})) is None
    assert missing_key(sl.provider("anthropic", env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})) is None
    own = sl.provider("openai", env={})
    assert own == Endpoint("https://api.openai.com/v1") and "OPENAI_API_KEY" not in repr(own)
    with pytest.raises(sl.InvalidInput):
        Endpoint("http://127.0.0.1:1/v1", key_env="OPENAI_API_KEY")  # type: ignore[arg-type]


def test_endpoint_from_env_needs_a_key_only_for_openais_own_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert missing_key(Endpoint.from_env()) is not None
    assert missing_key(Endpoint.from_env("http://127.0.0.1:8080/v1")) is None


async def test_a_turn_fails_before_sending_and_a_run_is_caught_as_missing_key() -> None:
    endpoint = sl.provider("anthropic", env={})  # api.anthropic.com: the tests' network guard refuses it
    events: list[Event] = []
    with pytest.raises(sl.MissingApiKey) as caught:
        await run_turn(endpoint, BODY, on_event=events.append, policy=FAST)
    assert caught.value.model == "m" and "ANTHROPIC_API_KEY" in str(caught.value)
    assert not [e for e in events if isinstance(e, RequestSent)]
    agent = sl.Agent(endpoint, "claude-x")
    with pytest.raises(sl.MissingApiKey) as stopped:
        await agent.prompt("hi")
    assert isinstance(stopped.value, RunMissingApiKey) and stopped.value.variables == ("ANTHROPIC_API_KEY",)


async def test_nothing_asks_the_endpoint_for_its_models_or_window_without_the_key() -> None:
    endpoint = sl.provider("gemini", env={})
    with pytest.raises(sl.MissingApiKey):
        await list_models(endpoint)
    assert await context_limit_for(endpoint, "gemini-x") is None


async def test_a_key_the_run_resolves_is_sent() -> None:
    async with ScriptedServer(Reply.stream(stream_of(text="keyed"))) as server:
        needs = Endpoint(server.base_url, key_env=("EXAMPLE_API_KEY",))
        agent = sl.Agent(needs, "m", api_key=lambda: "k-live")
        turn = await agent.prompt("hi")
        assert turn.content == "keyed"
        assert dict(server.chat_requests[0].headers)["authorization"] == "Bearer k-live"


async def test_a_chain_hands_a_keyless_candidate_on_naming_the_variable() -> None:
    async with ScriptedServer(Reply.stream(stream_of(text="from backup"))) as server:
        chain = sl.provider("anthropic", env={}).with_fallbacks(Target(Endpoint(server.base_url), "m"))
        events: list[Event] = []
        turn = await run_turn(chain, BODY, on_event=events.append, policy=FAST)
    assert turn.content == "from backup"
    (hop,) = [e for e in events if isinstance(e, Failover)]
    assert hop.kind == "auth" and "ANTHROPIC_API_KEY" in hop.cause


async def test_a_callers_own_transport_brings_its_own_auth() -> None:
    async def backend(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        for chunk in stream_of(text="through my own"):
            yield chunk

    endpoint = replace(sl.provider("anthropic", env={}), transport=provider_from(backend))
    assert missing_key(endpoint) is None
    turn = await run_turn(endpoint, BODY, policy=FAST)
    assert turn.content == "through my own"


# -- a local server's key ------------------------------------------------------------------------------

# llama.cpp's server's refusal of a request without its key, as it answers.
LLAMA_401 = {"error": {"code": 401, "message": "Invalid API Key", "type": "authentication_error"}}


async def test_a_loopback_server_refusing_the_key_says_where_steadyloop_keeps_its_key() -> None:
    async with ScriptedServer(Reply.json(LLAMA_401, 401)) as server:
        with pytest.raises(sl.EndpointRefused) as caught:
            await run_turn(sl.Endpoint(server.base_url), BODY, policy=FAST)
    assert caught.value.status == 401 and caught.value.kind == "auth"
    assert "Invalid API Key" in str(caught.value)
    assert "steadyloop.local.key_for(url)" in str(caught.value)


def test_a_hosted_servers_refusal_of_the_key_says_nothing_of_local_servers() -> None:
    from steadyloop.wire.failures import classify_failure
    from steadyloop.wire.typed_errors import error_for_failure

    failure = classify_failure(401, LLAMA_401, {})
    for where in ("https://api.openai.com/v1", "http://10.0.0.5:8080/v1", "http://[::1", None):
        error = error_for_failure(failure, endpoint=where, model="m")
        assert "key_for" not in str(error), where
    local = error_for_failure(failure, endpoint="http://localhost:8090/v1", model="m")
    assert "key_for" in str(local)
    # a refusal of another kind on loopback is worded as the server worded it
    other = error_for_failure(
        classify_failure(400, {"error": {"message": "bad"}}, {}), endpoint="http://127.0.0.1:1/v1", model="m"
    )
    assert "key_for" not in str(other)
