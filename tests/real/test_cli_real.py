"""``steadyloop run`` against the real local llama-server: a real answer, and the main job's question."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_server

ENTRIES = ("README.md", "notes.txt", "docs/", "todo.txt")


def _run(base_url: str, cwd: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(STEADYLOOP_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "steadyloop.cli", "run", "--base-url", base_url, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def test_run_answers_from_the_real_model(llama_base_url: str, tmp_path: Path) -> None:
    done = _run(
        llama_base_url, tmp_path, tmp_path, "--no-tools", "--max-tokens", "40", "Say hello in five words."
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_the_main_jobs_question_lists_the_folder(llama_base_url: str, tmp_path: Path) -> None:
    """The README's question, routed as the bundled model is: a list_dir call the server held to its schema,
    decided at temperature 0, and the folder's entries on screen whatever the model's wording."""
    folder = tmp_path / "project"
    (folder / "docs").mkdir(parents=True)
    for name in ENTRIES:
        if not name.endswith("/"):
            (folder / name).write_text(f"{name}\n")
    done = _run(llama_base_url, folder, tmp_path, "--tool-routing", "on", "What is in this folder?")
    assert done.returncode == 0, done.stderr
    listed = "✓ " + ", ".join(sorted(ENTRIES, key=lambda e: (not e.endswith("/"), e)))
    calls = [ln for ln in done.stderr.splitlines() if ln.startswith("⚙ list_dir(")]
    # The folder's own listing is on screen (the model may look into docs/ as well).
    assert any(ln.endswith(listed) for ln in calls), done.stderr
    assert done.stdout.strip(), "an answer follows the listing"
    assert "list_dir" not in done.stdout and '"name"' not in done.stdout
