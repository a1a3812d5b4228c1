"""bench/real_projects.py: what each question expects is read off the project's own files, and the grading
tells a right answer from the wrong ones a small model gives (another count, the whole listing, a guess)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._bench import load

newcomer = load("newcomer")
real_projects = load("real_projects")

PKG_INFO = """Metadata-Version: 2.1
Name: widget
Version: 1.0
License: BSD-3-Clause
Classifier: License :: OSI Approved :: BSD License
Requires-Python: >=3.9

Widget makes widgets. License: MIT is said here in the description, which is not metadata.
"""


def _project(root: Path) -> object:
    (root / "src" / "widget").mkdir(parents=True)
    (root / "PKG-INFO").write_text(PKG_INFO)
    (root / "README.rst").write_text("Widget\n======\n\nWidget makes widgets.\n")
    (root / ".github").mkdir()
    for name, lines in (("__init__.py", 3), ("core.py", 40), ("util.py", 12), ("io.py", 5), ("cli.py", 9)):
        (root / "src" / "widget" / name).write_text("x = 1\n" * lines)
    (root / "src" / "widget" / "py.typed").write_text("")
    (root / "src" / "widget" / "core.pyi").write_text("x: int\n")
    return real_projects.Project("widget", root, "src/widget")


def _graded(tmp_path: Path) -> dict[str, object]:
    return {q.key.split("/")[1]: q for q in real_projects.questions_for(_project(tmp_path))}


@pytest.mark.parametrize(
    ("kind", "answer", "right"),
    [
        ("folder", "It holds PKG-INFO, README.rst and src/.", True),
        ("folder", "It holds README.rst and src/.", False),  # PKG-INFO left out; hidden .github is not asked
        ("readme", "The README says widget makes widgets.", True),
        ("readme", "The README could not be found.", False),
        ("count-py", "There are 5 Python files in src/widget.", True),
        ("count-py", "There are five Python files.", True),
        ("count-py", "There are 6 Python files, counting the stub.", True),
        ("count-py", "There are 7 files.", False),
        ("count-py", "5 of the 7 files are Python files.", False),
        ("most-lines", "core.py has the most lines (40).", True),
        ("most-lines", "util.py has the most lines.", False),
        ("most-lines", "core.pyi has the most lines.", False),  # a name is not the start of another
        (
            "most-lines",
            "- cli.py (9 lines)\n- core.py (40 lines)\n- io.py (5 lines)\n- util.py (12 lines)",
            False,
        ),
        ("license", "It uses the BSD 3-Clause license.", True),
        ("license", "It uses the MIT License.", False),
        ("python", "It requires Python 3.9 or newer.", True),
        ("python", "It requires Python 3.8.", False),
        ("python", "Python 3.9, and it was tested on 3.12.", False),
    ],
)
def test_the_grading_reads_the_projects_own_files(
    tmp_path: Path, kind: str, answer: str, right: bool
) -> None:
    question = _graded(tmp_path)[kind]
    graded = newcomer.grade(question, newcomer.Answer(question.key, question.half, answer=answer))
    assert graded is right


def test_every_question_is_held_out_and_the_readme_must_be_read(tmp_path: Path) -> None:
    questions = real_projects.questions_for(_project(tmp_path))
    assert {q.half for q in questions} == {"held-out"} and len(questions) == 6
    read = newcomer.Answer("widget/readme", "held-out", calls=['read_file({"path": "README"})'])
    assert real_projects._read_readme(read)
    assert not real_projects._read_readme(
        newcomer.Answer("widget/readme", "held-out", calls=["list_dir({})"])
    )


def _tested_project(root: Path) -> object:
    project = _project(root)
    (root / "src" / "widget" / "core.py").write_text(
        "def make_widget(size):\n    pass\n\n\nclass Part:\n    pass\n"
    )
    (root / "src" / "widget" / "cli.py").write_text("from .core import make_widget\nmake_widget(1)\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text("def test_make():\n    make_widget(2)\n")
    (root / "tox.ini").write_text("[testenv]\ncommands = pytest {posargs}\n")
    return project


@pytest.mark.parametrize(
    ("kind", "answer", "right"),
    [
        ("tests", "Run `tox`.", True),
        ("tests", "Run pytest from the project's folder.", True),
        ("tests", "Run `nox -s tests`.", False),  # no noxfile here
        ("tests", "Widget makes widgets.", False),
        ("defined", "make_widget is defined in src/widget/core.py.", True),
        ("defined", "It is in the widget.core module.", True),
        ("defined", "It is defined in cli.py.", False),
        ("defined", "It is in core.pyi.", False),
        ("defined", "It is in the widget module.", False),
    ],
)
def test_the_tests_and_defined_questions_read_the_projects_own_files(
    tmp_path: Path, kind: str, answer: str, right: bool
) -> None:
    questions = {q.key.split("/")[1]: q for q in real_projects.questions_for(_tested_project(tmp_path))}
    assert questions["defined"].text == "Where is the make_widget function defined?"
    question = questions[kind]
    graded = newcomer.grade(question, newcomer.Answer(question.key, question.half, answer=answer))
    assert graded is right


def test_a_project_whose_files_run_no_tests_is_not_asked_how_to(tmp_path: Path) -> None:
    keys = {q.key.split("/")[1] for q in real_projects.questions_for(_project(tmp_path))}
    assert "tests" not in keys and "defined" not in keys  # no runner, and nothing defined
