"""bench/newcomer.py: the made-up folder holds what its questions rely on, and the grading tells a right
answer from the wrong ones people actually got (the match cap read as a count, a smaller file named)."""

from __future__ import annotations

from pathlib import Path

import pytest

from steadyloop import ToolContext
from steadyloop.cli.tools import default_tools

from ._bench import load

newcomer = load("newcomer")
BY_KEY = {q.key: q for q in newcomer.QUESTIONS}


def _answer(key: str, text: str, error: str = "") -> bool:
    question = BY_KEY[key]
    return bool(newcomer.grade(question, newcomer.Answer(key, question.half, answer=text, error=error)))


def test_the_halves_hold_eight_and_seven_questions_and_keys_are_unique() -> None:
    halves = [q.half for q in newcomer.QUESTIONS]
    assert halves.count("tuning") == 8 and halves.count("held-out") == 7
    assert len(BY_KEY) == len(newcomer.QUESTIONS)
    assert len({q.text for q in newcomer.QUESTIONS}) == len(newcomer.QUESTIONS)


def test_the_folder_holds_what_the_questions_ask_about(tmp_path: Path) -> None:
    newcomer.make_folder(tmp_path)
    sizes = {p.relative_to(tmp_path).as_posix(): p.stat().st_size for p in tmp_path.rglob("*.py")}
    in_src = {k: v for k, v in sizes.items() if k.startswith("src/inkwell/")}
    in_tests = {k: v for k, v in sizes.items() if k.startswith("tests/")}
    assert max(in_src, key=in_src.__getitem__) == "src/inkwell/render.py"
    assert max(in_tests, key=in_tests.__getitem__) == "tests/test_render.py"
    assert len(list((tmp_path / "docs").iterdir())) == 7
    in_docs = {p.name: p.stat().st_size for p in (tmp_path / "docs").iterdir()}
    assert max(in_docs, key=in_docs.__getitem__) == "deploy.md"
    assert sorted(in_docs.values())[-1] > 2 * sorted(in_docs.values())[-2]
    assert len(list((tmp_path / "src/inkwell").glob("*.py"))) == 5
    assert 'title = "Field notes"' in (tmp_path / "config/site.toml").read_text()
    assert "width=72" in (tmp_path / "src/inkwell/render.py").read_text()
    # The README is longer than the bundled model's 4,096-token window, as the README was.
    assert len((tmp_path / "README.md").read_text()) // 4 > 4096
    assert "max_workers=6" in (tmp_path / "src/inkwell/build.py").read_text()
    assert "port = 8043" in (tmp_path / "config/site.toml").read_text()
    held = {p.name: len(list(p.iterdir())) for p in tmp_path.iterdir() if p.is_dir()}
    assert max(held, key=held.__getitem__) == "docs" and sorted(held.values())[-2] < held["docs"]


async def test_the_command_s_listing_can_answer_the_size_questions(tmp_path: Path) -> None:
    """The largest-file questions are answerable with the command's own tools: a listing sorted by size
    names the largest file first."""
    newcomer.make_folder(tmp_path)
    list_dir = {t.name: t for t in default_tools(tmp_path)}["list_dir"]
    for folder, largest, smaller in (
        ("src/inkwell", "render.py", "build.py"),
        ("tests", "test_render.py", "test_build.py"),
        ("docs", "deploy.md", "install.md"),
    ):
        listing = await list_dir.execute({"path": folder, "sort": "size"}, ToolContext("c1", "list_dir"))
        assert isinstance(listing, str)
        assert listing.index(largest) < listing.index(smaller), listing


@pytest.mark.parametrize(
    ("key", "text", "right"),
    [
        ("folder", "Here: README.md, pyproject.toml, src/, docs/, config/ and tests/.", True),
        ("folder", "Here: README.md, src/ and docs/.", False),
        ("readme", "Inkwell turns Markdown notes into a static website.", True),
        ("readme", "It is a project with a README.", False),
        ("largest", "The largest is src/inkwell/render.py (2 KB), then build.py.", True),
        ("largest", "The largest file is build.py; render.py is smaller.", False),
        ("defined", "slugify is defined in src/inkwell/text.py.", True),
        ("defined", "It is defined in render.py.", False),
        ("config", "It sets port 8043.", True),
        ("config", "It sets port 80.", False),
        ("default", "max_workers defaults to 6.", True),
        ("default", "The default is 4.", False),
        ("count", "There are 7 files in that list.", True),
        ("count", "There are 100 files.", False),
        ("count", "There are 7 files; the search found 100 matches.", False),
        ("tests-largest", "tests/test_render.py is the largest.", True),
        ("tests-largest", "The largest is test_build.py.", False),
        ("theme", 'The site uses the "paper" theme.', True),
        ("folder-most", "docs/ holds the most files: 7.", True),
        ("folder-most", "The docs folder.", True),
        ("folder-most", "The tests folder has the most files.", False),
        ("folder-most", "tests/ holds the most, then docs/.", False),
        ("python", "It requires Python >=3.10.", True),
        ("python", "It requires Python 3.11.", False),
        ("docs-largest", "The largest file in docs is deploy.md.", True),
        ("docs-largest", "The biggest is install.md.", False),
        ("title", "The site's title is Field notes.", True),
        ("title", "The title is Inkwell.", False),
        ("width", "width defaults to 72 columns.", True),
        ("width", "It defaults to 80.", False),
        ("count-py", "There are 5 Python files in src/inkwell.", True),
        ("count-py", "There are 100 files.", False),
    ],
)
def test_grading(key: str, text: str, right: bool) -> None:
    assert _answer(key, text) is right


def test_a_run_that_failed_is_wrong_whatever_it_said() -> None:
    assert not _answer("config", "port 8043", error="ContextOverflow: the request needs 5812 tokens")
