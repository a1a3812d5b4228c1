"""From a resolved spec to a running Agent: what reaches the wire, which tools, which policies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.agent_settings import mcp_server_spec
from steadyloop.spec import AgentSpec, MCPServer, ToolsSpec, parse_spec_text, resolve_agent_spec
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

FIXTURE = Path(__file__).parent / "tools" / "mcp_server_fixture.py"


@sl.tool(effect="read")
def read_notes(topic: str) -> str:
    """Read the notes on a topic."""
    return f"Notes on {topic}: the build is green."


@sl.tool(effect="read")
def lookup(word: str) -> str:
    """Look a word up."""
    return word.upper()


@sl.tool(effect="destructive")
def wipe(path: str) -> str:
    """Delete a path."""
    return "gone"


REGISTRY = [read_notes, lookup, wipe]

DOCUMENT = """
spec = "steadyloop.agent/1"
name = "helper"

[model]
name = "spec-model"
temperature = 0.1
max_tokens = 300
reasoning_effort = "off"
extra_body = { top_k = 20 }

[[prompt]]
id = "role"
text = "You help with builds."

[tools]
names = ["lookup", "read_notes"]
max_concurrency = 2

[approvals]
require_for = ["mutate-irreversible"]
overrides = { lookup = true }

[context]
enabled = true
keep_last = 3

