"""``--provider`` on the command line: a named provider at its environment's URL, and a failover chain
whose hop shows in the ``--json`` output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from steadyloop.cli.config import EndpointChoice, resolve
from steadyloop.testing import Reply, ScriptedServer, stream_of


def test_a_named_provider_at_its_environment_url(piped: Callable[..., Any], env: dict[str, str]) -> None:
    with ScriptedServer.in_thread(Reply.stream(stream_of(text="from lm studio"))) as server:
        env["LMSTUDIO_BASE_URL"] = server.base_url
        done = piped("run", "--provider", "lmstudio:qwen-local", "hi")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "from lm studio"
        assert server.chat_requests[0].json["model"] == "qwen-local"


def test_a_chain_hops_and_the_json_output_says_so(piped: Callable[..., Any], env: dict[str, str]) -> None:
    overloaded = Reply.json({"error": {"message": "Service unavailable", "type": "server_error"}}, 503)
    with (
        ScriptedServer.in_thread(overloaded) as first,
        ScriptedServer.in_thread(Reply.stream(stream_of(text="from sglang"))) as second,
    ):
        env.update(VLLM_BASE_URL=first.base_url, SGLANG_BASE_URL=second.base_url)
        done = piped("run", "--json", "--provider", "vllm:big,sglang:small", "hi")
        assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (hop,) = [e for e in events if e["type"] == "failover"]
    assert (hop["from_model"], hop["to_model"], hop["status"]) == ("big", "small", 503)
    assert hop["to_endpoint"] == second.base_url
    assert "".join(e["delta"] for e in events if e["type"] == "message_update") == "from sglang"


def test_an_unknown_provider_is_a_clear_error(piped: Callable[..., Any]) -> None:
    done = piped("run", "--provider", "bedrock", "hi")
    assert done.returncode != 0
    assert "unknown provider 'bedrock'; known: anthropic" in done.stderr
    assert "Traceback" not in done.stderr


def test_resolution_order() -> None:
    env = {"STEADYLOOP_PROVIDER": "mistral", "MISTRAL_API_KEY": "k", "STEADYLOOP_MODEL": "mistral-small"}
    by_env = resolve(EndpointChoice(), env=env, config={})
    assert (by_env.endpoint.base_url, by_env.model) == ("https://api.mistral.ai/v1", "mistral-small")
    by_flag = resolve(EndpointChoice(provider="grok:grok-4", api_key="flag-key"), env=env, config={})
    assert (by_flag.endpoint.base_url, by_flag.endpoint.api_key, by_flag.model) == (
        "https://api.x.ai/v1",
        "flag-key",
        "grok-4",
    )
    moved = resolve(
        EndpointChoice(provider="vllm", base_url="http://gpu.test:8000/v1", model="m"), env={}, config={}
    )
    assert (moved.endpoint.base_url, moved.model) == ("http://gpu.test:8000/v1", "m")
    named = resolve(EndpointChoice(name="ollama"), env=env, config={})
    assert named.endpoint.base_url.endswith(":11434/v1")  # -e wins over the environment's provider


def test_run_with_the_anthropic_provider(piped: Callable[..., Any], env: dict[str, str]) -> None:
    from steadyloop.testing.provider_streams import anthropic_events, anthropic_stream

    message = {
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello from the Messages wire."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 7},
    }
    with ScriptedServer.in_thread(anthropic_stream(anthropic_events(message))) as server:
        env.update(ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="sk-ant-test")
        done = piped("run", "--provider", "anthropic:claude-sonnet-4-5", "hi")
        assert done.returncode == 0, done.stderr
        (request,) = server.chat_requests
    assert done.stdout.strip() == "Hello from the Messages wire."
    assert request.path == "/v1/messages" and request.json["model"] == "claude-sonnet-4-5"
