"""``steadyloop run``, driven as a person and as a script would drive it, against the scripted server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steadyloop.testing import Reply, ScriptedServer, stream_of


def answer(text: str) -> dict[str, Any]:
    return {"type": "stream", "text": text}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "stream", "tool_calls": [{"id": "call_1", "name": name, "arguments": arguments}]}


def test_one_shot_answer_streams_to_the_terminal(
    scripted: Callable[[Any], str], terminal: Callable[..., Any]
) -> None:
    url = scripted([answer("Hello from the script!")])
    term = terminal("run", "--base-url", url, "-m", "m", "hi")
    term.expect("Hello from the script!")
    assert term.wait() == 0


def test_shorthand_without_the_run_command(scripted: Callable[[Any], str], piped: Callable[..., Any]) -> None:
    url = scripted([answer("short and sweet")])
    done = piped("--base-url", url, "-m", "m", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "short and sweet"


def test_json_prints_every_event_as_a_line(scripted: Callable[[Any], str], piped: Callable[..., Any]) -> None:
    url = scripted([answer("in json")])
    done = piped("run", "--json", "--base-url", url, "-m", "m", "hi")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "agent_start"
    assert events[-1]["type"] == "agent_end" and events[-1]["outcome"] == "completed"
    assert "".join(e["delta"] for e in events if e["type"] == "message_update") == "in json"


def test_piped_stdin_is_the_prompt_after_the_argument(piped: Callable[..., Any]) -> None:
    with ScriptedServer.in_thread(Reply.stream(stream_of(text="summarised"))) as server:
        done = piped(
            "run", "--base-url", server.base_url, "-m", "m", "Summarise this:", stdin="line one\nline two\n"
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "summarised"
        messages = server.chat_requests[0].json["messages"]
    assert messages[-1] == {"role": "user", "content": "Summarise this:\n\nline one\nline two"}


def test_approved_write_runs_in_the_working_directory(
    scripted: Callable[[Any], str], terminal: Callable[..., Any], workdir: Path
) -> None:
    url = scripted([call("write_file", path="notes/out.txt", content="written"), answer("File written.")])
    term = terminal("run", "--base-url", url, "-m", "m", "write the file")
    term.expect(r"Allow write_file\(path='notes/out.txt', content='written'\)\? \[y/N\]")
    term.send("y\n")
    term.expect(r"✓ wrote 7 bytes to notes/out.txt")
    term.expect("File written.")
    assert term.wait() == 0
    assert (workdir / "notes" / "out.txt").read_text() == "written"


def test_refused_write_is_denied_and_the_model_is_told(
    env: dict[str, str], terminal: Callable[..., Any], workdir: Path
) -> None:
    script = [
        Reply.stream(
            stream_of(tool_calls=[{"id": "call_1", "name": "run_shell", "arguments": {"command": "touch x"}}])
        ),
        Reply.stream(stream_of(text="Understood, not running it.")),
    ]
    with ScriptedServer.in_thread(*script) as server:
        term = terminal("run", "--base-url", server.base_url, "-m", "m", "make x")
        term.expect(r"Allow run_shell\(command='touch x'\)\? \[y/N\]")
        term.send("n\n")
        term.expect("not run: you said no")
        term.expect("Understood, not running it.")
        assert term.wait() == 0
        told = server.chat_requests[1].json["messages"][-1]
    assert not (workdir / "x").exists()
    assert told["role"] == "tool" and "denied" in json.dumps(told).lower()


def test_no_terminal_means_gated_tools_are_denied(
    scripted: Callable[[Any], str], piped: Callable[..., Any], workdir: Path
) -> None:
    url = scripted([call("write_file", path="x.txt", content="no"), answer("ok")])
    done = piped("run", "--base-url", url, "-m", "m", "write it")
    assert done.returncode == 0, done.stderr
    assert not (workdir / "x.txt").exists()


def test_read_tools_run_without_asking(
    scripted: Callable[[Any], str], terminal: Callable[..., Any], workdir: Path
) -> None:
    (workdir / "a.txt").write_text("one\ntwo\nthree\n")
    url = scripted([call("read_file", path="a.txt"), answer("It has three lines.")])
    term = terminal("run", "--base-url", url, "-m", "m", "read a.txt")
    term.expect(r"⚙ read_file\(path='a.txt'\) … ✓ 3 lines")
    term.expect("It has three lines.")
    assert term.wait() == 0


def test_continue_sends_the_previous_exchange(piped: Callable[..., Any]) -> None:
    replies = [Reply.stream(stream_of(text="Paris.")), Reply.stream(stream_of(text="About two million."))]
    with ScriptedServer.in_thread(*replies) as server:
        first = piped("run", "--no-tools", "--base-url", server.base_url, "-m", "m", "Capital of France?")
        second = piped(
            "run", "--no-tools", "--continue", "--base-url", server.base_url, "-m", "m", "Population?"
        )
        assert (first.returncode, second.returncode) == (0, 0), second.stderr
        sent = server.chat_requests[1].json["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
        ("user", "Population?"),
    ]


def test_missing_endpoint_is_one_helpful_line(piped: Callable[..., Any]) -> None:
    done = piped("run", "--base-url", "http://127.0.0.1:9/v1", "hi")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("steadyloop: error: ") and "127.0.0.1:9" in lines[0]
    assert "nothing listens on 127.0.0.1:9 — start the server or check --base-url" in lines[0]


def test_output_schema_prints_the_object(
    scripted: Callable[[Any], str], piped: Callable[..., Any], workdir: Path
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    (workdir / "schema.json").write_text(json.dumps(schema))
    # An answer off the schema goes back to the model with the problem, a bounded number of times.
    url = scripted(
        [answer('{"name": "Ada"}'), answer('{"name": "Ada", "age": 36}')] + [answer("not json at all")] * 3
    )
    done = piped("run", "--output-schema", "schema.json", "--base-url", url, "-m", "m", "who?")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "Ada", "age": 36}
    bad = piped("run", "--output-schema", "schema.json", "--base-url", url, "-m", "m", "who?")
    assert bad.returncode == 1
    assert bad.stderr.startswith("steadyloop: error: the answer does not match the response schema")
    assert "not valid JSON" in bad.stderr


def test_an_oversized_image_is_refused_before_sending(piped: Callable[..., Any], workdir: Path) -> None:
    (workdir / "big.png").write_bytes(b"\0" * (5 * 1024 * 1024 + 1))
    done = piped("run", "--image", "big.png", "--base-url", "http://127.0.0.1:9/v1", "-m", "m", "look")
    assert done.returncode == 1
    assert "capped at 5 MB" in done.stderr


WRITTEN_CALL = '```json\n{"name": "list_dir", "arguments": {"path": "."}}\n```'


def test_a_call_written_as_text_is_never_printed_as_the_answer_when_piped(
    scripted: Callable[[Any], str], piped: Callable[..., Any], workdir: Path
) -> None:
    (workdir / "notes.txt").write_text("hi\n")
    url = scripted([answer(WRITTEN_CALL), answer("The folder holds notes.txt.")])
    done = piped("run", "--base-url", url, "-m", "m", "What is in this folder?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The folder holds notes.txt."
    assert "recovered 1 tool call" in done.stderr  # a notice, on stderr though it is no terminal
    assert "list_dir(path='.')" in done.stderr


def test_a_call_written_as_text_is_never_shown_in_a_terminal(
    scripted: Callable[[Any], str], terminal: Callable[..., Any], workdir: Path
) -> None:
    # Words before a fenced call make it an example; the format's own markers make it a call wherever it is.
    tagged = '<tool_call>{"name": "list_dir", "arguments": {"path": "."}}</tool_call>'
    url = scripted([answer("Let me look.\n" + tagged), answer("Nothing much is here.")])
    term = terminal("run", "--base-url", url, "-m", "m", "What is in this folder?")
    term.expect(r"⚙ list_dir\(path='.'\)")
    term.expect("Nothing much is here.")
    assert term.wait() == 0
    assert "Let me look." in term.output and '"name"' not in term.output


def test_quiet_keeps_stderr_for_errors_only(
    scripted: Callable[[Any], str], piped: Callable[..., Any]
) -> None:
    url = scripted([answer(WRITTEN_CALL), answer("Done.")])
    done = piped("run", "--quiet", "--base-url", url, "-m", "m", "look")
    assert done.returncode == 0
    assert done.stdout.strip() == "Done."
    assert "recovered" not in done.stderr and "·" not in done.stderr


def test_a_slow_first_token_says_the_model_is_reading_the_prompt(piped: Callable[..., Any]) -> None:
    slow = Reply.stream(stream_of(text="Here."), first_delay=3.5)
    with ScriptedServer.in_thread(slow) as server:
        done = piped("run", "--no-tools", "--base-url", server.base_url, "-m", "m", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Here."
    assert done.stderr.count("the model is reading the prompt") == 1


def test_a_denial_without_a_terminal_reads_as_one_sentence(
    scripted: Callable[[Any], str], piped: Callable[..., Any]
) -> None:
    url = scripted([call("write_file", path="x.txt", content="no"), answer("ok")])
    done = piped("run", "--base-url", url, "-m", "m", "write it")
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if "write_file" in ln]
    assert line.endswith("✗ not run: it needs your approval and there is no terminal to ask (run it in one)")


def test_an_mcp_server_that_fails_its_handshake_shows_its_own_stderr(
    scripted: Callable[[Any], str], piped: Callable[..., Any]
) -> None:
    url = scripted([answer("unused")])
    broken = "python3 -c \"import sys; sys.stderr.write('config error: no API token set\\n'); sys.exit(3)\""
    done = piped("run", "--base-url", url, "-m", "m", "--mcp", broken, "hi")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0].startswith("steadyloop: error: ")
    assert "  | config error: no API token set" in lines


def test_a_short_listing_is_shown_whole_on_the_tool_line() -> None:
    from steadyloop.cli.render import result_summary

    assert result_summary("README.md\ndocs/\nnotes.txt\n") == "README.md, docs/, notes.txt"
    hidden = "- docs/ (folder)\n- README.md\n(and 2 hidden, named with a leading dot)"
    assert result_summary(hidden) == "docs/, README.md (and 2 hidden, named with a leading dot)"
    assert result_summary("     1  one\n     2  two\n") == "2 lines"  # a file's lines are no listing
    assert result_summary("\n".join(f"file{i}.txt" for i in range(40))) == "40 lines"
    assert result_summary("") == "done" and result_summary("wrote 5 bytes") == "wrote 5 bytes"


def test_api_anthropic_runs_against_a_messages_endpoint(piped: Callable[..., Any]) -> None:
    from steadyloop.testing.provider_streams import sse_reply

    capture = Path(__file__).parent.parent / "data" / "providers" / "anthropic" / "01-text.sse"
    with ScriptedServer.in_thread(sse_reply(capture.read_bytes())) as server:
        done = piped(
            "run", "--api", "anthropic", "--base-url", server.base_url, "-m", "claude-sonnet-4-5", "hi"
        )
        assert done.returncode == 0, done.stderr
        request = server.chat_requests[0]
    assert request.path == "/v1/messages"
    assert request.json["messages"][-1]["content"][0]["text"] == "hi"
    text = "".join(
        json.loads(line[6:])["delta"]["text"]
        for line in capture.read_text().splitlines()
        if line.startswith("data: ") and '"text_delta"' in line
    )
    assert done.stdout.strip() == text.strip()


def test_output_schema_falls_back_to_the_prompt_where_response_format_is_refused(
    piped: Callable[..., Any], workdir: Path
) -> None:
    # A server that takes no json_schema response_format, in its recorded words (ik_llama.cpp, in
    # tests/data/error_bodies/llamacpp.json): the schema goes in the prompt and the answer is still checked.
    bodies = json.loads(
        (Path(__file__).parent.parent / "data" / "error_bodies" / "llamacpp.json").read_text()
    )
    refusal = next(r for r in bodies if r["source"] == "https://github.com/ikawrakow/ik_llama.cpp/issues/778")
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    (workdir / "schema.json").write_text(json.dumps(schema))
    replies = (
        Reply.json(refusal["body"], status=refusal["status"]),
        Reply.stream(stream_of('{"name": "Ada"}')),
    )
    with ScriptedServer.in_thread(*replies) as server:
        done = piped(
            "run", "--output-schema", "schema.json", "--base-url", server.base_url, "-m", "m", "who?"
        )
        sent = [r.json for r in server.chat_requests]
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "Ada"}
    assert "response_format" not in sent[1]
    assert "Answer with one JSON value matching this JSON Schema" in sent[1]["messages"][0]["content"]
