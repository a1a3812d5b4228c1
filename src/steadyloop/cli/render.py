"""Showing a run in a terminal: the answer as it streams, thinking in a dim gutter, tool calls on one line.

Colour is plain ANSI, used only when the stream is a terminal and ``NO_COLOR`` is unset (no-color.org).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any, TextIO

from ..events import (
    AgentEnd,
    ApprovalRequired,
    Event,
    MessageUpdate,
    Notice,
    Retry,
    ToolExecutionEnd,
    ToolExecutionStart,
    event_to_json,
)
from ..messages import text_of
from .markdown import MarkdownStream

__all__ = [
    "JsonRenderer",
    "Style",
    "TerminalProgress",
    "TextRenderer",
    "call_text",
    "one_line",
    "result_summary",
    "to_json_line",
]

_GUTTER = "│ "
_ARG_CHARS = 60
_SUMMARY_CHARS = 80


class Style:
    """ANSI styles for one stream, or none at all."""

    def __init__(self, stream: TextIO, *, force: bool | None = None) -> None:
        if force is None:
            force = _isatty(stream) and not os.environ.get("NO_COLOR")
        self.enabled = force

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def tool(self, text: str) -> str:
        return self._wrap("1;36", text)

    def ok(self, text: str) -> str:
        return self._wrap("32", text)

    def bad(self, text: str) -> str:
        return self._wrap("31", text)


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):
        return shutil.get_terminal_size().columns


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call as a person reads it: ``read_file(path='x', limit=20)``, long values cut."""
    shown = []
    for key, value in arguments.items():
        text = repr(value)
        if len(text) > _ARG_CHARS:
            text = text[: _ARG_CHARS - 1] + "…"
        shown.append(f"{key}={text}")
    return f"{name}({', '.join(shown)})"


def result_summary(text: str) -> str:
    """A tool result in a few words: its one line, or how many lines it has."""
    lines = text.strip().splitlines()
    if not lines:
        return "done"
    if len(lines) == 1:
        line = lines[0].strip()
        return line if len(line) <= _SUMMARY_CHARS else line[: _SUMMARY_CHARS - 1] + "…"
    return f"{len(lines)} lines"


