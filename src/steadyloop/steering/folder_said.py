"""Whether a number an answer states is what a listed folder holds, said of that folder; sans I/O.

A listing gives each folder what it holds directly (``- atlas/ (folder: 1 file, 2 folders)``), and an
answer may pass that on: "The atlas folder contains 1 file and 2 folders.", "7 files in the docs folder".
Such a number is no count of the listing's own entries, and holding it to them would send a right answer
back. But only said of that folder: "There are 3 folders in the current directory: atlas, docs, and
setup.cfg." (two folders and a file, written so by the 1.5B model) counts the listing, and 3 is wrong
there, whatever atlas/ holds. A number is said of a folder when the nearest listed name before it in its
sentence is that folder's ("atlas ... 2 folders"), or when it is followed by "in" and the folder's name
("7 files in the docs folder"). Linear in the answer (after one pass over the listed names).
"""

from __future__ import annotations

import bisect
import re

from .result_counts import folder_counts, folder_holds

__all__ = ["FolderCountsSaid"]

# The end of a sentence: a full stop, a question or exclamation mark followed by a space, or a line's end
# (not the dot of "setup.cfg"); a semicolon ends a clause as well.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;\n]")
_IN_FOLDER = re.compile(r"\s+in\s+(?:the\s+)?[`'\"*]?([\w.-]+)/?", re.IGNORECASE)
# The nouns a folder's count is said in: its files, its folders, or all it holds.
_COUNTED = re.compile(r"files?|(?:sub)?folders?|director(?:y|ies)|entry|entries|items?")
_NAMES_AT_MOST = 2_000  # listed names looked for in an answer


class FolderCountsSaid:
    """The listed folders an answer names, where, and what each holds (see the module docstring)."""

    __slots__ = ("_ends", "_held", "_named", "_named_at")

    def __init__(self, answer: str, listing: str) -> None:
        counts = folder_counts(listing)
        self._held = {name.rstrip("/").lower(): held for name, held in counts.items()}
        names = sorted(self._held, key=len, reverse=True)[:_NAMES_AT_MOST]
        self._named_at: list[int] = []
        self._named: list[str] = []
        if names:
            any_name = "|".join(re.escape(n) for n in names)
            for match in re.finditer(
                rf"(?<![\w.-])({any_name})(?![\w-]|\.[A-Za-z0-9])", answer, re.IGNORECASE
            ):
                self._named_at.append(match.start())
                self._named.append(match.group(1).lower())
        self._ends = [m.start() for m in _SENTENCE_END.finditer(answer)]

    def said_of_folder(self, answer: str, start: int, end: int, number: int) -> bool:
        """Whether ``number``, stated at ``answer[start:end]`` ("7 files", "2 folders", "3 entries"), is
        what a listed folder holds of that kind, said of that folder."""
        noun = answer[start:end].rsplit(None, 1)[-1].lower()
        if not self._held or not _COUNTED.fullmatch(noun):
            return False
        after = _IN_FOLDER.match(answer, end)
        if after is not None and after.group(1).lower() in self._held:
            return _holds(self._held[after.group(1).lower()], noun, number)
        before = bisect.bisect_left(self._named_at, start) - 1
        if before < 0:
            return False
        # No sentence's end between the name and the number.
        sentence_end = bisect.bisect_left(self._ends, self._named_at[before])
        if sentence_end < len(self._ends) and self._ends[sentence_end] < start:
            return False
        return _holds(self._held[self._named[before]], noun, number)


def _holds(held: tuple[int, int], noun: str, number: int) -> bool:
    kind = (
        "files"
        if noun.startswith("file")
        else "folders"
        if noun.startswith(("folder", "subfolder", "director"))
        else "entries"  # entries, items
    )
    return folder_holds(held, kind) == number
