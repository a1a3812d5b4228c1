"""``docs/llms.txt`` is what the code generates: a public name added, renamed or redocumented shows here."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import steadyloop as sl
from steadyloop._api_index import DEFAULT_OUTPUT, REGENERATE, generate, main


def test_the_checked_in_index_is_current() -> None:
    expected = generate()
    current = DEFAULT_OUTPUT.read_text(encoding="utf-8") if DEFAULT_OUTPUT.exists() else ""
    if current != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    current.splitlines(True), expected.splitlines(True), "checked in", "code"
                )
            )[:40]
        )
        raise AssertionError(f"docs/llms.txt is out of date; regenerate it with: {REGENERATE}\n{diff}")


def test_every_public_name_is_indexed_with_its_module() -> None:
    text = generate()
    for name in sl.__all__:
        if not name.startswith("__"):
            assert f"- `{name}" in text, name
    assert "## steadyloop.spec\n" in text
    assert "- `parse_spec(document: object, *, bundle: bool = False" in text
    assert "- `SPEC_VERSION = 'steadyloop.agent/1'`: The token a document opens with" in text
    assert " at 0x" not in text  # nothing that changes from run to run


def test_check_fails_on_drift_and_names_the_command(tmp_path: Path, capsys: object) -> None:
    stale = tmp_path / "llms.txt"
    stale.write_text("old\n")
    assert main(["--check", "--output", str(stale)]) == 1
    assert main(["--output", str(stale)]) == 0
    assert main(["--check", "--output", str(stale)]) == 0
    assert stale.read_text() == generate()


def test_the_command_runs_as_a_module(tmp_path: Path) -> None:
    out = tmp_path / "llms.txt"
    done = subprocess.run(
        [sys.executable, "-m", "steadyloop._api_index", "--output", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text() == generate()
