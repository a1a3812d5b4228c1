"""``steadyloop run`` against the real local llama-server: a real answer, exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.real_server
def test_run_answers_from_the_real_model(llama_base_url: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(STEADYLOOP_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "steadyloop.cli",
            "run",
            "--no-tools",
            "--base-url",
            llama_base_url,
            "--max-tokens",
            "40",
            "Say hello in five words.",
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
