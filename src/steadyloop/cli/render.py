"""Showing a run in a terminal: the answer as it streams, thinking in a dim gutter, tool calls on one line.

The run holds back answer text that may be a tool call the model wrote as text until the message is
decided, so a call recovered from the text is never printed as the answer, in a terminal or a pipe. While
a request that went out (``RequestSent``) waits for its first token, ``tick`` shows that the model is
reading the prompt, with the time spent, and then that it is writing while its text is held. Colour is
plain ANSI, used only when the stream is a terminal and ``NO_COLOR`` is unset (no-color.org).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from typing import Any, TextIO

from ..events import (
    AgentEnd,
    ApprovalDecided,
    ApprovalRequired,
    Event,
    Failover,
    MessageEnd,
    MessageUpdate,
    Notice,
    RequestSent,
    Retry,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnStart,
    event_to_json,
)
from ..messages import AssistantMessage, text_of
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
_LISTED = 24  # the most names a result shown as a list may hold
_LISTED_CHARS = 240
_SPACE = re.compile(r"\s")
_ENTRY_NOTE = re.compile(r"\s+\([^()]*\)$")  # what a listing says after an entry's name
_QUIET_WAIT_S = 2.0  # a wait shorter than this is not worth a line
# Piped, the wait is said again this often with its seconds: a log (or a person watching one) never goes ten
# seconds without a sign of life while a CPU reads a long prompt.
_PIPED_REPEAT_S = 7.0
_READING = "the model is reading the prompt"
# An answer written from tool results is held until it is checked (steering/routing.py): its tokens arrive but
# are not shown, and "reading the prompt" would then be untrue for the seconds it takes.
_WRITING = "the model is writing the answer, shown once checked against the tool results"
# Text that may be a tool call written as text is held by the run until the reply is complete.
_WRITING_HELD = "the model is writing, shown once it is clear this is no tool call"
_HELD = {"answer_held": _WRITING, "call_held": _WRITING_HELD}
_DENIALS = {
    "refused": "not run: you said no",
    "interrupted": "not run: you said no (Ctrl-C)",
    "timeout": "not run: no answer came in time",
    "no terminal to ask": "not run: it needs your approval and there is no terminal to ask (run it in one)",
    "no approval surface": "not run: it needs an approval and nothing here can give one",
    "aborted": "not run: the run was stopped",
    "cancelled": "not run: the run was stopped",
}


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
    """A tool result in a few words: its one line, a short list as a list (a folder's entries), or how
    many lines it has."""
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines:
        return "done"
    if len(lines) == 1:
        line = lines[0]
        return line if len(line) <= _SUMMARY_CHARS else line[: _SUMMARY_CHARS - 1] + "…"
    notes = [line for line in lines if line.startswith(("[", "("))]  # "(and 3 hidden, ...)", "[12 more]"
    names = [_bullet_name(line) for line in lines if not line.startswith(("[", "("))]
    joined = ", ".join(names) + "".join(f" {note}" for note in notes)
    # Names, one a line (a listing, a glob): shown whole, so what the tool found is on screen whatever the
    # model makes of it.
    listing = names and not any(_SPACE.search(name) for name in names)
    if listing and len(names) <= _LISTED and len(joined) <= _LISTED_CHARS:
        return joined
    return f"{len(lines)} lines"


def _bullet_name(line: str) -> str:
    """``- docs/ (folder)`` as ``docs/``, ``- a.txt (3 bytes, 1 line)`` as ``a.txt``: a listing's entry as a
    person reads it."""
    if line.startswith("- "):
        line = _ENTRY_NOTE.sub("", line[2:])
    return line


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
        self._denials: dict[str, str] = {}  # by call id: why the approval said no
        self._answer: MarkdownStream | None = None  # while an answer streams with markdown on
        self._waiting_since: float | None = None  # a request awaits its first token since then
        self._step_open = False  # a step began and showed nothing yet: a request sent now is waited on
        self._wait_shown = False  # the wait is on screen (a live line in a terminal, one line elsewhere)
        self._wait_said = 0.0  # piped: the seconds waited when the wait was last said
        self._waiting_for = _READING  # what the wait is: the prompt read, or a held answer written

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
        if isinstance(event, TurnStart):
            # A step began: its assistant message opens only with its first piece, and the wait for it
            # only once a request is out (connecting to nothing is no model reading anything).
            self._waiting_since = None
            self._step_open = True
            self._waiting_for = _READING
            return
        if isinstance(event, RequestSent):
            if self._step_open and self._waiting_since is None:
                self._waiting_since = time.monotonic()
            return
        if isinstance(event, Notice) and event.name in _HELD:
            self._answer_held(_HELD[event.name])
            return
        output = isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage)
        if output or isinstance(
            event, MessageUpdate | ToolExecutionStart | Notice | Retry | Failover | AgentEnd
        ):
            # A notice leaves the wait going; a retry or a hop waits again once its request is out.
            self._stop_waiting(keep=isinstance(event, Notice))
            if not isinstance(event, Notice | Retry | Failover):
                self._step_open = False
        if isinstance(event, MessageUpdate):
            self._delta(event)
        elif isinstance(event, ApprovalRequired):
            self._arguments[event.call_id] = event.arguments
        elif isinstance(event, ApprovalDecided):
            if event.decision == "deny":
                self._denials[event.call_id] = event.reason
        elif isinstance(event, ToolExecutionStart):
            self._end_line()
            self._write(self.aux, self._aux_style.tool(f"⚙ {call_text(event.name, event.arguments)}") + " …")
            self._mode = f"call:{event.call_id}"
        elif isinstance(event, ToolExecutionEnd):
            self._tool_end(event)
        elif isinstance(event, Retry):
            self._notice(f"retrying in {event.delay_s:.1f}s: {event.reason}")
        elif isinstance(event, Failover):
            where = f"{event.to_model} at {event.to_endpoint}" if event.to_model else event.to_endpoint
            self._notice(
                f"{event.from_endpoint} failed ({event.kind or 'error'}): trying {where}: {event.cause}"
            )
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
        self._text(event.delta)

    def _text(self, delta: str) -> None:
        """Show answer text."""
        if not self.show_answer or not delta:
            return
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
            reason = self._denials.pop(event.call_id, None)
            mark = style.bad(f"✗ {_denial_sentence(reason, text)}")
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
        self._write(self.aux, self._aux_style.dim(f"· {' '.join(text.split())}") + "\n")
        self._mode = ""

    # -- waiting for the first token --------------------------------------------------------------------

    def tick(self, now: float | None = None) -> None:
        """Show how long the model has been reading the prompt; call it about once a second.

        In a terminal the line is rewritten in place and erased when output starts; elsewhere a line is
        written once the wait passes two seconds, and again with the seconds every seven seconds after.
        Nothing is shown when notices are off.
        """
        since = self._waiting_since
        if since is None or not self.notices:
            return
        waited = (now if now is not None else time.monotonic()) - since
        if waited < _QUIET_WAIT_S:
            return
        if _isatty(self.aux):
            if not self._wait_shown:
                self._end_line()
            self.aux.write("\r\x1b[2K" + self._aux_style.dim(f"· {self._waiting_for}… {waited:.0f} s"))
            self.aux.flush()
            self._wait_shown = True
        elif not self._wait_shown:
            self._end_line()
            self._write(self.aux, f"· {self._waiting_for}…\n")
            self._wait_shown, self._wait_said = True, waited
        elif waited - self._wait_said >= _PIPED_REPEAT_S:
            self._write(self.aux, f"· {self._waiting_for}… {waited:.0f} s\n")
            self._wait_said = waited

    def _answer_held(self, writing: str) -> None:
        """The answer is being written but held (until checked, or until it is clear it is no call): the
        wait goes on, said as what it now is."""
        if self._waiting_since is None or not self.notices:
            return
        self._waiting_for = writing
        if self._wait_shown and not _isatty(self.aux):
            self._write(self.aux, f"· {writing}…\n")  # the line said the prompt; one more says this

    def _stop_waiting(self, *, keep: bool = False) -> None:
        """Output started (or something else must be said): the wait is over, or ``keep`` it going after."""
        if self._waiting_since is None:
            return
        if self._wait_shown and _isatty(self.aux):
            self.aux.write("\r\x1b[2K")
            self.aux.flush()
        self._wait_shown = False
        if not keep:
            self._waiting_since = None


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

    In a terminal a counted step (a download, the build) rewrites one line in place; elsewhere it gets a line
    at most every five seconds, and when it finishes. Every other event is a line of its own.
    """

    def __init__(self, stream: TextIO | None = None, *, every: float | None = None) -> None:
        self.stream = stream or sys.stderr
        self._style = Style(self.stream)
        self._live = _isatty(self.stream)
        self._every = every if every is not None else (0.5 if self._live else 5.0)
        self._last = ("", 0.0)
        self._open = False  # a counted step's line is on screen, not ended yet

    def __call__(self, event: str, done: int | None, total: int | None) -> None:
        """Report ``event`` (see ``steadyloop.local.Progress``)."""
        now = time.monotonic()
        counted = done is not None
        finished = counted and total is not None and done is not None and done >= total
        if counted and event == self._last[0] and not finished and now - self._last[1] < self._every:
            return
        self._last = (event, now)
        line = event
        if done is not None and event.startswith(("download", "assemble")):
            line += f": {done / 1e6:.1f}" + (f" / {total / 1e6:.1f} MB" if total else " MB")
        elif done is not None and total is not None:
            line += f": {done}/{total}"
        shown = self._style.dim(f"[local model] {line}")
        if self._live and counted:
            self.stream.write("\r\x1b[2K" + shown + ("\n" if finished else ""))
            self._open = not finished
        else:
            self.stream.write(("\n" if self._open else "") + shown + "\n")
            self._open = False
        self.stream.flush()


def _denial_sentence(reason: str | None, result: str) -> str:
    """Why a call did not run, as one sentence."""
    if reason in _DENIALS:
        return _DENIALS[reason]
    if reason:
        return f"not run: {reason}"
    text = result_summary(result)
    return f"not run: {text.removeprefix('Denied: ')}"


def to_json_line(value: object) -> str:
    """A value as one line of JSON."""
    return json.dumps(value, ensure_ascii=False)


def one_line(error: BaseException, limit: int = 400) -> str:
    """An error as one line: its first line, spaces collapsed, cut at ``limit`` characters."""
    text = str(error).strip() or type(error).__name__
    line = " ".join(text.splitlines()[0].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
