"""The CLI's conversation keeps its fold and its messages: one summary request per fold over a long chat
(counted at the server), the fold kept across a restart, a kill mid-prompt losing nothing shown, and
``--json`` lines numbered as the run emitted them."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steadyloop.context.compaction import SUMMARY_LEAD
from steadyloop.context.folding import SUMMARY_PROMPT
from steadyloop.testing import RecordedRequest, Reply, ScriptedServer, stream_of, text_chunks

from .conftest import PATIENCE

PROMPT = "› "
# A window the chat learns from the server, as from a llama.cpp server's /props.
WINDOW = {"default_generation_settings": {"n_ctx": 4000}}
LONG = " ".join(f"word{i}" for i in range(500))  # about 4,000 characters: a long answer


def is_summary(request: RecordedRequest) -> bool:
    messages = request.json["messages"]
    return bool(messages and messages[0]["content"] == SUMMARY_PROMPT)


def summaries_answered() -> Callable[[RecordedRequest], Any]:
    """Answers the summariser's side requests, whenever they come, with numbered notes."""
    numbers = itertools.count(1)

    def answer(request: RecordedRequest) -> Any:
        return Reply.stream(stream_of(f"NOTES-{next(numbers)}")) if is_summary(request) else None

    return answer


def notes_in(request: RecordedRequest) -> str | None:
    first = next((m for m in request.json["messages"] if m["role"] == "user"), None)
    if first is None or not str(first["content"]).startswith(SUMMARY_LEAD):
        return None
    return str(first["content"]).split("\n\n")[1]


def test_a_long_chat_makes_one_summary_request_per_fold(terminal: Callable[..., Any]) -> None:
    with ScriptedServer.in_thread(
        default_reply=Reply.stream(stream_of(LONG)), props=WINDOW, models=["m"], respond=summaries_answered()
    ) as server:
        term = terminal("chat", "--no-tools", "--base-url", server.base_url, "-m", "m")
        for n in range(9):
            term.expect(PROMPT)
            term.send(f"tell me more, part {n}\n")
            term.expect("word499")
        term.expect(PROMPT)
        term.send("/exit\n")
        assert term.wait() == 0
        # After a restart the stored fold is used as it was: no summary request for the next prompt.
        again = terminal("chat", "--no-tools", "--continue", "--base-url", server.base_url, "-m", "m")
        again.expect(r"resumed session ses_\w+ \(18 messages\)")
        again.send("and finally?\n")
        again.expect("word499")
        again.expect(PROMPT)
        again.send("/exit\n")
        assert again.wait() == 0
        requests = list(server.chat_requests)
    summaries = [r for r in requests if is_summary(r)]
    answers = [r for r in requests if not is_summary(r)]
    assert len(answers) == 10
    assert 2 <= len(summaries) <= 4, f"{len(summaries)} summary requests over 10 prompts"
    # Each summary request made one fold, which every later request carries until the next: the notes in
    # force change exactly as often as a summary was asked for.
    in_force = [notes_in(r) for r in answers]
    changes = [b for a, b in itertools.pairwise([None, *in_force]) if b != a]
    assert changes == [f"NOTES-{n}" for n in range(1, len(summaries) + 1)]
    # Every fold after the first continues the notes before it.
    for n, request in enumerate(summaries[1:], start=1):
        assert request.json["messages"][1]["content"].startswith(f"Earlier notes, to continue:\n\nNOTES-{n}")
    # Between folds, each request starts with the one before it: the prompt cache is lost once per fold.
    for earlier, later in itertools.pairwise(answers):
        if notes_in(earlier) == notes_in(later):
            assert later.json["messages"][: len(earlier.json["messages"])] == earlier.json["messages"]
    assert in_force[-1] == in_force[-2]  # the restarted chat used the stored fold


def test_a_kill_mid_prompt_keeps_the_question_in_the_session(
    scripted: Callable[[Any], str], env: dict[str, str], workdir: Path
) -> None:
    stalled = {"type": "stream", "chunks": text_chunks("Partial answer"), "stall_after": 2}
    url = scripted([stalled])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "steadyloop.cli",
            "run",
            "--no-tools",
            "--base-url",
            url,
            "-m",
            "m",
            "remember me",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=workdir,
    )
    try:
        assert proc.stdout is not None
        shown = b""
        while b"Partial" not in shown:
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, "the command ended before streaming"
            shown += chunk
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    listed = subprocess.run(
        [sys.executable, "-m", "steadyloop.cli", "sessions", "list"],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=PATIENCE,
    )
    assert "remember me" in listed.stdout, listed.stdout + listed.stderr
    found = re.search(r"ses_\w+", listed.stdout)
    assert found is not None
    session_id = found.group(0)
    exported = subprocess.run(
        [sys.executable, "-m", "steadyloop.cli", "sessions", "export", session_id],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=PATIENCE,
    )
    lines = [json.loads(line) for line in exported.stdout.splitlines() if line.strip()]
    messages = [line["message"] for line in lines if line["kind"] == "message"]
    assert messages == [{"role": "user", "content": "remember me"}]


def test_json_lines_carry_the_runs_seq_in_order(
    scripted: Callable[[Any], str], env: dict[str, str], workdir: Path
) -> None:
    url = scripted([{"type": "stream", "text": "numbered"}])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "steadyloop.cli",
            "run",
            "--json",
            "--no-tools",
            "--base-url",
            url,
            "-m",
            "m",
            "hi",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        timeout=PATIENCE,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["run_id"] for e in events}) == 1
