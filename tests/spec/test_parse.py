"""``parse_spec``: the four refusals, every problem at once, and everything else dropped with a warning."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import steadyloop as sl
import steadyloop.spec as spec_package
from steadyloop.spec import (
    FEATURES,
    SPEC_VERSION,
    AgentSpec,
    EndpointSpec,
    LoopSpec,
    MCPServer,
    ModelSpec,
    PromptSection,
    SpecError,
    SpecProblem,
    ToolsSpec,
    parse_spec,
    parse_spec_text,
)

FULL = """
spec = "steadyloop.agent/1"
requires = ["hooks"]
name = "reviewer"
description = "Reviews a change"

[endpoint]
base_url = "http://127.0.0.1:8080/v1/"
context_length = 32768
request_timeout = 0

[model]
name = "qwen2.5-coder"
temperature = 0
max_tokens = 1024
reasoning_effort = "low"
tool_choice = "auto"
reasoning_replay = false
extra_body = { top_k = 20, min_p = 0.05, chat_template_kwargs = { enable_thinking = false } }

[[prompt]]
id = "role"
text = "You review code."

[[prompt]]
id = "style"
text = ""

[tools]
names = ["read_file", "grep"]
servers = []
discovery = "ondemand"
parallel = false
max_concurrency = 0
timeout = 30
recover_calls = true

[approvals]
require_for = ["destructive", "mutate-irreversible"]
overrides = { run_shell = true, read_file = false }
timeout = 60

[context]
enabled = true
keep_last = 0
max_chars = 1000

[loop]
max_tool_iterations = 8
max_continuations = 2
max_turns = 12
run_timeout = 600

