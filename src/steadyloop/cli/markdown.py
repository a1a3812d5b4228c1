"""Markdown for a streamed answer in a terminal, sans-I/O: text in, the bytes to write out.

A partial line is written raw as it arrives, so the person sees tokens appear. When the line completes it is
rewritten styled (carriage return, erase line, the styled line), but only if the raw text stayed on one
terminal row: once it wrapped, the cursor is no longer on the row the line began on, and a rewrite would
leave half of it behind. A line that arrives whole is written styled at once.

With styling off (not a terminal, or ``NO_COLOR``), the output is exactly the input.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .render import Style

__all__ = ["MarkdownStream"]

_REWRITE = "\r\x1b[2K"  # back to the start of the row and erase it
_BOLD, _DIM, _ITALIC, _CODE = "1", "2", "3", "36"
_CODE_INDENT = "  "
_QUOTE_GUTTER = "▎ "
_RULE_CELLS = 40

_FENCE = re.compile(r" {0,3}(?P<fence>`{3,}(?=[^`]*$)|~{3,})")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]+(?P<text>.*?))?(?:[ \t]+#+)?[ \t]*$")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r" {0,3}>[ \t]?")
_BULLET = re.compile(r"(?P<indent>[ \t]*)[-*+](?P<space>[ \t]+)(?P<text>.*)")
_NUMBERED = re.compile(r"(?P<marker>[ \t]*\d{1,9}[.)][ \t]+)(?P<text>.*)")
_LINK = re.compile(r"\[(?P<text>[^\]\n]+)\]\((?P<url>(?:[^()\s]|\([^()\s]*\))+)\)")
# A closing delimiter: after something that is not a space or the same character, before no letter or digit.
_CLOSERS = {
    marker: re.compile(
        rf"(?<![\s{re.escape(marker[0])}]){re.escape(marker)}(?![{re.escape(marker[0])}]|[^\W_])"
    )
    for marker in ("**", "__", "*", "_")
}
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")

Span = tuple[str, tuple[str, ...]]  # text and the SGR codes it is shown with


class MarkdownStream:
    """Renders one streamed answer's markdown, line by line.

    Args:
        style: whether to style at all (its ``enabled``); off means the output is the input, unchanged.
        width: the terminal's width in cells, to know whether a raw partial line still sits on one row.
    """

    def __init__(self, style: Style, width: int) -> None:
        self.style = style
        self.width = width
        self._shown: list[str] = []  # the current line's pieces so far, on screen raw (when styling)
        self._open = False  # something is written on the current line
        self._fence: str | None = None  # the opening fence while inside a code block

    @property
    def line_open(self) -> bool:
        """Something is written on the current line (the cursor is not at the start of a row)."""
        return self._open

    def feed(self, text: str) -> str:
        """Take the next piece of the answer; returns what to write now."""
        if not self.style.enabled:
            _, newline, tail = text.rpartition("\n")
            self._open = bool(tail) or (self._open and not newline)
            return text
        *lines, tail = text.split("\n")
        out = []
        for line in lines:
            out.append(self._complete("".join(self._shown), line))
            self._shown.clear()
        if tail:
            self._shown.append(tail)
            out.append(tail)
        self._open = bool(self._shown)
        return "".join(out)

    def finish(self) -> str:
        """End the answer: a last line without a newline is rewritten styled. Returns what to write."""
        line = "".join(self._shown)
        self._shown.clear()
        self._open = False
        styled = self._render(line) if line else None
        self._fence = None
        if not line or not _fits(line, self.width):
            return ""
        return _REWRITE + (styled or "")

    def _complete(self, shown: str, rest: str) -> str:
        styled = self._render(shown + rest)  # always, so the code-block state follows every line
        if shown and not _fits(shown, self.width):
            return rest + "\n"
        return (_REWRITE if shown else "") + ("" if styled is None else styled + "\n")

    def _render(self, line: str) -> str | None:
        """One complete line styled, or None for a line that is not shown (a code fence)."""
        line = line.removesuffix("\r")
        if self._fence is not None:
            if _closes(line, self._fence):
                self._fence = None
                return None
            return _CODE_INDENT + _paint([(line, (_DIM,))])
        if match := _FENCE.match(line):
            self._fence = match["fence"]
            return None
        if match := _HEADING.match(line):
            return _paint(_inline(match["text"] or "", (_BOLD,)))
        if _RULE.match(line):
            return _paint([("─" * max(1, min(self.width - 1, _RULE_CELLS)), (_DIM,))])
        if match := _QUOTE.match(line):
            depth, rest = 0, line
            while match:
                depth += 1
                rest = rest[match.end() :]
                match = _QUOTE.match(rest)
            return _paint([(_QUOTE_GUTTER * depth, (_DIM,)), *_inline(rest, (_DIM,))])
        if match := _BULLET.match(line):
            return match["indent"] + "•" + match["space"] + _paint(_inline(match["text"], ()))
        if match := _NUMBERED.match(line):
            return match["marker"] + _paint(_inline(match["text"], ()))
        return _paint(_inline(line, ()))


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and len(stripped) >= len(fence)
        and stripped == fence[0] * len(stripped)
    )


def _inline(text: str, codes: tuple[str, ...]) -> list[Span]:
    """Emphasis, strong, code spans, links and backslash escapes within one line."""
    spans: list[Span] = []
    plain: list[str] = []
    unclosed: dict[str, int] = {}  # by marker: a position after which no closer is left

    def flush() -> None:
        if plain:
            spans.append(("".join(plain), codes))
            plain.clear()

    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in _PUNCTUATION:
            plain.append(text[i + 1])
            i += 2
        elif char == "`":
            run = _run(text, i)
            end = _code_end(text, i + run, run)
            if end is None:
                plain.append(text[i : i + run])
            else:
                flush()
                spans.append((_code_content(text[i + run : end]), _with(codes, _CODE)))
                run = end + run - i
            i += run
        elif char == "[" and (link := _LINK.match(text, i)):
            flush()
            spans.extend(_inline(link["text"], codes))
            spans.append((f" ({link['url']})", _with(codes, _DIM)))
            i = link.end()
        elif char in "*_":
            for marker, code in ((char * 2, _BOLD), (char, _ITALIC)):
                if not _opens(text, i, marker) or unclosed.get(marker, len(text)) <= i:
                    continue
                closer = _CLOSERS[marker].search(text, i + len(marker) + 1)
                if closer is None:
                    unclosed[marker] = i  # no later opener will find one either: a line costs n, not n²
                else:
                    end = closer.start()
                    flush()
                    spans.extend(_inline(text[i + len(marker) : end], _with(codes, code)))
                    i = end + len(marker)
                    break
            else:
                run = 2 if text.startswith(char * 2, i) else 1  # an unmatched ** stays whole
                plain.append(text[i : i + run])
                i += run
        else:
            plain.append(char)
            i += 1
    flush()
    return spans


def _with(codes: tuple[str, ...], code: str) -> tuple[str, ...]:
    return codes if code in codes else (*codes, code)


def _code_end(text: str, start: int, run: int) -> int | None:
    """Where the backtick run closing a code span opened by ``run`` backticks begins."""
    at = text.find("`" * run, start)
    while at != -1:
        length = _run(text, at)
        if length == run:
            return at
        at = text.find("`" * run, at + length)
    return None


def _run(text: str, at: int) -> int:
    """How many of the same character start at ``at``."""
    end = at
    while end < len(text) and text[end] == text[at]:
        end += 1
    return end - at


def _code_content(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == " " and text.strip():
        return text[1:-1]
    return text


def _opens(text: str, start: int, marker: str) -> bool:
    """Whether ``marker`` at ``start`` can open emphasis.

    Stricter than CommonMark on purpose: a delimiter inside a word never counts, so ``snake_case`` and
    ``2*3*4`` stay as written.
    """
    body = start + len(marker)
    return (
        text.startswith(marker, start)
        and not (start > 0 and text[start - 1].isalnum())
        and body < len(text)
        and not text[body].isspace()
        and text[body] != marker[0]
    )


def _paint(spans: list[Span]) -> str:
    return "".join(
        f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes and text else text for text, codes in spans
    )


def _fits(shown: str, width: int) -> bool:
    """Whether raw text written from the start of a row left the cursor on that row."""
    column = 0
    for char in shown:
        if char == "\r":
            column = 0
            continue
        if char == "\t":
            column = (column // 8 + 1) * 8
        elif unicodedata.category(char) in ("Cc", "Cs"):  # escapes and the like: no telling where it went
            return False
        else:
            column += _cells(char)
        if column >= width:  # a full row may already have wrapped, depending on the terminal
            return False
    return True


def _cells(char: str) -> int:
    if char == "\ufe0f":  # the emoji presentation selector widens the character before it
        return 1
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
