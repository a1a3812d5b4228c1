"""Driving the real ``steadyloop`` command: in a pseudo-terminal (as a person types) or with pipes.

The model is the scripted server, started as its own process from a script file. Every command runs with
``STEADYLOOP_HOME`` and ``XDG_CONFIG_HOME`` in the test's tmp dir, so no test reads or writes the user's
sessions or config.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "steadyloop.cli"]
# The most a wait on the command is given. Each wait ends on the event itself (the text appears, the
# process exits), so this only matters when something is wrong; on two shared cores under a full suite a
# fresh Python importing the CLI has taken most of the old 15 s before printing anything.
PATIENCE = 120.0

# Make the pty the child's controlling terminal, so a typed Ctrl-C reaches it as SIGINT like in a shell.
_LAUNCH = "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); os.execv(sys.argv[1], sys.argv[1:])"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment the command runs in: nothing of the user's, no colour, a dumb terminal."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    base.update(
        STEADYLOOP_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        NO_COLOR="1",
        TERM="dumb",
        PYTHONUNBUFFERED="1",
    )
    return base


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The directory the command runs in (what the file tools may reach)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[Callable[[Any], str]]:
    """Start ``python -m steadyloop.testing.server --script FILE``; returns its base URL."""
    procs: list[subprocess.Popen[str]] = []

    def start(script: Any) -> str:
        path = tmp_path / f"script{len(procs)}.json"
        path.write_text(json.dumps(script))
        proc = subprocess.Popen(
            [sys.executable, "-m", "steadyloop.testing.server", "--script", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:"), f"the scripted server did not start: {line!r}"
        return line

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class Terminal:
    """The command running in a pseudo-terminal: ``expect`` what it prints, ``send`` what a person types."""

    def __init__(self, args: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        self.fd = master
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *CLI, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        os.close(slave)
        self.output = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # reads split characters
        self._seen = 0
        self._closed = False

    def _read(self, timeout: float) -> bool:
        if self._closed:
            return False
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            self._closed = True
            return False
        self.output += _ANSI.sub("", self._decoder.decode(data).replace("\r\n", "\n"))
        return True

    def expect(self, pattern: str, timeout: float = PATIENCE) -> re.Match[str]:
        """Wait until ``pattern`` appears in output not yet matched; the output after it is next."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.output, self._seen)
            if match:
                self._seen = match.end()
                return match
            left = deadline - time.monotonic()
            if left <= 0 or self._closed:
                raise AssertionError(f"never saw {pattern!r}; output so far:\n{self.output}")
            self._read(min(left, 0.2))

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = PATIENCE) -> int:
        """The exit code, reading what is left so the child never blocks on a full terminal."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self.proc.poll() is not None and not self._closed and self._read(0.05):
            if not select.select([self.fd], [], [], 0)[0]:
                break
        return self.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.fd)


@pytest.fixture
def terminal(env: dict[str, str], workdir: Path) -> Iterator[Callable[..., Terminal]]:
    """Start the command in a pseudo-terminal."""
    opened: list[Terminal] = []

    def spawn(*args: str) -> Terminal:
        term = Terminal(args, env, workdir)
        opened.append(term)
        return term

    yield spawn
    for term in opened:
        term.close()


@pytest.fixture
def piped(env: dict[str, str], workdir: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the command with pipes (no terminal), as a script would."""

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            cwd=workdir,
            timeout=PATIENCE,
        )

    return run
