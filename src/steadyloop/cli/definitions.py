"""Which matching lines of a search define the name searched for; sans I/O.

Asked "Where is the echo function defined?" in click's source, the 1.5B model searched for "echo": 101
lines matched, and the room the search had showed the first 25 of them, all from the change log and the
docs. ``def echo(`` in ``src/click/utils.py`` was not among them, and the answer was "in the click module".
When a search finds more than it can show, the lines that define something the pattern names come first
(:func:`definition_rank`), the way an editor's "go to definition" is asked before "find all uses".

A definition is read off the line's opening keyword, in the languages a project most often holds: Python's
``def`` and ``class``, JavaScript's and TypeScript's ``function``, ``class``, ``interface``, ``type``,
``const``, ``let`` and ``var``, Go's ``func`` and ``type``, Rust's ``fn``, ``struct``, ``enum``, ``trait``
and ``mod``, and the like, after modifiers such as ``export``, ``pub`` or ``async``. Linear in the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["DEFINES_MATCH", "DEFINES_OTHER", "NOT_DEFINITION", "declarations", "definition_rank"]

#: The ranks :func:`definition_rank` gives, best first.
DEFINES_MATCH = 0
DEFINES_OTHER = 1
NOT_DEFINITION = 2

_MODIFIER = (
    r"(?:export|default|pub(?:\([\w: ]*\))?|public|private|protected|internal|static|async|abstract|final"
    r"|sealed|open|override|extern|inline|virtual|unsafe|declare|readonly|data|case)"
)
_KEYWORD = (
    r"(?:def|class|function|fn|func|interface|struct|enum|trait|type|mod|module|macro_rules!|object"
    r"|record|const|let|var|val|sub|proc|impl)"
)
# A Go method (``func (c *Client) Do(``) names its receiver first. Blanks, not \s: over a whole file, a
# pattern whose \s ran across newlines would try every following line from every line.
_DEFINITION = re.compile(
    rf"^(?P<indent>[ \t]*)(?:{_MODIFIER}[ \t]+)*{_KEYWORD}\*?[ \t]+(?:\([^()\n]{{0,120}}\)[ \t]*)?"
    r"(?P<name>[A-Za-z_$][\w$]*)",
    re.MULTILINE,
)


def declarations(text: str) -> Iterator[tuple[str, bool]]:
    """The names ``text`` declares, in order, each with whether it is at the top level (not indented: a
    method is not). Linear in the text."""
    for found in _DEFINITION.finditer(text):
        yield found.group("name"), not found.group("indent")


def definition_rank(line: str, pattern: re.Pattern[str]) -> int:
    """How well ``line`` answers "where is what ``pattern`` names defined?": :data:`DEFINES_MATCH` when it
    defines a name and the pattern's match covers that whole name (``def echo(`` for ``echo`` or for
    ``def echo``), :data:`DEFINES_OTHER` when it defines a name the match only touches (``def secho(``,
    ``def echo_via_pager(``), :data:`NOT_DEFINITION` otherwise."""
    found = _DEFINITION.match(line)
    if found is None:
        return NOT_DEFINITION
    start, end = found.span("name")
    best = NOT_DEFINITION
    for match in pattern.finditer(line):
        if match.end() <= start or match.start() >= end:
            if match.start() >= end:
                break
            continue
        if match.start() <= start and match.end() >= end:
            return DEFINES_MATCH
        best = DEFINES_OTHER
    return best
