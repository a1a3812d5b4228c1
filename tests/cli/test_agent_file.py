"""``--agent FILE``: run and chat as a spec document's agent, against the scripted server."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steadyloop.testing import Reply, ScriptedServer, stream_of

FIXTURE = Path(__file__).parents[1] / "tools" / "mcp_server_fixture.py"

AGENT = """
spec = "steadyloop.agent/1"
name = "reader"

[model]
name = "doc-model"
temperature = 0.2
extra_body = {{ top_k = 20 }}

[[prompt]]
id = "role"
text = "You read files and answer in one line."

[tools]
names = ["read_file"]
{extra}
"""


def agent_file(tmp_path: Path, extra: str = "", name: str = "agent.toml") -> str:
    path = tmp_path / name
    path.write_text(AGENT.format(extra=extra))
    return str(path)


def answer(text: str) -> Reply:
    return Reply.stream(stream_of(text=text))


def test_run_as_the_documents_agent(tmp_path: Path, piped: Callable[..., Any]) -> None:
    path = agent_file(tmp_path)
    with ScriptedServer.in_thread(answer("One line.")) as server:
        done = piped("run", "--agent", path, "--base-url", server.base_url, "what is here?")
        assert done.returncode == 0, done.stderr
        body = server.chat_requests[0].json
    assert done.stdout.strip() == "One line." and done.stderr == ""
    assert body["model"] == "doc-model" and body["temperature"] == 0.2 and body["top_k"] == 20
    assert body["messages"][0] == {"role": "system", "content": "You read files and answer in one line."}
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file"]


def test_flags_override_the_document(tmp_path: Path, piped: Callable[..., Any]) -> None:
    path = agent_file(tmp_path)
    with ScriptedServer.in_thread(answer("ok")) as server:
        done = piped(
            "run", "--agent", path, "--base-url", server.base_url, "-m", "flag-model",
            "--temperature", "0.9", "--system", "Flagged.", "--no-tools", "hi",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        body = server.chat_requests[0].json
    assert body["model"] == "flag-model" and body["temperature"] == 0.9
    assert body["messages"][0] == {"role": "system", "content": "Flagged."}
    assert "tools" not in body


def test_the_documents_endpoint_never_gets_the_operators_key(
    tmp_path: Path, piped: Callable[..., Any], env: dict[str, str]
) -> None:
    with ScriptedServer.in_thread(answer("first"), answer("second")) as server:
        path = agent_file(tmp_path, f'[endpoint]\nbase_url = "{server.base_url}"\n')
        env.update(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="operator-secret")
        elsewhere = piped("run", "--agent", path, "hi")
        env.update(OPENAI_BASE_URL=server.base_url)
        same = piped("run", "--agent", path, "hi")
        keys = [r.header("authorization") for r in server.chat_requests]
    assert elsewhere.returncode == 0 and same.returncode == 0, (elsewhere.stderr, same.stderr)
    assert keys == ["Bearer no-key", "Bearer operator-secret"]


def test_a_json_document_is_read_by_its_suffix(tmp_path: Path, piped: Callable[..., Any]) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"spec": "steadyloop.agent/1", "model": {"name": "json-model"}}))
    with ScriptedServer.in_thread(answer("ok")) as server:
        done = piped("run", "--agent", str(path), "--base-url", server.base_url, "hi")
        assert done.returncode == 0, done.stderr
        assert server.chat_requests[0].json["model"] == "json-model"


def test_a_refused_document_is_one_line_with_every_reason(tmp_path: Path, piped: Callable[..., Any]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('spec = "steadyloop.agent/3"\nrequires = ["warp"]\n')
    done = piped("run", "--agent", str(path), "--base-url", "http://127.0.0.1:9/v1", "-m", "m", "hi")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"steadyloop: error: {path}: agent document refused (2 problems): spec: version 3 is not 1, the one "
        "this host reads; requires[0]: requires 'warp', and this host does not honour it"
    )


def test_a_missing_file_is_one_line(tmp_path: Path, piped: Callable[..., Any]) -> None:
    done = piped("run", "--agent", str(tmp_path / "nope.toml"), "-m", "m", "hi")
    assert done.returncode == 1
    assert done.stderr.startswith(f"steadyloop: error: cannot read agent file {tmp_path / 'nope.toml'}")


def test_warnings_are_printed_and_the_run_goes_on(tmp_path: Path, piped: Callable[..., Any]) -> None:
    extra = '[loop]\nmax_turns = 0\n[bundle.mcp_servers.x]\ncommand = "x-mcp"\n'
    path = agent_file(tmp_path, extra)
    with ScriptedServer.in_thread(answer("ok")) as server:
        done = piped("run", "--agent", path, "--base-url", server.base_url, "hi")
    assert done.returncode == 0 and done.stdout.strip() == "ok"
    assert done.stderr.splitlines() == [
        f"steadyloop: warning: {path}: loop.max_turns: 0 is out of range (1 to 1000000); ignored",
        f"steadyloop: warning: {path}: bundle: bundled MCP servers are programs to run and this host did not "
        "allow them; ignored (pass --trust-bundle to run them)",
    ]


def test_a_trusted_bundle_runs_its_server_and_the_model_uses_it(
    tmp_path: Path, piped: Callable[..., Any]
) -> None:
    pytest.importorskip("mcp")
    extra = (
        f'servers = ["fixture"]\n[bundle.mcp_servers.fixture]\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(FIXTURE))}]\n"
    )
    path = agent_file(tmp_path, extra)
    call = Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": "echo", "arguments": {"text": "ping"}}]))
    with ScriptedServer.in_thread(call, answer("It said ping.")) as server:
        done = piped("run", "--agent", path, "--trust-bundle", "--base-url", server.base_url, "echo ping")
        assert done.returncode == 0, done.stderr
        declared = [t["function"]["name"] for t in server.chat_requests[0].json["tools"]]
        result = server.chat_requests[1].json["messages"][-1]
    assert {"echo", "add", "read_file"} <= set(declared) and "write_file" not in declared
    assert result == {"role": "tool", "tool_call_id": "c1", "content": "ping"}
    assert done.stdout.strip() == "It said ping."


def test_chat_as_the_documents_agent(tmp_path: Path, terminal: Callable[..., Any]) -> None:
    path = agent_file(tmp_path)
    with ScriptedServer.in_thread(answer("Chatting as the reader.")) as server:
        term = terminal("chat", "--agent", path, "--base-url", server.base_url)
        term.expect("› ")
        term.send("who are you?\n")
        term.expect("Chatting as the reader.")
        term.expect("› ")
        term.send("\x04")
        assert term.wait() == 0
        body = server.chat_requests[0].json
    assert body["model"] == "doc-model"
    assert body["messages"][0]["content"] == "You read files and answer in one line."


def test_a_hook_reads_a_file_onto_the_question(
    tmp_path: Path, piped: Callable[..., Any], workdir: Path
) -> None:
    (workdir / "CONVENTIONS.md").write_text("Tabs, never spaces.\n")
    extra = (
        '[[hooks]]\nid = "conventions"\nevent = "session_start"\ntool = "read_file"\n'
        'arguments = { path = "CONVENTIONS.md" }\n'
    )
    path = agent_file(tmp_path, extra)
    with ScriptedServer.in_thread(answer("Noted.")) as server:
        done = piped("run", "--agent", path, "--base-url", server.base_url, "how do I indent?")
        assert done.returncode == 0, done.stderr
        question = server.chat_requests[0].json["messages"][1]["content"]
    assert "Tabs, never spaces." in question and question.endswith("how do I indent?")


def test_the_documents_provider_and_failover_chain(
    tmp_path: Path, piped: Callable[..., Any], env: dict[str, str]
) -> None:
    # The first candidate refuses with a hop-worthy 503; the document's failover takes the turn over.
    extra = '\n[endpoint]\nprovider = "ollama"\nfailover = ["vllm:fallback-model"]\n'
    path = agent_file(tmp_path, extra)
    busy = Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, status=503)
    with (
        ScriptedServer.in_thread(busy, default_reply=busy) as first,
        ScriptedServer.in_thread(answer("From the fallback.")) as second,
    ):
        env["OLLAMA_BASE_URL"] = first.base_url
        env["VLLM_BASE_URL"] = second.base_url
        done = piped("run", "--agent", path, "what is here?")
        assert done.returncode == 0, done.stderr
        asked_first = first.chat_requests[0].json
        asked_second = second.chat_requests[0].json
    assert done.stdout.strip() == "From the fallback."
    assert asked_first["model"] == "doc-model" and asked_second["model"] == "fallback-model"


def test_an_unknown_provider_in_the_document_is_refused_at_load(
    tmp_path: Path, piped: Callable[..., Any]
) -> None:
    path = agent_file(tmp_path, '\n[endpoint]\nprovider = "nowhere"\n')
    done = piped("run", "--agent", path, "what is here?")
    assert done.returncode != 0
    assert "endpoint.provider" in done.stderr and "nowhere" in done.stderr
    assert "Traceback" not in done.stderr