[loop]
max_tool_iterations = 4
max_turns = 7
"""


def settings_of(text: str, **kwargs: Any) -> sl.AgentSettings:
    parsed = parse_spec_text(text, bundle=True)
    assert parsed.warnings == ()
    return sl.agent_settings(resolve_agent_spec([parsed.spec]), tools=REGISTRY, **kwargs)


def test_every_field_lands_where_the_agent_reads_it() -> None:
    settings = settings_of(DOCUMENT)
    assert settings.system == "You help with builds."
    assert settings.params == sl.ModelParams(
        model="spec-model", temperature=0.1, max_tokens=300, reasoning_effort="off", extra_body={"top_k": 20}
    )
    assert [t.name for t in settings.tools] == ["lookup", "read_notes"]  # the spec's order
    assert settings.policy.max_tool_iterations == 4 and settings.policy.tools.max_concurrency == 2
    assert settings.policy.context is not None and settings.policy.context.keep_last == 3
    assert settings.approval_policy.require_for == frozenset({"mutate-irreversible"})
    assert settings.approval_policy.requires(lookup) and not settings.approval_policy.requires(wipe)
    assert settings.max_turns == 7


def test_what_no_layer_says_is_the_librarys_default() -> None:
    settings = sl.agent_settings(AgentSpec(), tools=REGISTRY, model="served")
    assert settings.params == sl.ModelParams(model="served")
    assert settings.system == ""
    assert [t.name for t in settings.tools] == ["read_notes", "lookup", "wipe"]  # absent: every tool offered
    assert settings.policy == sl.LoopPolicy()
    assert settings.approval_policy == sl.ApprovalPolicy()
    assert settings.max_turns is None and settings.hooks == ()


def test_an_empty_tool_list_means_no_tools() -> None:
    spec = AgentSpec(tools=ToolsSpec(names=(), servers=()))
    assert sl.agent_settings(spec, tools=REGISTRY, model="m").tools == ()


def test_a_tool_or_server_the_host_lacks_is_an_error_naming_what_it_has() -> None:
    with pytest.raises(sl.InvalidInput, match=r"tools this host does not offer: grep \(offered: lookup"):
        sl.agent_settings(AgentSpec(tools=ToolsSpec(names=("grep",))), tools=REGISTRY, model="m")
    with pytest.raises(sl.InvalidInput, match="MCP servers this host does not offer: github"):
        sl.agent_settings(AgentSpec(tools=ToolsSpec(servers=("github",))), model="m")


def test_no_model_anywhere_is_an_error() -> None:
    with pytest.raises(sl.InvalidInput, match=r"names no model"):
        sl.agent_settings(AgentSpec())


def test_servers_come_from_the_host_and_the_bundle_and_the_host_wins_a_name() -> None:
    host = MCPServer(name="files", command="host-files")
    spec = AgentSpec(
        bundle=(
            MCPServer(name="files", command="doc-files"),
            MCPServer(name="web", url="https://w.example"),
        )
    )
    every = sl.agent_settings(spec, servers=[host], model="m").servers
    assert {s.name: s.command or s.url for s in every} == {"files": "host-files", "web": "https://w.example"}
    scoped = resolve_agent_spec([spec, AgentSpec(tools=ToolsSpec(servers=("web",)))])
    assert [s.name for s in sl.agent_settings(scoped, servers=[host], model="m").servers] == ["web"]


def test_a_hook_may_only_call_a_read_only_tool_the_agent_has() -> None:
    hooked = DOCUMENT + '[[hooks]]\nid = "h"\nevent = "before_turn"\ntool = "wipe"\n'
    with pytest.raises(sl.InvalidInput, match="does not have"):
        settings_of(hooked).agent(sl.Endpoint("http://127.0.0.1:9/v1"))
    with pytest.raises(sl.InvalidInput, match="only call read-only tools"):
        settings_of(hooked.replace('names = ["lookup", "read_notes"]', 'names = ["wipe"]')).agent(
            sl.Endpoint("http://127.0.0.1:9/v1")
        )


async def test_a_spec_agent_runs_end_to_end_with_its_hook_on_the_question() -> None:
    document = DOCUMENT + (
        '[[hooks]]\nid = "notes"\nevent = "before_turn"\ntool = "read_notes"\n'
        'arguments = { topic = "ci" }\nmax_tokens = 100\n'
    )
    settings = settings_of(document)
    call = Reply.stream(
        stream_of(tool_calls=[{"id": "c1", "name": "read_notes", "arguments": {"topic": "x"}}])
    )
    async with ScriptedServer(call, Reply.stream(stream_of(text="All green."))) as server:
        agent = settings.agent(sl.Endpoint(server.base_url))
        turn = await agent.prompt("How is the build?")
        first = server.chat_requests[0].json
    assert turn.content == "All green."
    assert first["model"] == "spec-model" and first["temperature"] == 0.1 and first["top_k"] == 20
    assert first["messages"][0] == {"role": "system", "content": "You help with builds."}
    assert "Notes on ci: the build is green." in first["messages"][1]["content"]
    assert first["messages"][1]["content"].endswith("How is the build?")
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["lookup", "read_notes"]


async def test_a_bundled_stdio_server_connects_and_its_tools_reach_the_model() -> None:
    pytest.importorskip("mcp")
    from steadyloop.tools.mcp import mcp_tools

    document = f"""
spec = "steadyloop.agent/1"
requires = ["bundle", "mcp"]
[model]
name = "m"
[tools]
names = []
[bundle.mcp_servers.fixture]
command = {sys.executable!r}
args = [{str(FIXTURE)!r}]
"""
    settings = settings_of(document)
    assert [s.name for s in settings.servers] == ["fixture"]
    toolset = await mcp_tools(*(mcp_server_spec(s) for s in settings.servers))
    try:
        call = Reply.stream(
            stream_of(tool_calls=[{"id": "c1", "name": "echo", "arguments": {"text": "ping"}}])
        )
        async with ScriptedServer(call, Reply.stream(stream_of(text="It said ping."))) as server:
            agent = settings.agent(sl.Endpoint(server.base_url), tools=toolset.tools)
            turn = await agent.prompt("Echo ping")
            second = server.chat_requests[1].json["messages"]
    finally:
        await toolset.aclose()
    assert turn.content == "It said ping."
    assert second[-1] == {"role": "tool", "tool_call_id": "c1", "content": "ping"}
