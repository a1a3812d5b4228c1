"""A request that asks which file says something, and an answer that names none its search found; sans I/O.

Asked "Find the file that says something about a lease.", the 1.5B model searched for "lease", read the one
file the search found, and answered "The file contains the following lines:" and its lines: right, and no
answer to the question, which was the file. :func:`unnamed_files` says which files a search found (its
result's lines in the ``path:line: text`` form of ``grep -n``) when the request asks for a file and the
answer names none of them, by path or by file name; the answer is then sent back once to name it
(``grounding.AnswerGaps.unnamed``). Only a request that asks for the file alone: one that goes on ("...,
then read it: which port does it give?") is answered by what follows as much as by the file. A search that found more than :data:`MOST_FOUND` files is left alone:
the answer may rightly name a few. Linear in the answer, the results and the request.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["MOST_FOUND", "asks_for_file", "files_found", "unnamed_files"]

#: The most files a search may have found for an answer to be held to naming one of them.
MOST_FOUND = 5

# "Which file mentions Alice?", "What files talk about Thursday?", "Find the file that says ...", "the file
# where the port is set": asked for a file, not for what it says.
_FILE_ASKED = re.compile(
    r"\b(?:which|what)\s+files?\b|\bfind\s+(?:me\s+)?(?:the|a|any)\s+files?\b"
    r"|\bthe\s+files?\s+(?:that|which|where|with)\b",
    re.IGNORECASE,
)
# A request that asks more than the file ("Find the file that mentions nginx, then read it: which port does
# it give?"): held to naming the file, and nothing else, the 1.5B model's answer lost the port.
# "Where is the echo function defined?": the file that defines it is the answer.
_WHERE_DEFINED = re.compile(r"\bwhere\b[^?.!]{0,80}?\b(?:defined|declared|implemented)\b", re.IGNORECASE)
_MORE_ASKED = re.compile(r"\bthen\b|\band\s+(?:tell|say|show|read|give)\b|[:;]", re.IGNORECASE)
# A path that names a file: a name with an extension, in folders or not (not ".", not a search's pattern).
_FILE_PATH = re.compile(r"(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z0-9]{1,8}")
_GREP_LINE = re.compile(r"^([^\s:][^:\n]{0,255}):\d+:", re.MULTILINE)


def files_found(results: Sequence[str]) -> list[str]:
    """The files named at the start of search-result lines (``path:line: text``), each once, in order."""
    found: dict[str, None] = {}
    for result in results:
        for match in _GREP_LINE.finditer(result):
            found[match.group(1).strip()] = None
    return list(found)


def asks_for_file(request: str) -> bool:
    """Whether ``request`` asks which file says or defines something, and for nothing more ("Which file
    mentions Alice?", "Where is the echo function defined?"; not "..., then read it: which port?")."""
    # Two questions are counted, since a pattern for "?, text, ?" backtracks on long text.
    return (
        (_FILE_ASKED.search(request) is not None or _WHERE_DEFINED.search(request) is not None)
        and _MORE_ASKED.search(request) is None
        and request.rstrip().count("?") <= 1
    )


def unnamed_files(
    answer: str, results: Sequence[str], request: str, read: Sequence[str] = ()
) -> tuple[str, ...]:
    """The files a search found, or else the files ``read`` (the paths tools were called on), when
    ``request`` asks for a file and ``answer`` names none of them (see the module docstring); ``()``
    otherwise.

    Asked "Where is the request function defined?" in httpx's source, the 1.5B model read httpx/_api.py,
    the one file that defines it, and answered "in the httpx module": the package, not the file."""
    if not asks_for_file(request):
        return ()
    # (a path past any a tool takes is none: the pattern backtracks over a long run of folders)
    found = files_found(results) or [p for p in read if len(p) <= 1000 and _FILE_PATH.fullmatch(p.strip())]
    if not found or len(found) > MOST_FOUND:
        return ()
    low = answer.lower()
    if any(path.lower() in low or path.rsplit("/", 1)[-1].lower() in low for path in found):
        return ()
    return tuple(found)
