"""A newcomer's next questions: after "what is here", does the command answer what people ask next?

``steadyloop run`` is asked fifteen questions about a project folder this bench makes up (``inkwell``, a small
static-site tool with a long README, Python files of clearly different sizes, a config file, functions with
defaults), through the CLI's own code path: the options ``steadyloop run`` builds for the bundled model, the
conversation it opens (tools, system prompt, loop policy) and a session store of its own. Only the terminal
renderer is left out.

The questions cover what a newcomer asks in the first hour: what is here, what a README longer than the
bundled model's window says, which files are largest, how many files a listing holds (a follow-up in the
same session, which the conversation already answers), where something is defined, a value from a config
file and a function's default. They are split in two halves: ``tuning`` (the ones prompts and tools may be
adjusted against) and ``held-out`` (never looked at while tuning); both are reported.

Each answer is graded by code, never by a model: it must contain what the folder says (a regular
expression) and must not contain a known wrong answer (for instance the 100-match cap read as a count, or a
smaller file named as the largest). A run that fails with an error is wrong. For the follow-up, the number
of tool calls it made is reported too: the listing it counts is already in the conversation.

Run: ``.venv/bin/python bench/newcomer.py --base-url URL [--half tuning|held-out|all] [--n 1] [--json F]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import steadyloop as sl
from steadyloop.cli.app import _agent_options_of, build_parser
from steadyloop.cli.config import BUNDLED, Resolved
from steadyloop.cli.kit import open_conversation
from steadyloop.local import key_for

# -- the folder ---------------------------------------------------------------------------------------------

_README_HEAD = """# Inkwell

Inkwell turns a folder of Markdown notes into a static website: one HTML page per note, an index
page, and a feed, with no server and no database.

"""

_SECTION_TOPICS = [
    ("Writing notes", "note", "front matter", "title"),
    ("Themes", "theme", "stylesheet", "template"),
    ("Links between notes", "link", "backlink", "anchor"),
    ("Images", "image", "thumbnail", "caption"),
    ("Feeds", "feed", "entry", "summary"),
    ("Drafts", "draft", "preview", "flag"),
    ("Search", "search index", "keyword", "result"),
    ("Deploying", "upload", "bucket", "cache header"),
    ("Plugins", "plugin", "hook", "filter"),
    ("Troubleshooting", "error", "log line", "rebuild"),
]


def _readme() -> str:
    """A README of about 7,000 tokens: its first paragraph says what the project does, the rest is manual."""
    parts = [_README_HEAD]
    for heading, a, b, c in _SECTION_TOPICS:
        parts.append(f"## {heading}\n\n")
        for i in range(1, 9):
            parts.append(
                f"Step {i}. Each {a} may carry a {b}; when it does, Inkwell reads the {c} from it before the "
                f"page is written, and a {a} without one falls back to the defaults in config/site.toml. "
                f"Run `inkwell build` again after changing a {b}, since pages are rebuilt only when their "
                f"source changes.\n\n"
            )
    return "".join(parts)


def _python_file(name: str, functions: int) -> str:
    body = [f'"""{name}: part of Inkwell."""\n\n']
    for i in range(functions):
        body.append(f"def helper_{i}(value):\n    return value * {i + 1}\n\n\n")
    return "".join(body)


def inkwell_files() -> dict[str, str]:
    """The made-up project: every path and its text."""
    render = (
        '"""Turning one note into one HTML page."""\n\n\n'
        "def render_page(text, width=72, smart_quotes=False):\n"
        '    """Render a note to HTML, wrapping preformatted blocks at ``width`` columns."""\n'
        "    return text\n\n\n" + _python_file("render", 40)
    )
    build = (
        '"""Building the whole site."""\n\n\n'
        "def build_site(source, out, *, max_workers=6, minify=True):\n"
        '    """Render every note under ``source`` into ``out`` with ``max_workers`` processes."""\n'
        "    return out\n\n\n" + _python_file("build", 12)
    )
    text = (
        '"""Small text helpers."""\n\n\n'
        "def slugify(title):\n"
        '    """The file name a note\'s title becomes."""\n'
        "    return title.lower().replace(' ', '-')\n"
    )
    files = {
        "README.md": _readme(),
        "pyproject.toml": '[project]\nname = "inkwell"\nversion = "0.3.1"\nrequires-python = ">=3.10"\n',
        "config/site.toml": 'title = "Field notes"\ntheme = "paper"\nport = 8043\nbase_url = "/"\n',
        "src/inkwell/__init__.py": '"""Inkwell."""\n',
        "src/inkwell/render.py": render,
        "src/inkwell/build.py": build,
        "src/inkwell/text.py": text,
        "src/inkwell/cli.py": _python_file("cli", 4),
        "tests/test_render.py": _python_file("test_render", 20),
        "tests/test_build.py": _python_file("test_build", 3),
    }
    for i, topic in enumerate(["install", "notes", "themes", "links", "images", "feeds", "deploy"]):
        files[f"docs/{topic}.md"] = f"# {topic.title()}\n\nPage {i + 1} of the guide.\n"
    # One guide page clearly the longest, for "the largest file in the docs folder".
    files["docs/deploy.md"] += "".join(
        f"\n{i}. Upload the built site to the bucket and set its cache headers.\n" for i in range(1, 25)
    )
    return files


