"""Internal: installer subprocesses (pip, cmake) whose output is logged and read for progress."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from .config import LocalServerError, Progress

__all__ = ["pip_download", "pip_install", "run_streaming", "tail"]

_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")
_DOWNLOADING = re.compile(r"^\s*Downloading (\S+)")


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a text file, or ``""`` if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except OSError:
        return ""


def run_streaming(cmd: Sequence[str], log_path: Path, on_line: Callable[[str], None]) -> int:
    """Run ``cmd`` with stdout and stderr going to ``log_path``, passing each line to ``on_line``.

    Returns:
        The exit code.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(log_path, "w") as log,
        subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            on_line(line.rstrip("\n"))
        return proc.wait()


def _pip(
    verb: str,
    args: Sequence[str],
    log_path: Path,
    progress: Progress,
    what: str,
    *,
    target: str | None = None,
) -> None:
    # `--progress-bar raw` (pip >= 24.1) prints "Progress N of M" lines: real byte counts without a terminal.
    # Older pips reject the choice; they get one more try with no bar, and progress shows only file names.
    for bar in ("raw", "off"):
        current = ""

        def on_line(line: str) -> None:
            nonlocal current
            if m := _DOWNLOADING.match(line):
                current = m.group(1).rsplit("/", 1)[-1]
                progress(f"download {current}", 0, None)
            elif (m := _PROGRESS.match(line)) and current:
                done, total = int(m.group(1)), int(m.group(2))
                progress(f"download {current}", done, total or None)

        # --python is read before the verb: pip re-runs itself in the target environment.
        where = ["--python", target] if target else []
        cmd = [
            sys.executable,
            "-m",
            "pip",
            *where,
            "--disable-pip-version-check",
            verb,
            "--progress-bar",
            bar,
        ]
        cmd += args
        code = run_streaming(cmd, log_path, on_line)
        if code == 0:
            return
        text = tail(log_path, 40)
        if bar == "raw" and "invalid choice: 'raw'" in text:
            continue
        if "No module named pip" in text:
            raise LocalServerError(
                f"pip is not available in {sys.executable}; install it (`{sys.executable} -m ensurepip`) "
                "and retry",
                log_path=log_path,
                log_tail=text,
            )
        raise LocalServerError(
            f"pip {verb} {what} failed (exit {code}); is PyPI reachable? Log {log_path}:\n{text}",
            log_path=log_path,
            log_tail=text,
        )


def pip_download(
    specs: Sequence[str], dest: Path, log_path: Path, progress: Progress, *, sdist_of: str | None = None
) -> None:
    """Download exact packages (no dependencies) into ``dest`` with this interpreter's pip.

    Args:
        sdist_of: a package to fetch as source; everything else is wheels only. Only that package is
            forced to source: ``--no-binary :all:`` would also build its build dependencies (CMake itself).
    """
    binary = ["--no-binary", sdist_of] if sdist_of else ["--only-binary", ":all:"]
    _pip(
        "download",
        ["--no-deps", *binary, "-d", str(dest), *specs],
        log_path,
        progress,
        " ".join(specs),
    )


def pip_install(python: str, specs: Sequence[str], log_path: Path, progress: Progress) -> None:
    """Install packages into the environment of ``python`` with this interpreter's pip.

    Our pip rather than the target's: a fresh venv's bundled pip may be too old for ``--progress-bar raw``.
    """
    _pip("install", list(specs), log_path, progress, " ".join(specs), target=python)
