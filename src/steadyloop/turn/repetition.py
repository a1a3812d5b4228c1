"""Streamed text that has fallen into a loop; sans I/O.

A small model at temperature 0 can fall into a loop and stay there: asked "What are the rules of the game
'Uno'?", the bundled 1.5B model wrote for 523 s, 2,900 tokens and more, until the server's shared cache
was full and every other request on it failed with "Context size has been exceeded". Such text is exact:
the same piece, to the letter, again and again. :class:`RepetitionWatch` is fed the text as it streams
and says when its last :data:`WINDOW` characters are one piece of at most :data:`MOST_PERIOD` characters
repeated; the attempt then stops reading, which closes the request and stops the server generating
(``attempt.py``). Prose, code and tables are never that regular for that long: a table's rows differ
in their cells, and a rule of dashes is far shorter than the window.

Each check looks back once for the text's last few characters and compares two slices of the window, and
a check is made only after :data:`EVERY` new characters: linear in the text fed.
"""

from __future__ import annotations

import re

__all__ = ["EVERY", "MOST_PERIOD", "WINDOW", "RepetitionWatch", "without_loop"]

#: The characters at the end of the text that must all be one repeated piece.
WINDOW = 1200
#: The longest piece that counts: a loop of sentences or list items, not of pages.
MOST_PERIOD = 400
#: New characters between two checks.
EVERY = 200
_PROBE = 48  # the text's last characters, looked for again to find the piece's length


class RepetitionWatch:
    """Whether the text fed so far ends in a loop (see the module docstring).

    ``feed`` returns the length of the repeated piece once the loop is found (and from then on); ``None``
    until then.
    """

    __slots__ = ("_pending", "_since", "_tail", "period")

    def __init__(self) -> None:
        self._tail = ""
        self._pending: list[str] = []  # fed since the last check, joined only at the next
        self._since = 0
        self.period: int | None = None

    def feed(self, text: str) -> int | None:
        if self.period is not None or not text:
            return self.period
        self._pending.append(text)
        self._since += len(text)
        if self._since >= EVERY:
            keep = WINDOW + MOST_PERIOD
            self._tail = (self._tail + "".join(self._pending))[-keep:]
            self._pending.clear()
            self._since = 0
            self.period = _period(self._tail)
        return self.period


def _period(tail: str) -> int | None:
    """The length of the piece ``tail``'s last :data:`WINDOW` characters repeat, if they repeat one."""
    if len(tail) < WINDOW + _PROBE:
        return None
    end = len(tail)
    probe = tail[end - _PROBE :]
    earlier = tail.rfind(probe, 0, end - 1)
    if earlier < 0:
        return None
    period = end - _PROBE - earlier
    if not 0 < period <= MOST_PERIOD or end < WINDOW + period:
        return None
    if tail[end - WINDOW :] != tail[end - WINDOW - period : end - period]:
        return None
    return period


def without_loop(text: str) -> str:
    """``text`` with the loop it ends in written once: up to the end of the repeated piece's first copy,
    where the repeating begins; ``text`` unchanged when it ends in no loop (as :class:`RepetitionWatch`
    reads one). For an answer held until it is whole: stopped in a loop, the 1.5B model's list of a
    folder's entries ended in "- docs/async-await.rst" some sixty times. Linear in the text."""
    tail_start = max(0, len(text) - (WINDOW + MOST_PERIOD))
    period = _period(text[tail_start:])
    if period is None:
        return text
    # Back through the text while each character is the one a period after it: where the loop begins.
    start = len(text) - period
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    # That copy may begin inside a line ("api.rst" and "async-await.rst" end alike): go on to its end.
    end = start + period
    stop = _PIECE_END.search(text, end, end + period)
    return text[: stop.end() if stop else end].rstrip()


_PIECE_END = re.compile(r"\n|[.!?](?=\s)")
