"""Named providers: presets, the environment, latch priors a refusal could have set, and chains."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.events import Failover
from steadyloop.providers import PROVIDERS, UnknownProvider
from steadyloop.sessions import InMemorySessionStore
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import export_capabilities
from steadyloop.turn.capabilities import capabilities_for, model_capabilities_for, reset_capabilities
from steadyloop.wire import Target, endpoint_id

NAMES = (
    "openai",
    "anthropic",
    "gemini",
    "grok",
    "mistral",
    "openrouter",
    "ollama",
    "vllm",
    "sglang",
    "lmstudio",
)


def test_every_named_provider_has_a_preset() -> None:
    assert set(NAMES) == set(PROVIDERS)
    urls = {name: sl.provider(name, env={}).base_url for name in NAMES}
    assert urls["openai"] == "https://api.openai.com/v1"
    assert urls["grok"] == "https://api.x.ai/v1"
    assert urls["mistral"] == "https://api.mistral.ai/v1"
    assert urls["openrouter"] == "https://openrouter.ai/api/v1"
    assert urls["ollama"] == "http://127.0.0.1:11434/v1"
    assert urls["vllm"] == "http://127.0.0.1:8000/v1"
    assert urls["sglang"] == "http://127.0.0.1:30000/v1"
    assert urls["lmstudio"] == "http://127.0.0.1:1234/v1"
    assert sl.provider("anthropic", env={}).api == "anthropic"
    assert sl.provider("gemini", env={}).api == "gemini"
    assert {sl.provider(n, env={}).api for n in NAMES if n not in ("anthropic", "gemini")} == {"openai"}


def test_the_environment_gives_each_provider_its_url_and_key() -> None:
    env = {"MISTRAL_BASE_URL": "http://proxy.test/v1", "MISTRAL_API_KEY": "m-key", "XAI_API_KEY": "x-key"}
    mistral = sl.provider("Mistral", env=env)
    assert (mistral.base_url, mistral.api_key) == ("http://proxy.test/v1", "m-key")
    assert sl.provider("grok", env=env).api_key == "x-key"  # the provider's own variable
    assert sl.provider("grok", env={**env, "GROK_API_KEY": "g-key"}).api_key == "g-key"  # ours first
    assert sl.provider("xai", env=env).base_url == "https://api.x.ai/v1"
    explicit = sl.provider("mistral", api_key="given", base_url="http://other.test/v1", env=env)
    assert (explicit.base_url, explicit.api_key) == ("http://other.test/v1", "given")
    slow = sl.provider("ollama", env={}, request_timeout=None, first_token_timeout=900.0)
    assert (slow.request_timeout, slow.first_token_timeout) == (None, 900.0)


def test_an_unknown_name_fails_at_creation_listing_the_known_ones() -> None:
    with pytest.raises(UnknownProvider) as caught:
        sl.provider("bedrock")
    assert caught.value.name == "bedrock" and "mistral" in caught.value.known
    assert "known: anthropic, gemini, grok" in str(caught.value)
    assert isinstance(caught.value, sl.InvalidInput)
    with pytest.raises(UnknownProvider):
        sl.failover("openai:gpt-x,bedrock:claude")


@given(st.text(max_size=200))
def test_any_name_is_a_provider_or_a_typed_error(name: str) -> None:
    try:
        endpoint = sl.provider(name, env={})
    except UnknownProvider as error:
        assert error.known == tuple(sorted(PROVIDERS))
    else:
        assert isinstance(endpoint, sl.Endpoint)


@given(st.text(max_size=300))
def test_any_chain_spec_is_a_chain_or_a_typed_error(spec: str) -> None:
    try:
        target = sl.failover(spec, env={})
    except sl.InvalidInput:
        return
    assert len(target.endpoint.fallbacks) == spec.count(",")


def test_env_factory() -> None:
    target = sl.provider_from_env({"STEADYLOOP_PROVIDER": "vllm", "STEADYLOOP_MODEL": "Qwen/Qwen3-8B"})
    assert (target.endpoint.base_url, target.model) == ("http://127.0.0.1:8000/v1", "Qwen/Qwen3-8B")
    shared = sl.provider_from_env(
        {"STEADYLOOP_PROVIDER": "vllm", "STEADYLOOP_BASE_URL": "http://gpu:8000/v1"}
    )
    assert shared.endpoint.base_url == "http://gpu:8000/v1" and shared.model is None
    assert sl.provider_from_env({}).endpoint.base_url == "https://api.openai.com/v1"
    chained = sl.provider_from_env(
        {
            "STEADYLOOP_FAILOVER": "anthropic:claude-x, openai:gpt-y ,ollama",
            "STEADYLOOP_PROVIDER": "mistral",  # the chain wins
            "STEADYLOOP_MODEL": "ignored-for-a-chain-that-names-one",
            "OPENAI_BASE_URL": "http://openai-proxy.test/v1",
            "STEADYLOOP_BASE_URL": "http://only-the-selected-provider.test/v1",
        }
    )
    assert (chained.endpoint.base_url, chained.model) == ("https://api.anthropic.com", "claude-x")
    openai, ollama = chained.endpoint.fallbacks
    assert (openai.endpoint.base_url, openai.model) == ("http://openai-proxy.test/v1", "gpt-y")
    assert (ollama.endpoint.base_url, ollama.model) == ("http://127.0.0.1:11434/v1", None)
    with pytest.raises(UnknownProvider):
        sl.provider_from_env({"STEADYLOOP_PROVIDER": "nope"})


def test_only_the_first_colon_splits_a_candidate() -> None:
    target = sl.failover("vllm:Qwen/Qwen3-8B,ollama:llama3:8b", env={})
    assert target.model == "Qwen/Qwen3-8B"
    assert target.endpoint.fallbacks[0].model == "llama3:8b"
    with pytest.raises(sl.InvalidInput, match="empty candidate"):
        sl.failover("openai,,ollama", env={})


def test_a_chain_from_targets_endpoints_and_pairs() -> None:
    e1, e2 = sl.Endpoint("http://127.0.0.1:1/v1"), sl.Endpoint("http://127.0.0.1:2/v1")
    target = sl.failover([Target(e1, "a"), e2, ("ollama", "b")], env={})
    assert target.endpoint.base_url == e1.base_url and target.model == "a"
    assert [(t.endpoint.base_url, t.model) for t in target.endpoint.fallbacks] == [
        (e2.base_url, None),
        ("http://127.0.0.1:11434/v1", "b"),
    ]
    with pytest.raises(sl.InvalidInput):
        sl.failover([], env={})
    with pytest.raises(sl.InvalidInput):
        sl.failover([target.endpoint], env={})  # a chain inside a chain


def test_priors_are_latches_a_reset_forgets() -> None:
    mistral = sl.provider("mistral", env={})
    caps = capabilities_for(mistral)
    assert caps.usage_in_stream is False
    assert "prompt_cache_key" in caps.model("mistral-large-latest").refused_fields
    assert model_capabilities_for(sl.provider("openai", env={}), "gpt-x").legacy_token_limit is False
    exported = export_capabilities()["endpoints"][endpoint_id(mistral)]
    assert exported["usage_in_stream"] is False  # kept like any latch
    reset_capabilities(mistral)
    assert capabilities_for(mistral).usage_in_stream is True  # and forgotten like one
    assert not model_capabilities_for(mistral, "m").refused_fields


def body() -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "prompt_cache_key": "s1"}


async def test_a_prior_shapes_the_first_request_and_a_reset_sends_the_field_again() -> None:
    async with ScriptedServer(Reply.stream(text_chunks("a")), Reply.stream(text_chunks("b"))) as server:
        endpoint = sl.provider("mistral", base_url=server.base_url, env={})
        await sl.run_turn(endpoint, body())
        first = server.chat_requests[0].json
        assert "prompt_cache_key" not in first and "stream_options" not in first
        reset_capabilities(endpoint)
        await sl.run_turn(endpoint, body())
        again = server.chat_requests[1].json
        assert again["prompt_cache_key"] == "s1" and "stream_options" in again


async def test_an_agent_over_a_chain_of_providers_reports_the_hop_in_its_session() -> None:
    store = InMemorySessionStore()
    session = await store.session(agent_id="a")
    overloaded = Reply.json({"error": {"message": "Service unavailable", "type": "server_error"}}, 503)
    async with (
        ScriptedServer(overloaded) as first,
        ScriptedServer(Reply.stream(stream_of("from vllm"))) as second,
    ):
        env = {"OLLAMA_BASE_URL": first.base_url, "VLLM_BASE_URL": second.base_url}
        chain = sl.failover("ollama:small,vllm:big", env=env)
        events: list[Any] = []
        agent = sl.Agent(chain.endpoint, chain.model or "", session=session)
        agent.subscribe(events.append)
        await agent.prompt("hi")
        assert second.chat_requests[0].json["model"] == "big"
    assert agent.state.messages[-1].content == "from vllm"
    (hop,) = [e for e in events if isinstance(e, Failover)]
    assert (hop.from_model, hop.to_model, hop.status) == ("small", "big", 503)
    exported = await store.export_jsonl(session.session_id, agent_id="a")
    assert '"type":"failover"' in exported.replace(" ", "")
