"""Asked how to run a project's tests, the command first reads the file that says so, not a README that
does not: tox.ini, a contributing guide, a development page of the docs, pyproject.toml's pytest table."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.how_tested import asks_how_to_test, tells_how_to_test, where_tests_may_be_told
from steadyloop.cli.kit import _file_tool_routing, told_how_to_test

from ..edges._edges import LINEAR_BOUND, growth


@pytest.mark.parametrize(
    ("request_text", "asks"),
    [
        ("How do I run the tests of this project?", True),
        ("how to run the tests", True),
        ("How can I run its test suite?", True),
        ("How should we test this project?", True),
        ("How do I run the unit tests?", True),
        ("What do the tests cover?", False),  # not how
        ("How do I install this project?", False),  # not the tests
        ("How do I test for a blood type?", False),
        ("Run the tests.", False),
    ],
)
def test_a_request_asks_how_to_run_the_tests(request_text: str, asks: bool) -> None:
    assert asks_how_to_test(request_text) is asks


def test_the_files_that_may_say_how_come_readme_first_then_guides_then_runners() -> None:
    files = [
        "setup.cfg",
        "tox.ini",
        "pyproject.toml",
        "README.rst",
        "docs/index.rst",
        "docs/development/getting-started.rst",
        "CONTRIBUTING.rst",
        "src/pkg/tox.ini",  # not the project's own
        "noxfile.py",
    ]
    assert where_tests_may_be_told(files) == [
        "README.rst",
        "CONTRIBUTING.rst",
        "docs/development/getting-started.rst",
        "tox.ini",
        "noxfile.py",
        "pyproject.toml",
        "setup.cfg",
    ]


@pytest.mark.parametrize(
    ("path", "text", "tells"),
    [
        ("README.md", "## Tests\n\n```\n$ pytest -q\n```\n", True),
        ("README.md", "Run the tests with `make check`.\n", True),  # a code span
        ("README.md", "Tox runs the tests here.\n", False),  # a name in passing
        ("README.md", "`tox -e py312`\n", True),
        (
            "README.rst",
            "This is the core framework used by the `pytest`_, `tox`_, and `devpi`_ projects.\n",
            False,
        ),
        ("README.md", "    python -m pytest tests/\n", True),
        (
            "README.rst",
            "``pluggy`` is part of the ``pytest-dev`` project, see the `pytest collective`_.\n",
            False,
        ),
        ("README.md", "    npm run test\n", True),
        ("README.md", "bash scripts/test\n", True),
        ("CONTRIBUTING.rst", "Run the tests::\n\n    $ pytest\n", True),
        ("CONTRIBUTING.md", "Open an issue first.\n", False),
        ("tox.ini", "[tox]\n", True),
        ("noxfile.py", "import nox\n", True),
        ("Makefile", "build:\n\tgo build\ntest:\n\tgo test ./...\n", True),
        ("Makefile", "build:\n\tgo build\n", False),
        ("package.json", '{"scripts": {"test": "vitest"}}', True),
        ("package.json", '{"scripts": {"build": "vite build"}}', False),
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n", True),
        ("pyproject.toml", "[project]\nname = 'x'\n", False),
        ("setup.cfg", "[tool:pytest]\ntestpaths = tests\n", True),
        ("setup.cfg", "[metadata]\nname = x\n", False),
    ],
)
def test_a_file_tells_how_the_tests_run(path: str, text: str, tells: bool) -> None:
    assert tells_how_to_test(path, text) is tells


def _click_like(root: Path) -> None:
    (root / "README.rst").write_text("Click\n=====\n\nA package for command line interfaces.\n")
    (root / "tox.ini").write_text("[testenv]\ncommands = pytest -v {posargs}\n")
    (root / "setup.cfg").write_text("[tool:pytest]\ntestpaths = tests\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_basic.py").write_text("def test_it():\n    pass\n")


def test_the_first_file_that_tells_is_the_one_read(tmp_path: Path) -> None:
    _click_like(tmp_path)
    files = ["README.rst", "setup.cfg", "tests/test_basic.py", "tox.ini"]
    assert told_how_to_test(tmp_path, files) == ["tox.ini"]
    (tmp_path / "README.rst").write_text("Tests\n-----\n\n::\n\n    $ pytest\n")
    assert told_how_to_test(tmp_path, files) == ["README.rst"]
    assert told_how_to_test(tmp_path, ["tests/test_basic.py"]) == []


def test_the_command_reads_the_file_that_tells_before_a_readme_that_does_not(tmp_path: Path) -> None:
    _click_like(tmp_path)
    named_in_files = _file_tool_routing(tmp_path).named_in_files
    assert named_in_files is not None
    assert named_in_files("How do I run the tests of this project?") == ["tox.ini"]
    # Another how-to question about the project still reads the README.
    assert named_in_files("How can I install this project?") == ["README.rst"]


@given(st.text(max_size=300), st.lists(st.text(max_size=40), max_size=12))
def test_reading_where_tests_are_told_is_total(text: str, files: list[str]) -> None:
    asks_how_to_test(text)
    found = where_tests_may_be_told(files)
    assert all(p in files for p in found)
    for path in [*files, "tox.ini", "Makefile", "package.json", "pyproject.toml", "setup.cfg", "README.md"]:
        tells_how_to_test(path, text)


def test_reading_where_tests_are_told_is_linear() -> None:
    assert growth(lambda n: asks_how_to_test("how do I " * n + "run"), 5_000) < LINEAR_BOUND
    assert growth(lambda n: tells_how_to_test("README.md", " >" * n + "\n"), 5_000) < LINEAR_BOUND
    assert growth(lambda n: tells_how_to_test("Makefile", "test" * n + "\n"), 5_000) < LINEAR_BOUND
    many = [f"docs/develop{i}/x.rst" for i in range(50)]
    assert growth(lambda n: where_tests_may_be_told(many * n), 100) < LINEAR_BOUND
