"""``steadyloop sessions``, ``models``, ``local`` and ``--version``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steadyloop import __version__
from steadyloop.cli.config import DEFAULT_LOCAL_IDLE, local_idle
from steadyloop.errors import InvalidInput


def test_sessions_list_show_export_delete(scripted: Callable[[Any], str], piped: Callable[..., Any]) -> None:
    url = scripted([{"type": "stream", "text": "Noted."}])
    assert piped("run", "--base-url", url, "-m", "m", "remember the milk").returncode == 0
    listing = piped("sessions", "list")
    assert listing.returncode == 0
    assert "remember the milk" in listing.stdout
    session_id = listing.stdout.split()[0]
    shown = piped("sessions", "show", session_id)
    assert "user: remember the milk" in shown.stdout and "assistant: Noted." in shown.stdout
    exported = [json.loads(line) for line in piped("sessions", "export", session_id).stdout.splitlines()]
    assert len(exported) >= 3
    assert piped("sessions", "delete", session_id).stdout.strip() == f"deleted {session_id}"
    missing = piped("sessions", "show", session_id)
    assert missing.returncode == 1 and missing.stderr.startswith("steadyloop: error: no session")


def test_a_run_that_ended_without_an_answer_is_marked_in_the_listing(
    scripted: Callable[[Any], str], piped: Callable[..., Any]
) -> None:
    refused = {"type": "json", "status": 401, "body": {"error": {"message": "bad key"}}}
    url = scripted([refused, {"type": "stream", "text": "Noted."}])
    assert piped("run", "--base-url", url, "-m", "m", "what is here?").returncode == 1
    assert piped("run", "--base-url", url, "-m", "m", "remember the milk").returncode == 0
    rows = piped("sessions", "list").stdout.splitlines()
    failed = next(row for row in rows if "what is here?" in row)
    answered = next(row for row in rows if "remember the milk" in row)
    assert "1 msgs  [failed] what is here?" in failed
    assert "[" not in answered
    shown = piped("sessions", "show", failed.split()[0]).stdout
    assert "the last run ended without an answer (error): " in shown and "bad key" in shown


def test_models_lists_what_the_endpoint_serves(
    scripted: Callable[[Any], str], piped: Callable[..., Any]
) -> None:
    url = scripted({"replies": [], "models": ["alpha", {"id": "beta", "meta": {"n_ctx_train": 32768}}]})
    done = piped("models", "--base-url", url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("alpha") and lines[1].startswith("beta")


def test_model_is_discovered_when_not_named(
    scripted: Callable[[Any], str], piped: Callable[..., Any]
) -> None:
    url = scripted({"replies": [{"type": "stream", "text": "found it"}], "models": ["only-one"]})
    done = piped("run", "--json", "--base-url", url, "hi")
    assert done.returncode == 0, done.stderr


def test_version(piped: Callable[..., Any]) -> None:
    assert piped("--version").stdout.strip() == f"steadyloop {__version__}"


def test_unknown_endpoint_name_is_one_line(piped: Callable[..., Any]) -> None:
    done = piped("run", "-e", "nowhere", "hi")
    assert done.returncode == 1
    assert done.stderr.startswith("steadyloop: error: no endpoint named 'nowhere'")


def test_local_idle_comes_from_the_environment() -> None:
    assert local_idle({}) == DEFAULT_LOCAL_IDLE == 900.0
    assert local_idle({"STEADYLOOP_LOCAL_IDLE": " 30 "}) == 30.0
    assert local_idle({"STEADYLOOP_LOCAL_IDLE": "0"}) == 0.0
    for bad in ("soon", "-5", "nan", "inf"):
        with pytest.raises(InvalidInput, match="STEADYLOOP_LOCAL_IDLE"):
            local_idle({"STEADYLOOP_LOCAL_IDLE": bad})


def test_local_options_go_with_their_action(
    piped: Callable[..., Any], env: dict[str, str], tmp_path: Path
) -> None:
    env["STEADYLOOP_LLM_HOME"] = str(tmp_path / "llm")  # never the shared cache's servers
    for args, wrong in (
        (("local", "status", "--all"), "--all goes with"),
        (("local", "up", "--all"), "--all goes with"),
        (("local", "status", "--port", "5"), "--port goes with"),
        (("local", "down", "--idle", "5"), "--idle goes with"),
        (("local", "down", "--ctx", "512"), "--ctx goes with"),
        (("local", "status", "--template", "stock"), "--template goes with"),
    ):
        done = piped(*args)
        assert done.returncode == 1 and done.stderr.startswith(f"steadyloop: error: {wrong}"), done.stderr
    done = piped("local", "up", "--idle", "-1")  # refused by argparse, before anything starts
    assert done.returncode == 2 and "argument --idle: must be a finite number of seconds" in done.stderr
    assert piped("local", "down", "--port", "5", "--all").returncode == 2  # argparse: not both
    done = piped("local", "down")
    assert done.returncode == 0 and "no local model started by steadyloop is running" in done.stderr
    assert "no local model running" in piped("local", "status").stdout
