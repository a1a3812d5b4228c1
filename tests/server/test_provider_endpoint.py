"""The server's endpoint is the one its agent document's provider and failover name, as the library builds it.

A chain whose first candidate is a closed loopback port and whose second is the scripted model server: the
session's answer arrives from the second, and the hop is a ``failover`` event in the session's stream. Both
through ``ServerSettings.from_agent`` (the library) and through ``steadyloop serve --agent`` (a process).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

import steadyloop as sl
from steadyloop.providers import UnknownProvider
from steadyloop.server import ServerSettings
from steadyloop.spec import SPEC_VERSION, AgentSpec
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer, free_port, read_sse, until_started

pytestmark = pytest.mark.timeout(180)

CHAIN = {
    "spec": SPEC_VERSION,
    "endpoint": {"provider": "ollama", "failover": ["vllm"]},
    "model": {"name": "scripted"},
}


def _doc(data: dict[str, object]) -> AgentSpec:
    return sl.parse_spec(data, bundle=False).spec


def _chain_env(dead_url: str, live_url: str) -> dict[str, str]:
    return {"OLLAMA_BASE_URL": dead_url, "VLLM_BASE_URL": live_url}


async def _answer_and_events(http: httpx.AsyncClient) -> tuple[str, list[str], dict[str, object]]:
    session = (await http.post("/sessions", json={})).json()["id"]
    run = await http.post(f"/sessions/{session}/messages", json={"text": "hi"})
    assert run.status_code == 200, run.text
    kinds: list[str] = []
    hop: dict[str, object] = {}
    async with http.stream("GET", f"/sessions/{session}/events?after=0") as response:
        async for event in read_sse(response):
            kinds.append(event.event)
            if event.event == "failover":
                hop = event.data
    return str(run.json()["answer"]), kinds, hop


async def test_a_served_session_hops_down_the_documents_chain(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    async with ScriptedServer(Reply.stream(stream_of("From the second."))) as model:
        settings = ServerSettings.from_agent(
            _doc(CHAIN), env=_chain_env(dead, model.base_url), store_path=tmp_path / "s.db"
        )
        assert settings.model == "scripted"
        assert settings.agent is not None and settings.agent.endpoint.provider is None
        async with LiveServer(settings) as server, server.client() as http:
            answer, kinds, hop = await _answer_and_events(http)
    assert answer == "From the second."
    assert "failover" in kinds
    assert hop["from_endpoint"] == dead and hop["to_endpoint"] == model.base_url
    assert hop["kind"] == "network"  # a refused connection: nothing listens there
    assert len(model.chat_requests) == 1


def test_the_document_names_the_native_wire_and_the_timeouts() -> None:
    doc = _doc(
        {
            "spec": SPEC_VERSION,
            "endpoint": {
                "provider": "anthropic",
                "failover": ["gemini:gemini-2.5-flash"],
                "base_url": "http://127.0.0.1:9/anthropic",
                "request_timeout": 7,
            },
            "model": {"name": "claude-sonnet-4-5"},
        }
    )
    settings = ServerSettings.from_agent(doc, env={"ANTHROPIC_API_KEY": "k-a", "GEMINI_API_KEY": "k-g"})
    first = settings.endpoint
    (second,) = first.fallbacks
    assert (first.api, first.base_url, first.api_key) == ("anthropic", "http://127.0.0.1:9/anthropic", "k-a")
    assert first.request_timeout == 7
    assert second.endpoint.api == "gemini" and second.model == "gemini-2.5-flash"
    assert settings.model == "claude-sonnet-4-5"


def test_without_a_provider_the_environment_decides() -> None:
    env = {"STEADYLOOP_PROVIDER": "mistral", "STEADYLOOP_MODEL": "mistral-small", "MISTRAL_API_KEY": "k"}
    settings = ServerSettings.from_agent(None, env=env)
    assert settings.endpoint.base_url == sl.provider("mistral", env={}).base_url
    assert settings.model == "mistral-small"
    with pytest.raises(UnknownProvider):
        ServerSettings.from_agent(None, env={"STEADYLOOP_PROVIDER": "nobody"})


def test_a_document_naming_a_provider_is_not_quietly_overruled() -> None:
    with pytest.raises(sl.InvalidInput, match="from_agent"):
        ServerSettings(endpoint=sl.Endpoint("http://127.0.0.1:1/v1"), agent=_doc(CHAIN))
    with pytest.raises(sl.InvalidInput, match="base_url without a provider"):
        ServerSettings.from_agent(_doc({"spec": SPEC_VERSION, "endpoint": {"base_url": "http://h/v1"}}))


async def test_steadyloop_serve_takes_the_chain_from_its_agent_document(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    document = tmp_path / "agent.toml"
    document.write_text(
        f'spec = "{SPEC_VERSION}"\n'
        '[endpoint]\nprovider = "ollama"\nfailover = ["vllm"]\n'
        '[model]\nname = "scripted"\n'
    )
    async with ScriptedServer(Reply.stream(stream_of("Served down the chain."))) as model:
        port = free_port()
        env = {**os.environ, "STEADYLOOP_SERVER_TOKENS": "", **_chain_env(dead, model.base_url)}
        for name in ("STEADYLOOP_PROVIDER", "STEADYLOOP_FAILOVER", "STEADYLOOP_BASE_URL", "OPENAI_BASE_URL"):
            env.pop(name, None)
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "steadyloop.cli", "serve", "--agent", str(document)),
            *("--store", f"{tmp_path}/sessions.db", "--no-tools", "--port", str(port)),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            await until_started(process)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                answer, kinds, hop = await _answer_and_events(http)
        finally:
            process.terminate()
            await process.wait()
    assert answer == "Served down the chain."
    assert "failover" in kinds and hop["to_endpoint"] == model.base_url
