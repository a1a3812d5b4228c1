"""The main job, asked again and again: does "What is in this folder?" get a right answer every time?

``bash scripts/demo`` is ``steadyloop run "What is in this folder?"`` against the bundled model. This bench
asks that question ``--n`` times in each of several folders, through the CLI's own code path: the options
``steadyloop run`` builds for the bundled model (tool routing and the gate on, the model's temperature), the
conversation ``run`` opens (its tools, system prompt and loop policy), a session store of its own. Only the
terminal renderer is left out.

The folders:

- ``repo``: a copy of this repository's tracked files (``git ls-files``), so hidden entries match a fresh
  clone;
- ``empty``: nothing in it;
- ``one``: a single file;
- ``mixed``: fifteen entries, files of several kinds and a few folders;
- ``nested``: two folders holding folders, and one file at the top.

Each answer is graded by code, never by a model. Right means: every entry ``list_dir`` shows at the top level
is named (a folder with or without its slash), and no path-like word (one ending in ``/``, holding a ``/``,
or ending in a file extension) names something the folder does not have; an empty folder's answer says it
is empty. Whether folders read as folders is counted too, as a bonus.

Run: ``.venv/bin/python bench/main_job.py --base-url URL [--n 8] [--folders repo,mixed] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
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

QUESTION = "What is in this folder?"
REPO = Path(__file__).resolve().parent.parent

# -- the folders --------------------------------------------------------------------------------------------

MIXED = {
    "Makefile": "all:\n\techo hi\n",
    "LICENSE": "MIT\n",
    "README.md": "# Shop\n",
    "app.py": "print('shop')\n",
    "models.py": "class Item: ...\n",
    "requirements.txt": "flask\n",
    "data.csv": "id,name\n1,apple\n",
    "logo.png": "not really a png\n",
    "notes.txt": "call the bank\n",
    "config.yaml": "port: 80\n",
    "schema.sql": "create table item (id int);\n",
    "index.html": "<p>shop</p>\n",
    "static/style.css": "p { color: red }\n",
    "templates/base.html": "<html></html>\n",
    "tests/test_app.py": "def test_app(): ...\n",
}
NESTED = {
    "setup.cfg": "[metadata]\nname = atlas\n",
    "atlas/core/engine.py": "ENGINE = 1\n",
    "atlas/core/__init__.py": "",
    "atlas/cli/main.py": "def main(): ...\n",
    "atlas/__init__.py": "",
    "docs/guide/intro.md": "# Intro\n",
    "docs/guide/advanced/tuning.md": "# Tuning\n",
    "docs/index.md": "# Atlas\n",
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _repo_copy(root: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


FOLDERS: dict[str, Any] = {
    "repo": _repo_copy,
    "empty": lambda root: None,
    "one": lambda root: _write(root, {"notes.txt": "buy milk\n"}),
    "mixed": lambda root: _write(root, MIXED),
    "nested": lambda root: _write(root, NESTED),
}

# -- grading ------------------------------------------------------------------------------------------------

# A path-like word: ends in "/", holds a "/", or ends in a file extension (letters, after a dot).
_PATHISH = re.compile(
    r"(?<![\w./-])(?:[\w.-]+/)+[\w.-]*|(?<![\w./-])[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}(?![\w/])"
)
_NOT_PATHS = {"e.g.", "i.e.", "e.g", "i.e", "etc.", "vs."}
# An empty folder said to be empty, in English or in the other languages a question may be asked in
# (Spanish "No hay archivos ni carpetas", "está vacía"; French "vide"; German "leer"; Italian "vuota").
_EMPTY_SAID = re.compile(
    r"\bempty\b|\bno (files|entries|items)\b|\bnothing\b"
    r"|\bno hay (nada|archivos|ficheros|elementos)\b|\bvac[ií][ao]\b|\bvides?\b|\bist leer\b|\bvuot[ao]\b"
    r"|\bn[ãa]o h[áa] (nada|arquivos)\b",
    re.IGNORECASE,
)


def shown_entries(root: Path) -> list[tuple[str, bool]]:
    """The top-level entries ``list_dir`` shows (hidden ones are not), each with whether it is a folder."""
    return sorted((p.name, p.is_dir()) for p in root.iterdir() if not p.name.startswith("."))


def _named(name: str, answer: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.[A-Za-z])", answer, re.IGNORECASE) is not None


def _exists(token: str, root: Path, everything: set[str]) -> bool:
    text = token.strip().strip("`'\"*").removeprefix("./").rstrip(".,:;")
    if not text or text in _NOT_PATHS or "://" in token:
        return True
    bare = text.rstrip("/")
    if not bare:
        return True
    if (root / bare).exists():
        return True
    # A bare name (no folder part) that is somewhere below: the answer may describe a folder's contents.
    return "/" not in bare and bare in everything


@dataclass
class Run:
    folder: str
    answer: str = ""
    error: str = ""
    calls: list[str] = field(default_factory=list)
    seconds: float = 0.0
    missing: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    folders_marked: bool = True

    @property
    def right(self) -> bool:
        return not self.error and not self.missing and not self.invented


def grade(run: Run, root: Path) -> None:
    entries = shown_entries(root)
    everything = {p.name for p in root.rglob("*")}
    answer = run.answer
    if not entries:
        said_empty = _EMPTY_SAID.search(answer)
        run.missing = [] if said_empty else ["(does not say it is empty)"]
    else:
        run.missing = [name for name, _ in entries if not _named(name, answer)]
    run.invented = sorted(
        {m.group(0) for m in _PATHISH.finditer(answer) if not _exists(m.group(0), root, everything)}
    )
    # A folder is marked as one by a slash ("atlas/"), a note ("atlas (folder)"), the word before it
    # ("Folders: atlas, docs") or after it ("The atlas folder contains 1 file").
    run.folders_marked = all(
        re.search(rf"{re.escape(name)}/|{re.escape(name)}\W{{0,4}}\s*\((folder|directory)", answer, re.I)
        or re.search(rf"(folders?|director(y|ies))\W+[^\n]*{re.escape(name)}", answer, re.I)
        or re.search(
            rf"(?<![\w.-]){re.escape(name)}\W{{0,2}}\s+(sub)?(folder|director(y|ies))\b", answer, re.I
        )
        for name, is_dir in entries
        if is_dir
    )


# -- running ------------------------------------------------------------------------------------------------


async def ask(base_url: str, model: str, root: Path, store: Path, question: str) -> Run:
    """One ``steadyloop run QUESTION`` in ``root``, as the CLI sets it up for the bundled model."""
    args = build_parser().parse_args(["run", question])
    resolved = Resolved(sl.Endpoint(base_url, key_for(base_url), request_timeout=900.0), model, BUNDLED)
    options = replace(_agent_options_of(args, resolved), cwd=root, store=str(store))
    run = Run(root.name)
    started = time.monotonic()
    try:
        async with open_conversation(resolved, options, approvals=None) as conversation:
            turn = await conversation.prompt(question)
            run.answer = turn.content
            for message in conversation.agent.state.messages:
                if isinstance(message, sl.AssistantMessage):
                    run.calls += [f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls]
    except sl.SteadyloopError as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    run.seconds = time.monotonic() - started
    return run


async def run_all(base_url: str, model: str | None, names: Sequence[str], n: int, question: str) -> list[Run]:
    endpoint = sl.Endpoint(base_url, key_for(base_url), request_timeout=900.0)
    if model is None:
        model = (await sl.list_models(endpoint))[0].id
    base = Path(tempfile.mkdtemp(prefix="steadyloop-mainjob-"))
    runs: list[Run] = []
    try:
        for name in names:
            root = base / name
            root.mkdir()
            FOLDERS[name](root)
            for i in range(n):
                run = await ask(base_url, model, root, base / "sessions.db", question)
                run.folder = name
                grade(run, root)
                runs.append(run)
                mark = "ok " if run.right else "BAD"
                extra = "" if run.right else f" missing={run.missing} invented={run.invented}"
                print(f"{mark} {run.seconds:5.1f}s {name:<7} #{i + 1}{extra}", file=sys.stderr, flush=True)
    finally:
        await sl.aclose_clients()
        shutil.rmtree(base, ignore_errors=True)
    return runs


def report(runs: Sequence[Run], label: str) -> dict[str, Any]:
    print(f"\n{label}")
    print(
        f"{'folder':<8} {'n':>3} {'right':>6} {'all named':>10} {'none made up':>13} {'folders marked':>15}"
    )
    rows: dict[str, Any] = {}
    for name in dict.fromkeys(r.folder for r in runs):
        mine = [r for r in runs if r.folder == name]
        row = {
            "n": len(mine),
            "right": sum(r.right for r in mine),
            "all_named": sum(not r.missing and not r.error for r in mine),
            "none_made_up": sum(not r.invented and not r.error for r in mine),
            "folders_marked": sum(r.folders_marked and not r.error for r in mine),
            "seconds": round(sum(r.seconds for r in mine), 1),
        }
        rows[name] = row
        print(
            f"{name:<8} {row['n']:>3} {row['right']:>6} {row['all_named']:>10} {row['none_made_up']:>13} "
            f"{row['folders_marked']:>15}"
        )
    right = sum(r.right for r in runs)
    print(f"all      {len(runs):>3} {right:>6}   ({sum(r.seconds for r in runs):.0f} s)")
    return {
        "label": label,
        "folders": rows,
        "right": right,
        "n": len(runs),
        "runs": [
            {
                "folder": r.folder,
                "right": r.right,
                "missing": r.missing,
                "invented": r.invented,
                "folders_marked": r.folders_marked,
                "calls": r.calls,
                "answer": r.answer,
                "error": r.error,
                "seconds": round(r.seconds, 1),
            }
            for r in runs
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", required=True, help="a running server (python -m steadyloop.local up)")
    ap.add_argument("-m", "--model", help="the model name (default: the first the server lists)")
    ap.add_argument("--n", type=int, default=8, help="times the question is asked in each folder")
    ap.add_argument("--folders", default=",".join(FOLDERS), help=f"comma-separated, of {', '.join(FOLDERS)}")
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--label", default="main job")
    ap.add_argument("--json", type=Path, help="also write the figures and answers to this file")
    ap.add_argument("--show", action="store_true", help="print every wrong answer")
    args = ap.parse_args(argv)
    names = [n for n in args.folders.split(",") if n]
    unknown = [n for n in names if n not in FOLDERS]
    if unknown:
        ap.error(f"unknown folders: {unknown}")
    runs = asyncio.run(run_all(args.base_url, args.model, names, args.n, args.question))
    figures = report(runs, args.label)
    if args.show:
        for r in runs:
            if not r.right:
                print(f"--- {r.folder}: missing={r.missing} invented={r.invented} calls={r.calls}")
                print(r.error or r.answer)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