class TextRenderer:
    """Writes a run's events as text.

    Args:
        out: where the answer goes.
        aux: where thinking, tool lines and notices go (stderr for ``run``, so stdout stays the answer).
        show_thinking: show the model's thinking, dim, behind a gutter.
        show_answer: stream the answer (off when the answer is printed another way, e.g. as parsed JSON).
        notices: show retries and notices (off when a script reads stderr and wants one error line).
        markdown: render the answer's markdown (styled only when ``out`` is a colour terminal); off for
            ``run``, whose stdout is exactly the answer.
    """

    def __init__(
        self,
        out: TextIO,
        aux: TextIO,
        *,
        show_thinking: bool,
        show_answer: bool = True,
        notices: bool = True,
        markdown: bool = False,
    ) -> None:
        self.out = out
        self.aux = aux
        self.show_thinking = show_thinking
        self.show_answer = show_answer
        self.notices = notices
        self.markdown = markdown
        self._out_style = Style(out)
        self._aux_style = Style(aux)
        self._mode: str = ""  # what the last write was: "", "text", "thinking" or "call:<id>"
        self._line_open: dict[int, bool] = {}
        self._arguments: dict[str, dict[str, Any]] = {}  # by call id, for calls denied before they start
        self._answer: MarkdownStream | None = None  # while an answer streams with markdown on

    def _write(self, stream: TextIO, text: str) -> None:
        if not text:
            return
        stream.write(text)
        stream.flush()
        self._line_open[id(stream)] = not text.endswith("\n")

    def _end_line(self) -> None:
        if self._answer is not None:
            self._write(self.out, self._answer.finish())
            self._answer = None
        # Both streams are usually the same terminal: a line left open on either is closed first.
        for stream in (self.out, self.aux):
            if self._line_open.get(id(stream)):
                self._write(stream, "\n")

    def __call__(self, event: Event) -> None:
        """Show one event."""
        if isinstance(event, MessageUpdate):
            self._delta(event)
        elif isinstance(event, ApprovalRequired):
            self._arguments[event.call_id] = event.arguments
        elif isinstance(event, ToolExecutionStart):
            self._end_line()
            self._write(self.aux, self._aux_style.tool(f"⚙ {call_text(event.name, event.arguments)}") + " …")
            self._mode = f"call:{event.call_id}"
        elif isinstance(event, ToolExecutionEnd):
            self._tool_end(event)
        elif isinstance(event, Retry):
            self._notice(f"retrying in {event.delay_s:.1f}s: {event.reason}")
        elif isinstance(event, Notice):
            self._notice(event.text)
        elif isinstance(event, AgentEnd):
            self._end_line()
            self._mode = ""

    def _delta(self, event: MessageUpdate) -> None:
        if event.kind == "thinking":
            if not self.show_thinking:
                return
            stream, style = self.aux, self._aux_style
            if self._mode != "thinking":
                self._end_line()
                self._mode = "thinking"
            # The gutter starts every line of thinking, including lines that begin mid-delta.
            for i, piece in enumerate(event.delta.split("\n")):
                if i:
                    self._write(stream, "\n")
                if piece:
                    gutter = "" if self._line_open.get(id(stream)) else style.dim(_GUTTER)
                    self._write(stream, gutter + style.dim(piece))
            return
        if not self.show_answer:
            return
        delta = event.delta
        if self._mode != "text":
            self._end_line()
            self._mode = "text"
            if self.markdown:
                self._answer = MarkdownStream(self._out_style, _columns(self.out))
            if not delta.strip():
                return
            delta = delta.lstrip("\n")
        if self._answer is None:
            self._write(self.out, delta)
            return
        self._write(self.out, self._answer.feed(delta))
        # A dropped line (a code fence) ends in an erase, not a newline, yet leaves the cursor at a row's start.
        self._line_open[id(self.out)] = self._answer.line_open

    def _tool_end(self, event: ToolExecutionEnd) -> None:
        style = self._aux_style
        text = text_of(event.result.content)
        failed = event.result.is_error or event.disposition != "completed"
        if event.disposition == "blocked":
            mark = style.bad(f"✗ denied: {result_summary(text)}")
        elif failed:
            mark = style.bad(f"✗ {result_summary(text)}")
        else:
            mark = style.ok(f"✓ {result_summary(text)}")
        if self._mode == f"call:{event.call_id}" and self._line_open.get(id(self.aux)):
            self._write(self.aux, f" {mark}\n")
        else:
            self._end_line()
            shown = call_text(event.name, self._arguments.get(event.call_id, {}))
            self._write(self.aux, f"{style.tool('⚙ ' + shown)} {mark}\n")
        self._arguments.pop(event.call_id, None)
        self._mode = ""

    def _notice(self, text: str) -> None:
        if not self.notices:
            return
        self._end_line()
        self._write(self.aux, self._aux_style.dim(f"· {text}") + "\n")
        self._mode = ""


class JsonRenderer:
    """Writes every event as one JSON line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, event: Event) -> None:
        """Write one event."""
        self.out.write(event_to_json(event) + "\n")
        self.out.flush()


class TerminalProgress:
    """Shows the bundled model's install and start on stderr: download bytes, build steps, loading.

    A line per event kind at most about once a second, so a long build stays readable.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._style = Style(self.stream)
        self._last = ("", 0.0)

    def __call__(self, event: str, done: int | None, total: int | None) -> None:
        """Report ``event`` (see ``steadyloop.local.Progress``)."""
        now = time.monotonic()
        finished = done is not None and total is not None and done >= total
        if event == self._last[0] and not finished and now - self._last[1] < 1.0:
            return
        self._last = (event, now)
        line = event
        if done is not None and event.startswith(("download", "assemble")):
            line += f": {done / 1e6:.1f}" + (f" / {total / 1e6:.1f} MB" if total else " MB")
        elif done is not None and total is not None:
            line += f": {done}/{total}"
        self.stream.write(self._style.dim(f"[local model] {line}") + "\n")
        self.stream.flush()


def to_json_line(value: object) -> str:
    """A value as one line of JSON."""
    return json.dumps(value, ensure_ascii=False)


def one_line(error: BaseException, limit: int = 400) -> str:
    """An error as one line: its first line, spaces collapsed, cut at ``limit`` characters."""
    text = str(error).strip() or type(error).__name__
    line = " ".join(text.splitlines()[0].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
