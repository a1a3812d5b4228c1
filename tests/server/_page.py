"""What the web page's browser tests share: the system's Chromium, the tools a session is offered, and
screenshots kept for the docs.

Set ``STEADYLOOP_PAGE_SCREENSHOTS=docs/page`` to write the screenshots of the page's main views there.
"""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from steadyloop import Tool
from steadyloop.tools.definition import tool

CHROMIUM = os.environ.get("STEADYLOOP_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"]

needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="no system Chromium (scripts/setup installs it from Debian packages)",
)


def png(width: int = 24, height: int = 16) -> bytes:
    """A small PNG, a gradient, made here so no file is needed."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\0" + b"".join(bytes((x * 10 % 256, y * 15 % 256, 160)) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def expect_patiently() -> Any:
    from playwright.async_api import expect

    expect.set_options(timeout=15_000)  # a ceiling on waiting for the page, on a machine that may be busy
    return expect


async def shoot(page: Any, name: str, **options: Any) -> None:
    """Keep a screenshot of the page as it is, when the run was asked to."""
    folder = os.environ.get("STEADYLOOP_PAGE_SCREENSHOTS")
    if folder:  # Playwright makes the folder
        await page.screenshot(path=str(Path(folder) / f"{name}.png"), **options)


class Workspace:
    """Files the session's tools write and edit, and what the shell was asked to run."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {"app.py": "def f(x):\n    return x\n"}
        self.commands: list[str] = []

    def tools(self) -> list[Tool]:
        files, commands = self.files, self.commands

        @tool(effect="read")
        def read_file(path: str) -> str:
            """Read a file."""
            return files.get(path, "no such file")

        @tool(effect="mutate-reversible")
        def write_file(path: str, content: str) -> str:
            """Write a file."""
            files[path] = content
            return f"wrote {len(content)} characters to {path}"

        @tool(effect="mutate-reversible")
        def edit_file(path: str, old: str, new: str) -> str:
            """Replace text in a file."""
            files[path] = files[path].replace(old, new, 1)
            return f"edited {path}"

        @tool(effect="destructive")
        def run_shell(command: str) -> str:
            """Run a shell command."""
            commands.append(command)
            return "exit code 0\n3 passed"

        return [read_file, write_file, edit_file, run_shell]
