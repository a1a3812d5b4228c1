"""Whether a value repaired from a text holds only what the text holds (internal): ``Provenance``.

A repair may drop what it cannot read and complete what was cut off (close a string, an object), never make
up a value: a tool that runs with an argument the model never wrote does something nobody asked for. The
repairer reads broken text by heuristics, and a heuristic can be wrong in a way no test foresaw, so every
repaired reading is checked leaf by leaf before it is taken:

- a string (key or value) must be a piece of the text, as written or with its escapes read (``\\u00e9``,
  ``\\n``, a surrogate pair), and a backslash the repairer dropped is forgiven;
- a number must be written in the text as a number of its own, not a piece of a word or of a longer number;
- ``true``/``false``/``null`` must be written in some letter case, ``None`` counting as ``null``.

The check costs time linear in the text: leaves are looked for from where the last one was found (a
repairer reads in order), and the scanning a reading may cost is capped at a multiple of the text's
length; a reading that needs more (its leaves far out of order) is not taken.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["Provenance"]

# A number standing on its own: not inside a word, not a piece of a longer number.
_NUMBER = re.compile(r"(?<![\w.+-])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_ESCAPE = re.compile(
    r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}"
    r"|U(?:000[0-9a-fA-F]|0010)[0-9a-fA-F]{4}|.)",
    re.S,
)
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: How many times over its text a reading's check may scan before the reading is given up.
_SCAN_FACTOR = 16


class Provenance:
    """One text, asked whether values read from it were written in it."""

    __slots__ = ("_budget", "_cursors", "_forms", "_lowered", "_numbers", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._forms: list[str] | None = None
        self._numbers: set[float] | None = None
        self._lowered: str | None = None
        self._cursors: list[int] = []
        self._budget = 0

    def holds(self, value: Any) -> bool:
        """Whether every key and leaf of ``value`` was written in the text."""
        forms = self._forms_of_text()
        self._cursors = [0] * len(forms)
        self._budget = _SCAN_FACTOR * (len(self._text) + 64)
        pending: list[Any] = [value]
        while pending:
            item = pending.pop()
            if isinstance(item, dict):
                # Reversed onto the stack, so leaves are checked in the order they were written.
                for key, inner in reversed(item.items()):
                    pending.append(inner)
                    pending.append(_Key(key))
            elif isinstance(item, list):
                pending.extend(reversed(item))
            elif not self._leaf(item.text if isinstance(item, _Key) else item):
                return False
        return True

    def _leaf(self, leaf: Any) -> bool:
        if isinstance(leaf, str):
            return self._string(leaf)
        if leaf is None or isinstance(leaf, bool):
            return self._literal(leaf)
        if isinstance(leaf, int | float):
            return self._number(leaf)
        return False

    def _string(self, leaf: str) -> bool:
        if not leaf:
            return True  # a value the repairer completed as empty holds nothing made up
        forms = self._forms_of_text()
        needles = (leaf, _joined(leaf))
        for ordered in (True, False):
            for index, form in enumerate(forms):
                for needle in needles:
                    if self._find(index, form, needle, ordered):
                        return True
                if self._budget < 0:
                    return False
        return False

    def _find(self, index: int, form: str, needle: str, ordered: bool) -> bool:
        start = self._cursors[index] if ordered else 0
        at = form.find(needle, start)
        self._budget -= (len(form) if at < 0 else at + len(needle)) - start
        if at < 0:
            return False
        if ordered:
            self._cursors[index] = at + len(needle)
        return True

    def _literal(self, leaf: bool | None) -> bool:
        if self._lowered is None:
            self._lowered = self._text.lower()
        spellings = {True: ("true",), False: ("false",), None: ("null", "none")}[leaf]
        return any(spelling in self._lowered for spelling in spellings)

    def _number(self, leaf: float) -> bool:
        if isinstance(leaf, float) and math.isnan(leaf):
            return self._literal_word("nan")
        if self._numbers is None:
            self._numbers = _numbers_in(self._text)
        if leaf in self._numbers:
            return True
        return math.isinf(leaf) and self._literal_word("infinity")

    def _literal_word(self, word: str) -> bool:
        if self._lowered is None:
            self._lowered = self._text.lower()
        return word in self._lowered

    def _forms_of_text(self) -> list[str]:
        """The text as written, with its escapes read, and both without backslashes: the ways a repairer
        may have copied a string out of it."""
        if self._forms is None:
            text = self._text
            if "\\" not in text:
                self._forms = [text]
            else:
                decoded = _decoded(text)
                self._forms = [decoded, text, decoded.replace("\\", ""), text.replace("\\", "")]
        return self._forms


class _Key:
    """A key on the walk's stack, told apart from a string value only so the stack can hold both."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _numbers_in(text: str) -> set[float]:
    found: set[float] = set()
    for token in _NUMBER.findall(text):
        integral = not any(mark in token for mark in ".eE")
        try:
            found.add(int(token) if integral else float(token))
        except ValueError:  # more digits than Python converts to an int
            found.add(float(token))
    return found


def _decoded(text: str) -> str:
    """The text with every backslash escape read (JSON's and Python's), surrogate pairs joined; an escape
    that reads as nothing is kept as written."""

    def one(found: re.Match[str]) -> str:
        escape = found.group()
        kind = escape[1]
        if len(escape) == 2:
            return _SIMPLE.get(kind, kind if kind in "'‘’“”" else escape)
        if kind == "u":
            return _joined("".join(chr(int(part, 16)) for part in escape[2:].split("\\u")))
        return chr(int(escape[2:], 16))

    return _ESCAPE.sub(one, text)


def _joined(text: str) -> str:
    """Surrogate pairs as the characters they stand for; a lone surrogate stays as it is."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
