"""The first hour's first minutes: a fresh clone, empty caches, ``bash scripts/demo``, timed from the outside.

What a newcomer does on a bare machine, measured: ``git clone`` of this repository into a scratch folder, a
scratch ``HOME`` (so ``~/.cache`` holds no model, no engine and no llama-server build) with pip's cache in
it too, then ``bash scripts/demo "What is in this folder?"`` with stdout and stderr as pipes (as in CI, and
stricter than a terminal: nothing there is rewritten in place). Every chunk of output is timestamped, so
the bench reports

- each phase's duration, read from the lines the demo prints as it starts the phase (``creating .venv``,
  ``installing``, the model's download, assembly, the server's start, the prompt read, the answer);
- the time to the first answer text on stdout, and to the demo's exit;
- the longest silence on stdout and stderr together, and the line it followed;
- whether the answer is right, graded in code as ``bench/main_job.py`` grades it (every entry the folder
  shows at its top level named, no path made up);
- the machine's load: ``os.getloadavg()`` before, after and sampled during, and the number of cores.

Targets (issue 32): a right answer within 4 minutes on 2 cores, never silent for more than 10 s.
The scratch folder (1.5 GB with the model and the venv) is removed afterwards, and the bundled server the
demo left running is stopped first, unless ``--keep``.

Run: ``.venv/bin/python bench/first_run.py [--question Q] [--repo PATH] [--branch B] [--json FILE]
[--log FILE] [--keep]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from main_job import Run, grade

REPO = Path(__file__).resolve().parent.parent
QUESTION = "What is in this folder?"
TARGET_SECONDS = 240.0
TARGET_SILENCE = 10.0
LOAD_EVERY = 5.0  # seconds between load samples while the demo runs
TIMEOUT = 3600.0

# Where each phase starts: the first line (on either stream) matching its pattern. A phase ends where the
# next one found starts; the last ends with the first answer text.
PHASES: list[tuple[str, str]] = [
    ("create .venv", r"^scripts/setup: creating \.venv"),
    ("pip install: the core and the prebuilt engine", r"^scripts/setup: installing"),
    ("start the steadyloop command", r"^scripts/demo: asking"),
    ("download the model", r"^\[local model\] download"),
    ("assemble and check the model", r"^\[local model\] assemble"),
    ("start the server and load the model", r"^\[local model\] start "),
    ("the first request: the prompt read, a tool call written", r"^· started the bundled model"),
    ("the tool run, then the answer's request until its text", r"^⚙ "),
]


@dataclass
class Chunk:
    at: float  # seconds since the demo started
    stream: str  # "stdout" or "stderr"
    data: bytes


@dataclass
class Result:
    question: str
    branch: str
    commit: str
    nproc: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    load_during_max_1min: float
    load_during_mean_1min: float
    clone_seconds: float
    exit_code: int
    first_answer_seconds: float | None
    total_seconds: float
    longest_silence_seconds: float
    longest_silence_after: str
    phases: list[tuple[str, float, float]] = field(default_factory=list)  # name, starts at, lasts
    answer: str = ""
    right: bool = False
    missing: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)


# -- the cold path ------------------------------------------------------------------------------------------


def _git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def scratch_environment(scratch: Path) -> dict[str, str]:
    """Our environment with a scratch HOME and every cache in it: nothing steadyloop or pip cached is seen."""
    home = scratch / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STEADYLOOP_", "OPENAI_", "VIRTUAL_ENV"))}
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        PIP_CACHE_DIR=str(home / ".cache" / "pip"),
        STEADYLOOP_LLM_HOME=str(home / ".cache" / "agent-llm-server"),
        NO_COLOR="1",
    )
    return env


def run_timed(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[int, list[Chunk], list[float]]:
    """Run ``argv``, timestamping every chunk it writes and sampling the load average meanwhile."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a timeout can stop the whole tree
    )
    assert proc.stdout is not None and proc.stderr is not None
    chunks: list[Chunk] = []
    loads: list[float] = []
    next_load = 0.0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        open_streams = 2
        while open_streams:
            now = time.monotonic() - t0
            if now >= next_load:
                loads.append(os.getloadavg()[0])
                next_load = now + LOAD_EVERY
            if now > TIMEOUT:
                os.killpg(proc.pid, signal.SIGKILL)
                break
            for key, _ in sel.select(timeout=1.0):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                chunks.append(Chunk(time.monotonic() - t0, key.data, data))
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    chunks.append(Chunk(time.monotonic() - t0, "exit", b""))
    return code, chunks, loads


# -- reading the output -------------------------------------------------------------------------------------


def lines_of(chunks: Sequence[Chunk]) -> list[tuple[float, str, str]]:
    """``(time, stream, line)`` for each complete line, timed by the chunk that ended it."""
    pending = {"stdout": b"", "stderr": b""}
    lines: list[tuple[float, str, str]] = []
    for chunk in chunks:
        if chunk.stream not in pending:
            continue
        pending[chunk.stream] += chunk.data
        *done, pending[chunk.stream] = pending[chunk.stream].split(b"\n")
        lines += [(chunk.at, chunk.stream, line.decode(errors="replace")) for line in done]
    return lines


def longest_silence(chunks: Sequence[Chunk]) -> tuple[float, str]:
    """The longest time with no output on either stream (from the start to the exit), and what came before."""
    last_at, last_text, worst, after = 0.0, "(the start)", 0.0, "(the start)"
    for chunk in chunks:
        if chunk.at - last_at > worst:
            worst, after = chunk.at - last_at, last_text
        last_at = chunk.at
        text = chunk.data.decode(errors="replace").strip().splitlines()
        if text:
            last_text = text[-1][:120]
    return worst, after


