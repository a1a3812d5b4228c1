"""``resolve_agent_spec``, ``export_spec`` and ``resolve_api_key``: the layering rules one by one."""

from __future__ import annotations

import json
from typing import Any

from steadyloop.spec import (
    SPEC_VERSION,
    AgentSpec,
    MCPServer,
    export_spec,
    parse_spec,
    resolve_agent_spec,
    resolve_api_key,
)
from steadyloop.wire import NO_KEY


def spec(**document: Any) -> AgentSpec:
    return parse_spec({"spec": SPEC_VERSION, **document}, bundle=True).spec


def test_absent_inherits_and_nothing_else_does() -> None:
    host = spec(model={"name": "base", "temperature": 0.7, "max_tokens": 4096}, loop={"max_turns": 20})
    agent = spec(model={"temperature": 0, "max_tokens": 1})
    resolved = resolve_agent_spec([host, agent])
    assert resolved.model.name == "base"  # absent: inherited
    assert resolved.model.temperature == 0  # zero is a temperature, not "inherit"
    assert resolved.model.max_tokens == 1
    assert resolved.loop.max_turns == 20


def test_an_empty_text_replaces_rather_than_inherits() -> None:
    resolved = resolve_agent_spec([spec(description="host"), spec(description="")])
    assert resolved.description == ""


def test_tool_and_server_lists_are_replaced_whole() -> None:
    host = spec(tools={"names": ["read_file", "grep"], "servers": ["github", "web"]})
    scoped = spec(tools={"servers": []})
    resolved = resolve_agent_spec([host, scoped])
    assert resolved.tools.servers == ()  # none: never widened back to the host's two
    assert resolved.tools.names == ("read_file", "grep")
    narrowed = resolve_agent_spec([host, spec(tools={"names": ["grep"]})])
    assert narrowed.tools.names == ("grep",)
    assert resolve_agent_spec([spec(), spec()]).tools.servers is None  # absent: every server offered


def test_prompt_and_hooks_merge_by_id() -> None:
    host = spec(
        prompt=[{"id": "role", "text": "You help."}, {"id": "house", "text": "Be brief."}],
        hooks=[{"id": "notes", "event": "before_turn", "tool": "read_notes"}],
    )
    agent = spec(
        prompt=[{"id": "role", "text": "You review code."}, {"id": "extra", "text": "Cite lines."}],
        hooks=[{"id": "notes", "event": "session_start", "tool": "read_notes"}],
    )
    resolved = resolve_agent_spec([host, agent])
    assert resolved.system_prompt == "You review code.\n\nBe brief.\n\nCite lines."
    assert resolved.hooks is not None and [h.event for h in resolved.hooks] == ["session_start"]


def test_maps_merge_by_key_and_requires_accumulate() -> None:
    host = spec(
        requires=["mcp"],
        model={"extra_body": {"top_k": 40, "min_p": 0.1}},
        approvals={"overrides": {"a": True}},
    )
    agent = spec(
        requires=["hooks", "mcp"], model={"extra_body": {"top_k": 20}}, approvals={"overrides": {"b": False}}
    )
    resolved = resolve_agent_spec([host, agent])
    assert dict(resolved.model.extra_body or {}) == {"top_k": 20, "min_p": 0.1}
    assert dict(resolved.approvals.overrides or {}) == {"a": True, "b": False}
    assert resolved.requires == ("mcp", "hooks")


def test_bundled_servers_merge_by_name() -> None:
    host = spec(bundle={"mcp_servers": {"a": {"command": "a1"}, "b": {"command": "b1"}}})
    agent = spec(bundle={"mcp_servers": {"a": {"url": "https://a.example/mcp"}}})
    resolved = resolve_agent_spec([host, agent])
    assert resolved.bundle is not None
    assert [(s.name, s.command, s.url) for s in resolved.bundle] == [
        ("a", None, "https://a.example/mcp"),
        ("b", "b1", None),
    ]


def test_no_layers_is_the_empty_spec_and_one_layer_is_itself() -> None:
    one = spec(name="x", model={"name": "m"})
    assert resolve_agent_spec([]) == AgentSpec()
    assert resolve_agent_spec([one]) == one


def test_export_strips_what_could_carry_a_secret_and_stays_valid() -> None:
    original = spec(
        bundle={
            "mcp_servers": {
                "gh": {"command": "gh-mcp", "args": ["stdio"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
                "web": {"url": "https://mcp.example/x", "headers": {"X-Team": "a"}},
            }
        }
    )
    exported = export_spec(original)
    assert exported["bundle"] == {
        "mcp_servers": {
            "gh": {"command": "gh-mcp", "args": ["stdio"]},
            "web": {"url": "https://mcp.example/x"},
        }
    }
    again = parse_spec(json.loads(json.dumps(exported)), bundle=True)
    assert again.warnings == ()
    assert again.spec.bundle == (
        MCPServer(name="gh", command="gh-mcp", args=("stdio",)),
        MCPServer(name="web", url="https://mcp.example/x"),
    )


def test_export_writes_only_what_was_given() -> None:
    assert export_spec(AgentSpec()) == {"spec": SPEC_VERSION}
    given = spec(tools={"servers": []}, prompt=[], model={"temperature": 0})
    assert export_spec(given) == {
        "spec": SPEC_VERSION,
        "model": {"temperature": 0.0},
        "prompt": [],
        "tools": {"servers": []},
    }


# -- keys ----------------------------------------------------------------------------------------------

OPERATOR = {"inherited_base_url": "https://api.example.com/v1", "inherited_api_key": "operator-key"}


def test_an_endpoints_own_key_wins() -> None:
    assert resolve_api_key("https://other.example/v1", "own", **OPERATOR) == "own"


def test_a_url_of_its_own_gets_no_key_rather_than_the_operators() -> None:
    assert resolve_api_key("https://other.example/v1", None, **OPERATOR) == NO_KEY
    assert resolve_api_key("https://other.example/v1", "", **OPERATOR) == NO_KEY
    assert (
        resolve_api_key("https://other.example/v1", None, inherited_base_url=None, inherited_api_key="k")
        == NO_KEY
    )


def test_the_same_url_or_none_inherits() -> None:
    assert resolve_api_key("https://api.example.com/v1/", None, **OPERATOR) == "operator-key"
    assert resolve_api_key(None, None, **OPERATOR) == "operator-key"
    assert resolve_api_key(None, None, inherited_base_url=None, inherited_api_key=None) == NO_KEY
