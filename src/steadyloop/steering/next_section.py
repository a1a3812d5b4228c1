"""A how-to answer that reads on into the next section of a document a tool returned; sans I/O.

Asked "How do I run the tests of this project?", the bundled 1.5B model read the README, wrote the two
commands it gives, and then went on copying the README, its next paragraphs, then its "## Use it" and the
code under it, until the token ceiling cut the answer off 87 s later. Told how, the user needs the steps;
a heading of the document, written out after the answer's own opening and about nothing the request names,
is where the answer has left them for another section. :class:`SectionWatch` is fed a held answer as it
streams and says so at that heading's line (the attempt then stops reading: ``TurnSink.enough``), and
:func:`before_next_section` cuts the whole answer there.

A heading is a Markdown one (``## Use it``) or a title underlined with one repeated mark (reStructuredText,
Markdown's setext): a line of text followed by a line of ``=``, ``-``, ``~``, ``^`` or ``*``, at least three.
The answer's line counts when it is that heading's text, whatever ``#``, ``*`` or ``_`` it is wrapped in;
lines inside code blocks, in the document or the answer, are code (a shell's ``# comment``), never headings.
A heading that shares a word with the request ("## Running the tests" for "How do I run the tests?") is
part of the answer. Linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["LEAST", "SectionWatch", "before_next_section", "headings"]

#: Characters of the answer's own before a heading can end it: its opening may name the section it reads.
LEAST = 200
_LONGEST_HEADING = 120

_ATX = re.compile(r"[ \t]{0,3}#{1,6}[ \t]+(\S[^\n]*?)[ \t#]*")
_UNDERLINE = re.compile(r"[ \t]*([=\-~^*])\1{2,}[ \t]*")
_FENCE = re.compile(r"[ \t]{0,3}(?:```|~~~)")  # a code block's fence: a "# comment" in it is code
_WORD = re.compile(r"[^\W\d_]{3,}")
# Words of a request that say nothing of its subject.
_NOT_SUBJECT = frozenset(
    [
        "how",
        "the",
        "and",
        "for",
        "you",
        "can",
        "could",
        "would",
        "should",
        "this",
        "that",
        "these",
        "those",
        "with",
        "what",
        "which",
        "does",
        "from",
        "into",
        "about",
        "want",
        "need",
        "please",
        "project",
        "here",
        "there",
        "its",
        "are",
        "was",
        "were",
        "will",
    ]
)


def _plain(line: str) -> str:
    """A heading's text as compared: without the marks around it, in lower case, spaces made one."""
    return " ".join(line.strip().strip("#*_ \t").split()).lower()


def headings(texts: Iterable[str]) -> frozenset[str]:
    """The headings of ``texts``, as :func:`_plain` writes them."""
    found: set[str] = set()
    for text in texts:
        previous = ""
        fenced = False
        for line in text.splitlines():
            if _FENCE.match(line):
                fenced, previous = not fenced, ""
                continue
            if not fenced and len(line) <= _LONGEST_HEADING:
                atx = _ATX.fullmatch(line)
                if atx is not None:
                    found.add(_plain(atx.group(1)))
                elif previous.strip() and _UNDERLINE.fullmatch(line) and not _UNDERLINE.fullmatch(previous):
                    found.add(_plain(previous))
            previous = line if len(line) <= _LONGEST_HEADING else ""
    found.discard("")
    return frozenset(found)


def _subject(text: str) -> set[str]:
    """The first three letters of each word of ``text`` that can say what it is about."""
    return {w[:3] for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _NOT_SUBJECT}


class SectionWatch:
    """Whether a how-to answer fed so far has written a heading of its results that the request does not
    name, past its first :data:`LEAST` characters (see the module docstring).

    ``feed`` returns why the answer should end there once it has (and from then on); ``None`` until then.
    ``cut`` is then where that heading's line begins.
    """

    __slots__ = ("_fenced", "_heads", "_partial", "_seen", "cut", "said")

    def __init__(self, request: str, results: Sequence[str]) -> None:
        asked = _subject(request)
        self._heads = frozenset(h for h in headings(results) if not _subject(h) & asked)
        self._partial: list[str] = []
        self._seen = 0  # characters of the answer before the line being fed
        self._fenced = False  # inside a code block of the answer
        self.cut: int | None = None
        self.said: str | None = None

    def feed(self, text: str) -> str | None:
        if self.said is not None or not self._heads or not text:
            return self.said
        if "\n" not in text:
            self._partial.append(text)
            return None
        lines = ("".join(self._partial) + text).split("\n")
        self._partial = [lines.pop()]
        for line in lines:
            if _FENCE.match(line):
                self._fenced = not self._fenced
            elif (
                not self._fenced
                and self._seen >= LEAST
                and len(line) <= _LONGEST_HEADING
                and _plain(line) in self._heads
            ):
                self.cut = self._seen
                self.said = (
                    f"the answer went on into {line.strip()!r}, a section of what a tool returned that "
                    "the request does not ask about; it was stopped there"
                )
                return self.said
            self._seen += len(line) + 1
        return None


def before_next_section(answer: str, request: str, results: Sequence[str]) -> str:
    """``answer`` up to the heading :class:`SectionWatch` stops it at, without the space before it;
    ``answer`` unchanged when there is none."""
    watch = SectionWatch(request, results)
    watch.feed(answer + "\n")
    if watch.cut is None:
        return answer
    return answer[: watch.cut].rstrip()
