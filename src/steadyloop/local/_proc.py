"""Internal: installer subprocesses (pip, cmake) whose output is logged and read for progress."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from .config import LocalServerError, Progress

__all__ = ["pip_download", "pip_install", "run_streaming", "tail"]

_PROGRESS = re.compile(r"^Progress (\d+) of (\d+)$")
_DOWNLOADING = re.compile(r"^\s*Downloading (\S+)")
_SIZE = re.compile(r"\((\d+(?:\.\d+)?) (kB|MB|GB|B)\)\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 1_000, "mb": 1_000_000, "gb": 1_000_000_000}


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a text file, or ``""`` if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except OSError:
        return ""


def run_streaming(
    cmd: Sequence[str], log_path: Path, on_line: Callable[[str], None], env: Mapping[str, str] | None = None
) -> int:
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
            env=None if env is None else dict(env),
        ) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            on_line(line.rstrip("\n"))
        return proc.wait()


def _size_of(line: str) -> int | None:
    """The size pip announces with a download (``Downloading x.whl (80.0 MB)``), in bytes."""
    m = _SIZE.search(line)
    if m is None:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _bytes_under(folder: Path) -> int:
    """The bytes held by the files under ``folder`` that could be seen; never raises.

    pip creates and deletes files and folders in its scratch folder while this walks it, so any entry may be
    gone by the time it is listed or measured: that entry counts as empty.
    """
    total = 0
    pending = [str(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:  # the folder went away, or reading it failed partway
            continue
    return total


@contextlib.contextmanager
def _watching(folder: Path, on_growth: Callable[[int], None], every: float = 1.0) -> Iterator[None]:
    """Tell ``on_growth`` how many bytes ``folder`` holds, about every ``every`` seconds, while inside.

    The watch only decorates an install: whatever goes wrong in it (a walk, the callback) ends the watch,
    never the install, and never prints a traceback from its thread.
    """
    done = threading.Event()

    def watch() -> None:
        last = 0
        try:
            while not done.wait(every):
                size = _bytes_under(folder)
                if size != last:
                    last = size
                    on_growth(size)
        except Exception:  # see the docstring: pip's own lines still report the download
            return

    watcher = threading.Thread(target=watch, name="pip-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


class _PipProgress:
    """Download progress from pip's lines, or from the growth of its temporary file when it counts nothing.

    With a ``batch`` label, the files of the run are one download (a model's wheels): one count of bytes
    across them all, and which file of how many is under way.
    """

    def __init__(self, progress: Progress, batch: str | None = None, files: int = 1) -> None:
        self.progress = progress
        self.batch = batch
        self.files = files
        self.current = ""
        self.total: int | None = None
        self.counted = False  # pip is counting bytes itself
        # The scratch folder keeps what earlier downloads of the same pip run left there, so one file's
        # progress is the growth since its "Downloading" line, not the folder's size.
        self.folder_size = 0
        self.folder_base = 0
        self.started = 0  # files begun
        self.before = 0  # bytes of the files finished before the current one
        self.done = 0  # bytes of the current one

    def _say(self, done: int, total: int | None) -> None:
        self.done = done
        if self.batch is None:
            self.progress(f"download {self.current}", done, total)
        else:
            event = f"download {self.batch}, file {self.started} of {self.files}"
            self.progress(event, self.before + done, None)

    def on_line(self, line: str) -> None:
        if m := _DOWNLOADING.match(line):
            if self.current:
                self.before += max(self.done, self.total or 0)
            self.current = m.group(1).rsplit("/", 1)[-1]
            self.total = _size_of(line)
            self.folder_base = self.folder_size
            self.started += 1
            self._say(0, self.total)
        elif (m := _PROGRESS.match(line)) and self.current:
            self.counted = True
            done, whole = int(m.group(1)), int(m.group(2))
            self._say(done, whole or self.total)

    def on_growth(self, size: int) -> None:
        self.folder_size = size
        if self.current and not self.counted:
            done = max(0, size - self.folder_base)
            if self.total is not None:
                done = min(done, self.total)
            self._say(done, self.total)


def _pip(
    verb: str,
    args: Sequence[str],
    log_path: Path,
    progress: Progress,
    what: str,
    *,
    target: str | None = None,
    batch: str | None = None,
    files: int = 1,
) -> None:
    # `--progress-bar raw` (pip >= 24.1) prints "Progress N of M" lines: real byte counts without a terminal.
    # Older pips reject the choice and get one more try with no bar; their progress is read from the file
    # growing in pip's own temporary directory, which is pointed at a folder of ours for that.
    for bar in ("raw", "off"):
        told = _PipProgress(progress, batch, files)
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
        scratch = log_path.parent / f"pip-tmp-{os.getpid()}"
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            with _watching(scratch, told.on_growth):
                code = run_streaming(cmd, log_path, told.on_line, env={**os.environ, "TMPDIR": str(scratch)})
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
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
    specs: Sequence[str],
    dest: Path,
    log_path: Path,
    progress: Progress,
    *,
    sdist_of: str | None = None,
    batch: str | None = None,
) -> None:
    """Download exact packages (no dependencies) into ``dest`` with this interpreter's pip.

    Args:
        sdist_of: a package to fetch as source; everything else is wheels only. Only that package is
            forced to source: ``--no-binary :all:`` would also build its build dependencies (CMake itself).
        batch: report the files as one download by this name, counted across them all.
    """
    binary = ["--no-binary", sdist_of] if sdist_of else ["--only-binary", ":all:"]
    _pip(
        "download",
        ["--no-deps", *binary, "-d", str(dest), *specs],
        log_path,
        progress,
        " ".join(specs),
        batch=batch,
        files=len(specs),
    )


def pip_install(python: str, specs: Sequence[str], log_path: Path, progress: Progress) -> None:
    """Install packages into the environment of ``python`` with this interpreter's pip.

    Our pip rather than the target's: a fresh venv's bundled pip may be too old for ``--progress-bar raw``.
    """
    _pip("install", list(specs), log_path, progress, " ".join(specs), target=python)