def make_folder(root: Path) -> None:
    for name, text in inkwell_files().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# -- the questions ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One question; ``before`` is asked first in the same conversation (the follow-up's context)."""

    key: str
    half: str
    text: str
    right: str  # a regular expression the answer must match (case-insensitive)
    wrong: str = ""  # one it must not match
    before: str = ""


QUESTIONS = [
    # tuning
    Question(
        "folder",
        "tuning",
        "What is in this folder?",
        r"(?s)(?=.*README)(?=.*pyproject)(?=.*\bsrc\b)(?=.*\bdocs\b)(?=.*\bconfig\b)(?=.*\btests\b)",
    ),
    Question(
        "readme",
        "tuning",
        "What does README.md say this project does?",
        r"(?s)(?=.*markdown)(?=.*(static|web ?site|html))",
    ),
    Question(
        "largest",
        "tuning",
        "Which Python file under src/inkwell is the largest?",
        r"render\.py",
        r"(largest|biggest)[^.\n]*\b(build|text|cli|__init__)\.py",
    ),
    Question(
        "defined",
        "tuning",
        "Which file defines the function slugify?",
        r"text\.py",
        r"(render|build|cli)\.py",
    ),
    Question("config", "tuning", "What port does config/site.toml set?", r"\b8043\b"),
    # These two were held out until a run failed them; the fix (paths named in words) was made looking at
    # them, so they tune now, and the held-out half below has questions of the same kinds nothing saw.
    Question(
        "tests-largest",
        "tuning",
        "Which file in the tests folder is the largest?",
        r"test_render\.py",
        r"(largest|biggest)[^.\n]*test_build\.py",
    ),
    Question("theme", "tuning", "Which theme does the site config use?", r"\bpaper\b"),
    # Written with the fix it tries (a listed folder says what it holds, and a pick of folders is held to
    # that): asked in this repository, "Which tests folder has the most files?" was answered "tests".
    Question(
        "folder-most",
        "tuning",
        "Which folder here holds the most files?",
        r"\bdocs\b",
        r"\b(config|src|tests)/? (folder )?(holds|has|contains) the most",
    ),
    # held out
    Question(
        "default",
        "held-out",
        "What is the default value of max_workers in build_site?",
        r"\b(6|six)\b",
        r"\b(4|four|8|eight)\b",
    ),
    Question(
        "count",
        "held-out",
        "How many files are in that list?",
        r"\b(7|seven)\b",
        r"\b100\b",
        before="List the files in the docs folder.",
    ),
    Question(
        "python", "held-out", "Which Python version does pyproject.toml require?", r"3\.10", r"3\.(8|9|11|12)"
    ),
    Question(
        "docs-largest",
        "held-out",
        "What is the largest file in the docs folder?",
        r"deploy\.md",
        r"(largest|biggest)[^.\n]*\b(install|notes|themes|links|images|feeds)\.md",
    ),
    Question(
        "title", "held-out", "What is the site's title, according to its configuration?", r"field notes"
    ),
    Question(
        "width",
        "held-out",
        "What does the width parameter of render_page default to?",
        r"\b72\b",
        r"\b(80|100|120)\b",
    ),
    Question(
        "count-py", "held-out", "How many Python files are in src/inkwell?", r"\b(5|five)\b", r"\b100\b"
    ),
]


# -- running ------------------------------------------------------------------------------------------------


@dataclass
class Answer:
    key: str
    half: str
    answer: str = ""
    error: str = ""
    calls: list[str] = field(default_factory=list)
    seconds: float = 0.0
    right: bool = False


def grade(question: Question, answer: Answer) -> bool:
    if answer.error:
        return False
    if not re.search(question.right, answer.answer, re.IGNORECASE):
        return False
    return not (question.wrong and re.search(question.wrong, answer.answer, re.IGNORECASE))


