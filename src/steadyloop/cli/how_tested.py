"""Which of a project's files says how its tests are run; sans I/O.

Asked "How do I run the tests of this project?" in click's source, the command read README.rst (a
question of how to do something with the project is first a read of its README), which says nothing of
tests; the 1.5B model's answer named a command from nowhere, and sent back, came out as the README's
opening. Of nine published projects' sources (bench/real_projects.py), no README says how to run the
tests: tox.ini, noxfile.py, a CONTRIBUTING file, a development page of the docs or pyproject.toml's pytest
table does. :func:`where_tests_may_be_told` orders the files that may say it, best first, and
:func:`tells_how_to_test` reads whether one does; the command reads each candidate's head in turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["asks_how_to_test", "tells_how_to_test", "where_tests_may_be_told"]

# "How do I run the tests?", "how can we test this project", "How to run the test suite": asked how, of
# the project's tests.
_HOW_TESTS = re.compile(
    r"\bhow\s+(?:do|can|should|would|could|to)\b.{0,40}?"
    r"(?:\b(?:the|its|our|my|this|these)\s+(?:tests?|test\s+suite|unit\s+tests|specs?)\b"
    r"|\btest\s+(?:this|the|our|my|it)\b)",
    re.IGNORECASE,
)
_README = re.compile(r"readme(?:\.[a-z]+)?", re.IGNORECASE)
_CONTRIBUTING = re.compile(r"(?:\.github/|docs?/)?contributing(?:\.[a-z]+)?", re.IGNORECASE)
# A page of the docs for those who work on the project: docs/development/getting-started.rst,
# docs/contributing.md, docs/hacking.rst.
_DEVELOPMENT_DOC = re.compile(
    r"docs?/(?:[\w.-]+/)?(?:[\w.-]*(?:contribut|develop|hacking)[\w.-]*)(?:/[\w.-]+)?\.(?:md|rst|txt)",
    re.IGNORECASE,
)
# Files that exist to run the tests, or that hold the runner's configuration, in the order they are read.
_RUNNER_FILES = (
    "tox.ini",
    "noxfile.py",
    "Makefile",
    "makefile",
    "justfile",
    "package.json",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
)
_RUNNER_ALWAYS = frozenset({"tox.ini", "noxfile.py", "pytest.ini"})
# A command that runs the tests, as a README or a contributing guide writes one: at a line's start (after a
# prompt) or in a code span ("Run the tests with `make check`."). A name in passing runs nothing: "This is
# the core framework used by the `pytest`_, `tox`_ and `devpi`_ projects.", "part of the ``pytest-dev``
# project, see the `pytest collective`_" (pluggy's README; `x`_ is a link in reStructuredText).
_TEST_COMMAND = re.compile(
    r"(?:^[ \t>*-]*(?:\$[ \t]*|::[ \t]*)?|`+)(?:python3?[ \t]+-m[ \t]+)?"
    r"(?:pytest|py\.test|tox|nox|hatch[ \t]+(?:run[ \t]+)?test|make[ \t]+(?:test|check)"
    r"|(?:npm|yarn|pnpm)[ \t]+(?:run[ \t]+)?test|cargo[ \t]+test|go[ \t]+test|bash[ \t]+\S*test"
    r"|\./\S*test|unittest|scripts/test)(?![-\w])(?![^`\n]*`_)",
    re.MULTILINE,  # written in lower case, as typed: "Tox runs the tests here." is prose
)
_CONFIG_SAYS = {
    "Makefile": re.compile(r"^(?:test|tests|check)[\w-]*[ \t]*:", re.MULTILINE),
    "makefile": re.compile(r"^(?:test|tests|check)[\w-]*[ \t]*:", re.MULTILINE),
    "justfile": re.compile(r"^(?:test|tests|check)[\w-]*\b[^\n:]*:", re.MULTILINE),
    "package.json": re.compile(r"\"test\"[ \t]*:"),
    "pyproject.toml": re.compile(r"^[ \t]*\[tool\.(?:pytest|tox|nox|hatch\.envs\.[\w-]*test)", re.MULTILINE),
    "setup.cfg": re.compile(r"^[ \t]*\[tool:pytest\]", re.MULTILINE),
}


def asks_how_to_test(request: str) -> bool:
    """Whether ``request`` asks how to run the project's tests. Linear in the request (the gap between
    "how" and the tests is bounded)."""
    return _HOW_TESTS.search(request) is not None


def where_tests_may_be_told(files: Iterable[str]) -> list[str]:
    """The files of ``files`` (paths relative to the project, ``/``-separated) that may say how its tests
    are run, best first: the README, a contributing guide, a development page of the docs, then the test
    runners' own files. Linear in the listing."""
    paths = list(files)
    readmes = [p for p in paths if _README.fullmatch(p)][:1]
    guides = sorted(p for p in paths if _CONTRIBUTING.fullmatch(p))
    pages = sorted(p for p in paths if _DEVELOPMENT_DOC.fullmatch(p))
    present = set(paths)
    runners = [name for name in _RUNNER_FILES if name in present]
    return [*readmes, *guides, *pages, *runners]


def tells_how_to_test(path: str, text: str) -> bool:
    """Whether ``text``, the head of the file at ``path``, says how the tests are run: a line of prose
    files that runs them, a runner's own file, a ``test`` target or script, or the runner's table in a
    project file. Linear in the text."""
    name = path.rsplit("/", 1)[-1]
    if name in _RUNNER_ALWAYS:
        return True
    says = _CONFIG_SAYS.get(name)
    if says is not None:
        return says.search(text) is not None
    return _TEST_COMMAND.search(text) is not None