[[hooks]]
id = "notes"
event = "before_turn"
tool = "read_notes"
arguments = { topic = "${TOPIC}" }
max_tokens = 200
"""


def test_a_full_document_reads_without_warnings() -> None:
    parsed = parse_spec_text(FULL)
    assert parsed.warnings == ()
    spec = parsed.spec
    assert spec.requires == ("hooks",) and spec.name == "reviewer"
    assert spec.endpoint.base_url == "http://127.0.0.1:8080/v1"  # a trailing slash is not part of it
    assert spec.endpoint.request_timeout == 0  # 0 means what it says (wait forever), not "inherit"
    assert spec.model.temperature == 0 and spec.model.max_tokens == 1024
    assert dict(spec.model.extra_body or {}) == {
        "top_k": 20,
        "min_p": 0.05,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    assert spec.system_prompt == "You review code."
    assert spec.tools.names == ("read_file", "grep") and spec.tools.servers == ()
    assert spec.tools.max_concurrency == 0
    assert dict(spec.approvals.overrides or {}) == {"run_shell": True, "read_file": False}
    assert spec.context.keep_last == 0
    assert spec.hooks is not None and spec.hooks[0].arguments["topic"] == "${TOPIC}"  # a literal, kept


def test_the_same_document_as_json_reads_the_same() -> None:
    import tomllib

    as_json = json.dumps(tomllib.loads(FULL))
    assert parse_spec_text(as_json, format="json") == parse_spec_text(FULL)


@pytest.mark.parametrize(
    ("document", "path", "words"),
    [
        ([], (), "an agent document is a table"),
        ("spec", (), "an agent document is a table"),
        ({}, ("spec",), "missing"),
        ({"spec": "steadyloop.agent/2"}, ("spec",), "version 2 is not 1"),
        ({"spec": "other/1"}, ("spec",), "not a spec token"),
        ({"spec": 1}, ("spec",), "not a spec token"),
        ({"spec": SPEC_VERSION, "requires": ["teleport"]}, ("requires", 0), "does not honour"),
        ({"spec": SPEC_VERSION, "requires": "mcp"}, ("requires",), "should be a list"),
        ({"spec": SPEC_VERSION, "model": "gpt"}, ("model",), "should be a table"),
        ({"spec": SPEC_VERSION, "prompt": {"id": "a"}}, ("prompt",), "should be a list"),
        ({"spec": SPEC_VERSION, "prompt": ["text"]}, ("prompt", 0), "should be a table"),
        ({"spec": SPEC_VERSION, "tools": {"names": "read_file"}}, ("tools", "names"), "should be a list"),
        (
            {"spec": SPEC_VERSION, "model": {"extra_body": []}},
            ("model", "extra_body"),
            "should be a table",
        ),
    ],
)
def test_only_the_document_is_refused(document: Any, path: tuple[Any, ...], words: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(document)
    assert [p.path for p in caught.value.problems] == [path]
    assert words in caught.value.problems[0].message
    assert isinstance(caught.value, sl.InvalidInput)


def test_every_refusal_is_reported_at_once_with_its_path() -> None:
    document = {
        "spec": "steadyloop.agent/9.1",
        "requires": ["mcp", "warp", "bundle"],
        "model": 3,
        "tools": {"servers": {"a": 1}},
        "loop": {"max_turns": "many"},  # only a warning, carried on the error too
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(document)
    error = caught.value
    assert [p.where for p in error.problems] == [
        "spec",
        "requires[1]",
        "requires[2]",
        "model",
        "tools.servers",
    ]
    assert "bundles are not allowed here" in error.problems[2].message
    assert [w.where for w in error.warnings] == ["loop.max_turns"]
    assert str(error).startswith("agent document refused (5 problems): spec: version 9")
    assert "\n" not in str(error)


def test_a_required_bundle_is_honoured_only_where_bundles_are_allowed() -> None:
    document = {"spec": SPEC_VERSION, "requires": ["bundle"]}
    with pytest.raises(SpecError):
        parse_spec(document)
    assert parse_spec(document, bundle=True).spec.requires == ("bundle",)
    with pytest.raises(SpecError):
        parse_spec({"spec": SPEC_VERSION, "requires": ["mcp"]}, features=FEATURES - {"mcp"})


def test_a_minor_version_is_read() -> None:
    assert parse_spec({"spec": "steadyloop.agent/1.7"}).spec == AgentSpec()


def test_values_out_of_range_are_dropped_not_clamped() -> None:
    parsed = parse_spec(
        {
            "spec": SPEC_VERSION,
            "model": {"temperature": 2.5, "max_tokens": 0, "reasoning_effort": "extreme"},
            "tools": {"max_concurrency": -1, "timeout": 0},
            "endpoint": {"context_length": float("nan"), "request_timeout": float("inf")},
            "loop": {"max_turns": True, "max_continuations": 1e300},
        }
    )
    spec = parsed.spec
    assert spec.model == ModelSpec() and spec.tools == ToolsSpec()
    assert spec.endpoint == EndpointSpec() and spec.loop == LoopSpec()
    assert {w.where for w in parsed.warnings} == {
        "model.temperature",
        "model.max_tokens",
        "model.reasoning_effort",
        "tools.max_concurrency",
        "tools.timeout",
        "endpoint.context_length",
        "endpoint.request_timeout",
        "loop.max_turns",
        "loop.max_continuations",
    }
    assert all("ignored" in w.message for w in parsed.warnings)


def test_null_reads_as_absent_and_unknown_fields_are_named() -> None:
    parsed = parse_spec({"spec": SPEC_VERSION, "model": {"name": None, "colour": "blue"}, "extra": 1})
    assert parsed.spec.model.name is None
    assert [w.where for w in parsed.warnings] == ["extra", "model.colour"]


def test_a_repeated_id_keeps_its_first_place_and_its_last_text() -> None:
    parsed = parse_spec(
        {
            "spec": SPEC_VERSION,
            "prompt": [{"id": "a", "text": "one"}, {"id": "b", "text": "two"}, {"id": "a", "text": "three"}],
        }
    )
    assert parsed.spec.prompt == (PromptSection("a", "three"), PromptSection("b", "two"))
    assert [w.where for w in parsed.warnings] == ["prompt[2].id"]


def test_entries_missing_what_they_need_are_dropped() -> None:
    parsed = parse_spec(
        {
            "spec": SPEC_VERSION,
            "prompt": [{"text": "no id"}],
            "hooks": [{"id": "h", "event": "whenever", "tool": "t"}],
        }
    )
    assert parsed.spec.prompt == () and parsed.spec.hooks == ()
    assert {w.where for w in parsed.warnings} == {"prompt[0]", "hooks[0]", "hooks[0].event"}


# -- credentials ---------------------------------------------------------------------------------------


def test_no_credential_rides_in_a_document() -> None:
    parsed = parse_spec(
        {
            "spec": SPEC_VERSION,
            "api_key": "whatever",
            "endpoint": {"base_url": "https://user:pw@llm.example.com/v1", "apiKey": "x"},
            "model": {
                "name": "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
                "extra_body": {"api-key": "k", "nested": {"Authorization": "Bearer abc", "ok": 1}},
            },
            "prompt": [{"id": "p", "text": "use ghp_abcdefghijklmnopqrstuvwxyz0123 to push"}],
        }
    )
    spec = parsed.spec
    assert spec.endpoint.base_url is None and spec.model.name is None and spec.prompt == ()
    assert dict(spec.model.extra_body or {}) == {"nested": {"ok": 1}}
    credential = [w.where for w in parsed.warnings if "credential" in w.message]
    assert credential == [
        "api_key",
        "endpoint.apiKey",
        "endpoint.base_url",
        'model.extra_body."api-key"',
        "model.extra_body.nested.Authorization",
        "model.name",
        "prompt[0].text",
    ]
    # A warning names where the secret was, never the secret.
    assert not any("abcdefghij" in w.message for w in parsed.warnings)


def test_a_key_in_the_query_is_a_credential_too() -> None:
    parsed = parse_spec({"spec": SPEC_VERSION, "endpoint": {"base_url": "https://x.example/v1?api_key=1"}})
    assert parsed.spec.endpoint.base_url is None


def test_variable_references_are_literals_never_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME_KEY", "expanded-secret")
    parsed = parse_spec(
        {
            "spec": SPEC_VERSION,
            "model": {"name": "${HOME_KEY}"},
            "bundle": {
                "mcp_servers": {
                    "gh": {"command": "gh-mcp", "env": {"TOKEN": "${HOME_KEY}"}},
                    "web": {
                        "url": "https://mcp.example/x",
                        "headers": {"Authorization": "Bearer ${HOME_KEY}"},
                    },
                }
            },
        },
        bundle=True,
    )
    spec = parsed.spec
    assert parsed.warnings == ()
    assert spec.model.name == "${HOME_KEY}"
    assert spec.bundle is not None
    assert dict(spec.bundle[0].env or {}) == {"TOKEN": "${HOME_KEY}"}
    assert dict(spec.bundle[1].headers or {}) == {"Authorization": "Bearer ${HOME_KEY}"}


# -- bundles -------------------------------------------------------------------------------------------

BUNDLED = {
    "spec": SPEC_VERSION,
    "bundle": {
        "mcp_servers": {"files": {"command": "files-mcp", "args": ["--root", "."], "env": {"A": "1"}}}
    },
}


def test_a_bundle_is_read_only_when_the_host_allows_it() -> None:
    skipped = parse_spec(BUNDLED)
    assert skipped.spec.bundle is None
    assert [w.where for w in skipped.warnings] == ["bundle"]
    taken = parse_spec(BUNDLED, bundle=True)
    assert taken.warnings == ()
    assert taken.spec.bundle == (
        MCPServer(name="files", command="files-mcp", args=("--root", "."), env={"A": "1"}),
    )


def test_a_bundled_server_needs_a_command_or_a_url() -> None:
    parsed = parse_spec(
        {
            "spec": SPEC_VERSION,
            "bundle": {"mcp_servers": {"both": {"command": "x", "url": "https://a.example"}, "none": {}}},
        },
        bundle=True,
    )
    assert parsed.spec.bundle == ()
    assert {w.where for w in parsed.warnings} == {"bundle.mcp_servers.both", "bundle.mcp_servers.none"}


# -- odd input -----------------------------------------------------------------------------------------


def test_text_that_is_not_toml_or_json_is_refused() -> None:
    with pytest.raises(SpecError, match="not valid TOML"):
        parse_spec_text("spec = ")
    with pytest.raises(SpecError, match="not valid JSON"):
        parse_spec_text("{", format="json")
    with pytest.raises(SpecError, match="not valid JSON"):
        parse_spec_text("[" * 100_000, format="json")


def test_deep_free_form_json_is_cut_with_a_warning() -> None:
    deep: Any = 1
    for _ in range(10_000):
        deep = {"a": deep}
    parsed = parse_spec({"spec": SPEC_VERSION, "model": {"extra_body": {"deep": deep, "top_k": 3}}})
    assert dict(parsed.spec.model.extra_body or {})["top_k"] == 3
    assert any("nested deeper" in w.message for w in parsed.warnings)


def test_a_cycle_is_refused_rather_than_walked() -> None:
    loop: dict[str, Any] = {"x": 1}
    loop["self"] = loop
    with pytest.raises(SpecError, match="appears twice"):
        parse_spec({"spec": SPEC_VERSION, "model": {"extra_body": loop}})


def test_a_huge_integer_is_out_of_range_and_never_printed_whole() -> None:
    parsed = parse_spec({"spec": SPEC_VERSION, "model": {"max_tokens": 10**5000}})
    assert parsed.spec.model.max_tokens is None
    assert len(parsed.warnings[0].message) < 200


def test_problem_paths_read_as_text() -> None:
    assert SpecProblem((), "x").where == "(document)"
    assert SpecProblem(("bundle", "mcp_servers", "my server", "env"), "x").where == (
        'bundle.mcp_servers."my server".env'
    )
    assert str(SpecProblem(("prompt", 2, "text"), "bad")) == "prompt[2].text: bad"


def test_the_spec_package_imports_nothing_that_does_io() -> None:
    allowed = {
        "__future__",
        "collections.abc",
        "dataclasses",
        "json",
        "math",
        "re",
        "tomllib",
        "types",
        "typing",
    }
    package = Path(spec_package.__file__).parent
    for source in package.glob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # within steadyloop: the spec itself, the errors, NO_KEY, the presets
                    assert node.module in (
                        None,
                        "_values",
                        "_reader",
                        "_parse",
                        "_layers",
                        "errors",
                        "wire.endpoints",
                        "providers",  # the presets a document may name: a table, read at import only
                    ), (
                        source.name,
                        node.module,
                    )
                    continue
                names = [node.module or ""]
            else:
                continue
            assert set(names) <= allowed, (source.name, names)


def test_the_constants_agree_with_the_runtime() -> None:
    from steadyloop.hooks import HookEvent
    from steadyloop.tools.definition import EFFECT_CLASSES
    from steadyloop.turn.capabilities import EFFORT_LADDER

    assert spec_package.EFFECT_CLASSES == EFFECT_CLASSES
    assert (*EFFORT_LADDER, "off") == spec_package.EFFORT_LEVELS
    assert set(spec_package.HOOK_EVENTS) == set(HookEvent.__args__)


def test_the_example_in_the_docs_reads_cleanly() -> None:
    docs = Path(__file__).parents[2] / "docs" / "spec.md"
    example = docs.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    parsed = parse_spec_text(example, bundle=True)
    assert parsed.warnings == ()
    assert parsed.spec.bundle is not None and parsed.spec.hooks is not None