def _calls_in(messages: Sequence[sl.AgentMessage]) -> list[str]:
    return [
        f"{c.name}({json.dumps(c.arguments)})"
        for m in messages
        if isinstance(m, sl.AssistantMessage)
        for c in m.tool_calls
    ]


async def ask(resolved: Resolved, root: Path, store: Path, question: Question) -> Answer:
    """The question through ``steadyloop run``'s own set-up (its follow-up context asked first)."""
    args = build_parser().parse_args(["run", question.text])
    options = replace(_agent_options_of(args, resolved), cwd=root, store=str(store))
    answer = Answer(question.key, question.half)
    started = time.monotonic()
    try:
        async with open_conversation(resolved, options, approvals=None) as conversation:
            if question.before:
                await conversation.prompt(question.before)
            already = len(conversation.agent.state.messages)
            turn = await conversation.prompt(question.text)
            answer.answer = turn.content
            answer.calls = _calls_in(conversation.agent.state.messages[already:])
    except sl.SteadyloopError as exc:
        answer.error = f"{type(exc).__name__}: {exc}"
    answer.seconds = time.monotonic() - started
    answer.right = grade(question, answer)
    return answer


async def resolved_for(base_url: str, model: str | None) -> Resolved:
    """The endpoint as ``steadyloop run`` resolves the bundled model's, with the server's first model by default."""
    endpoint = sl.Endpoint(base_url, key_for(base_url), request_timeout=900.0)
    if model is None:
        model = (await sl.list_models(endpoint))[0].id
    return Resolved(endpoint, model, BUNDLED)


def say(answer: Answer, what: str) -> None:
    """One answer's line on stderr as it comes: right or not, how long it took, ``what`` it was, what it said."""
    mark = "ok " if answer.right else "BAD"
    said = (answer.error or answer.answer).replace("\n", " ")[:110]
    print(f"{mark} {answer.seconds:6.1f}s {what} {said}", file=sys.stderr, flush=True)


async def run_all(base_url: str, model: str | None, questions: Sequence[Question], n: int) -> list[Answer]:
    resolved = await resolved_for(base_url, model)
    base = Path(tempfile.mkdtemp(prefix="steadyloop-newcomer-"))
    root = base / "inkwell"
    root.mkdir()
    make_folder(root)
    answers: list[Answer] = []
    try:
        for question in questions:
            for i in range(n):
                answer = await ask(resolved, root, base / "sessions.db", question)
                answers.append(answer)
                say(answer, f"{question.half:<8} {question.key:<13} #{i + 1} calls={len(answer.calls)}")
    finally:
        await sl.aclose_clients()
        shutil.rmtree(base, ignore_errors=True)
    return answers


def report(answers: Sequence[Answer]) -> dict[str, Any]:
    halves: dict[str, Any] = {}
    print(f"\n{'half':<9} {'asked':>5} {'right':>6} {'seconds':>8}")
    for half in ("tuning", "held-out"):
        mine = [a for a in answers if a.half == half]
        if not mine:
            continue
        right = sum(a.right for a in mine)
        seconds = round(sum(a.seconds for a in mine), 1)
        halves[half] = {"asked": len(mine), "right": right, "seconds": seconds}
        print(f"{half:<9} {len(mine):>5} {right:>6} {seconds:>8.0f}")
    right = sum(a.right for a in answers)
    print(f"{'all':<9} {len(answers):>5} {right:>6} {sum(a.seconds for a in answers):>8.0f}")
    follow_ups = [a for a in answers if a.key == "count"]
    if follow_ups:
        no_tool = sum(not a.calls for a in follow_ups)
        print(f"follow-up answered from the conversation without a tool: {no_tool} of {len(follow_ups)}")
    return {
        "halves": halves,
        "right": right,
        "asked": len(answers),
        "answers": [a.__dict__ for a in answers],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", required=True, help="a running server (python -m steadyloop.local up)")
    ap.add_argument("-m", "--model", help="the model name (default: the first the server lists)")
    ap.add_argument("--half", choices=["tuning", "held-out", "all"], default="all")
    ap.add_argument("--only", default="", help="comma-separated question keys")
    ap.add_argument("--n", type=int, default=1, help="times each question is asked")
    ap.add_argument("--json", type=Path, help="also write the figures and answers to this file")
    args = ap.parse_args(argv)
    keys = {k for k in args.only.split(",") if k}
    questions = [
        q for q in QUESTIONS if (args.half == "all" or q.half == args.half) and (not keys or q.key in keys)
    ]
    if not questions:
        ap.error("no question matches")
    answers = asyncio.run(run_all(args.base_url, args.model, questions, args.n))
    figures = report(answers)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