def phases_of(lines: Sequence[tuple[float, str, str]], end: float) -> list[tuple[str, float, float]]:
    starts: list[tuple[str, float]] = []
    for name, pattern in PHASES:
        found = next(
            (at for at, stream, text in lines if stream == "stderr" and re.search(pattern, text)), None
        )
        if found is not None:
            starts.append((name, found))
    starts.sort(key=lambda s: s[1])
    return [
        (name, at, (starts[i + 1][1] if i + 1 < len(starts) else end) - at)
        for i, (name, at) in enumerate(starts)
    ]


# -- the bench ----------------------------------------------------------------------------------------------


def _stop_servers(clone: Path, env: dict[str, str]) -> None:
    python = clone / ".venv" / "bin" / "python"
    if python.exists():
        subprocess.run(
            [str(python), "-m", "steadyloop.local", "down", "--all"],
            env=env,
            capture_output=True,
            check=False,
        )


def bench(question: str, repo: Path, branch: str, keep: bool, log: Path | None = None) -> Result:
    scratch = Path(tempfile.mkdtemp(prefix="steadyloop-first-run-"))
    print(f"scratch folder: {scratch}", file=sys.stderr)
    env = scratch_environment(scratch)
    clone = scratch / "clone"
    try:
        t0 = time.monotonic()
        subprocess.run(
            ["git", "clone", "--quiet", "--branch", branch, str(repo), str(clone)], check=True, env=env
        )
        clone_seconds = time.monotonic() - t0
        commit = _git("rev-parse", "--short", "HEAD", cwd=clone)
        load_before = os.getloadavg()
        code, chunks, loads = run_timed(["bash", "scripts/demo", question], clone, env)
        load_after = os.getloadavg()
        lines = lines_of(chunks)
        if log is not None:
            log.write_text("".join(f"{line_at:8.2f} {stream} {text}\n" for line_at, stream, text in lines))
        first_answer = next((c.at for c in chunks if c.stream == "stdout" and c.data.strip()), None)
        end = chunks[-1].at
        silence, after = longest_silence(chunks)
        answer = "\n".join(text for _, stream, text in lines if stream == "stdout").strip()
        graded = Run(folder="repo", answer=answer, error="" if code == 0 else f"exit {code}")
        grade(graded, clone)
        return Result(
            question=question,
            branch=branch,
            commit=commit,
            nproc=os.cpu_count() or 0,
            load_before=load_before,
            load_after=load_after,
            load_during_max_1min=max(loads, default=0.0),
            load_during_mean_1min=sum(loads) / len(loads) if loads else 0.0,
            clone_seconds=clone_seconds,
            exit_code=code,
            first_answer_seconds=first_answer,
            total_seconds=end,
            longest_silence_seconds=silence,
            longest_silence_after=after,
            phases=phases_of(lines, first_answer if first_answer is not None else end),
            answer=answer,
            right=graded.right,
            missing=graded.missing,
            invented=graded.invented,
        )
    finally:
        _stop_servers(clone, env)
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


def report(result: Result) -> None:
    print(f"first run of bash scripts/demo {result.question!r}: branch {result.branch} at {result.commit}")
    print(
        f"machine: {result.nproc} cores; load average (1/5/15 min) before "
        f"{'/'.join(f'{x:.2f}' for x in result.load_before)}, after "
        f"{'/'.join(f'{x:.2f}' for x in result.load_after)}; 1-min load during the run: mean "
        f"{result.load_during_mean_1min:.2f}, max {result.load_during_max_1min:.2f}"
    )
    print(f"git clone: {result.clone_seconds:.1f} s (not counted below)")
    for name, at, lasted in result.phases:
        print(f"  {at:7.1f} s  {name}: {lasted:.1f} s")
    first = result.first_answer_seconds
    print(f"first answer text after {first:.1f} s" if first is not None else "no answer text on stdout")
    print(f"the demo exited with {result.exit_code} after {result.total_seconds:.1f} s")
    print(f"longest silence: {result.longest_silence_seconds:.1f} s, after: {result.longest_silence_after}")
    verdict = "right" if result.right else f"wrong (missing {result.missing}, made up {result.invented})"
    print(f"the answer is {verdict}:\n{result.answer}")
    in_time = first is not None and first <= TARGET_SECONDS and result.right
    print(
        f"target, a right answer within {TARGET_SECONDS / 60:.0f} min: {'met' if in_time else 'NOT met'}; "
        f"never silent for more than {TARGET_SILENCE:.0f} s: "
        f"{'met' if result.longest_silence_seconds <= TARGET_SILENCE else 'NOT met'}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--repo", type=Path, default=REPO, help="the repository to clone (default: this one)")
    ap.add_argument("--branch", default=None, help="the branch to clone (default: the one checked out here)")
    ap.add_argument("--json", type=Path, default=None, help="also write the result as JSON here")
    ap.add_argument("--log", type=Path, default=None, help="write the demo's output here, each line timed")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (clone, HOME and caches)")
    args = ap.parse_args(argv)
    branch = args.branch or _git("rev-parse", "--abbrev-ref", "HEAD", cwd=args.repo)
    result = bench(args.question, args.repo, branch, args.keep, args.log)
    report(result)
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return 0 if result.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
