"""Streamed text that has fallen into a loop; sans I/O.

A small model at temperature 0 can fall into a loop and stay there: asked "What are the rules of the game
'Uno'?", the bundled 1.5B model wrote for 523 s, 2,900 tokens and more, until the server's shared cache
was full and every other request on it failed with "Context size has been exceeded". Such text is exact:
the same piece, to the letter, again and again. :class:`RepetitionWatch` is fed the text as it streams
and says when its last :data:`WINDOW` characters are one piece of at most :data:`MOST_PERIOD` characters
repeated; the attempt then stops reading, which closes the request and stops the server generating
(``attempt.py``). Prose, code and tables are never that regular for that long: a table's rows differ
in their cells, and a rule of dashes is far shorter than the window.

A loop can also keep one shape while its numbers count on: asked who wins a game of passing a ball round
a circle, the 1.5B model wrote sentence after sentence of "The ball is then passed to the one
hundred-thirty-fourth person, who has the number 753 on their shirt.", six ordinals in turn and the
numbers rising, for 770 s and 30,000 characters until the window was full; no two pieces alike to the
letter. Read with every run of digits as one digit, its last :data:`SHAPE_WINDOW` characters are one
piece of at most :data:`SHAPE_MOST_PERIOD` repeated, and that is a loop too when the piece holds at least
:data:`SHAPE_WORDS` words: sentences, not the short rows of a table or lines of code whose numbers alone
differ (``| row 7 | 49 |``, ``values[7] = compute(7)``), which are answers; nor 500 lines of "The 7th
prime is 17.". The price: an answer asked to be one long sentence for each of many numbers ("Step 7:
multiply 7 by 8 to get 56, then add it to the running total of the sum.") is stopped after about forty.

Each check looks back once for the text's last few characters and compares two slices of the window, and
a check is made only after :data:`EVERY` new characters: linear in the text fed.
"""

from __future__ import annotations

import re

__all__ = [
    "EVERY",
    "MOST_PERIOD",
    "SHAPE_MOST_PERIOD",
    "SHAPE_WINDOW",
    "SHAPE_WORDS",
    "WINDOW",
    "ArgumentsWatch",
    "RepetitionWatch",
    "without_loop",
]

#: The characters at the end of the text that must all be one repeated piece.
WINDOW = 1200
#: The longest piece that counts: a loop of sentences or list items, not of pages.
MOST_PERIOD = 400
#: New characters between two checks.
EVERY = 200
#: The characters at the end of the text, numbers read as one digit, that must all be one repeated piece.
SHAPE_WINDOW = 3000
#: The longest piece that counts when only numbers tell its copies apart: a few sentences.
SHAPE_MOST_PERIOD = 800
#: The fewest words (two or more letters) a piece that only numbers tell apart must hold.
SHAPE_WORDS = 12
_PROBE = 48  # the text's last characters, looked for again to find the piece's length
_TRIES = 8  # earlier copies of the probe tried as the piece's start
_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"[^\W\d_]{2,}")


class RepetitionWatch:
    """Whether the text fed so far ends in a loop (see the module docstring).

    ``feed`` returns the length of the repeated piece once the loop is found (and from then on); ``None``
    until then.
    """

    __slots__ = ("_keep", "_pending", "_shapes", "_since", "_tail", "_window", "period")

    def __init__(self, window: int = WINDOW, *, shapes: bool = True) -> None:
        """``window``: the characters at the end that must all be one repeated piece; ``shapes``: whether a
        piece whose numbers alone change (``SHAPE_WINDOW``) is a loop too."""
        self._window = window
        self._shapes = shapes
        self._keep = max(window + MOST_PERIOD, _KEEP if shapes else 0)
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
            self._tail = (self._tail + "".join(self._pending))[-self._keep :]
            self._pending.clear()
            self._since = 0
            window = self._window
            self.period = _period(self._tail[-(window + MOST_PERIOD) :], window) or (
                _shape_period(_NUMBER.sub("0", self._tail)) if self._shapes else None
            )
        return self.period

    @property
    def piece(self) -> str:
        """The piece the text repeats once a loop is found (as the text read at that check ends in it);
        ``""`` before."""
        return self._tail[-self.period :] if self.period else ""


class ArgumentsWatch:
    """Whether a call's arguments, as they stream, have fallen into a loop.

    Arguments may hold a file's text, and a file may repeat itself where an answer would not: rows of
    data count on, a fixture repeats a line. A loop that repeats whole JSON values (its piece holds a
    quote no backslash escapes, as ``"麦辣鸡腿堡", `` does: the 1.5B model wrote that into an order's list
    of items until the window was full) is one over an answer's window. A loop inside one string value
    must go on four times as long. Numbers counting on are never a loop here. ``feed`` returns the
    piece's length once a loop is found; linear in the text fed.
    """

    __slots__ = ("_in_text", "_values", "period")

    def __init__(self) -> None:
        self._values = RepetitionWatch(shapes=False)
        self._in_text = RepetitionWatch(4 * WINDOW, shapes=False)
        self.period: int | None = None

    def feed(self, text: str) -> int | None:
        if self.period is not None:
            return self.period
        self.period = self._in_text.feed(text)
        if self.period is None and self._values.feed(text) is not None:
            if _UNESCAPED_QUOTE.search(self._values.piece[-1:] + self._values.piece, 1):
                self.period = self._values.period
            else:  # a loop inside a string so far: watched afresh, the longer watch decides for the text
                self._values = RepetitionWatch(shapes=False)
        return self.period


_UNESCAPED_QUOTE = re.compile(r'(?<!\\)"')


# Raw characters kept: numbers read as one digit only shorten the text, so this always holds the shape's.
_KEEP = SHAPE_WINDOW + SHAPE_MOST_PERIOD


def _period(tail: str, window: int = WINDOW, most: int = MOST_PERIOD) -> int | None:
    """The length of the piece ``tail``'s last ``window`` characters repeat, if they repeat one of at most
    ``most`` characters."""
    if len(tail) < window + _PROBE:
        return None
    end = len(tail)
    probe = tail[end - _PROBE :]
    earlier = end - _PROBE
    # The nearest earlier copy of the probe may be a shorter piece the loop's copies end alike in (three
    # sentences in turn, each ending "on their shirt."): the next copies back are tried, a few.
    for _ in range(_TRIES):
        earlier = tail.rfind(probe, 0, earlier + _PROBE - 1)
        period = end - _PROBE - earlier
        if earlier < 0 or period > most or end < window + period:
            return None
        if tail[end - window :] == tail[end - window - period : end - period]:
            return period
    return None


def _shape_period(read: str) -> int | None:
    """The length of the piece that the end of ``read`` (text with every run of digits one ``0``) repeats
    with only its numbers changing, if it repeats one of enough words (see the module docstring)."""
    period = _period(read, SHAPE_WINDOW, SHAPE_MOST_PERIOD)
    if period is None or len(_WORD.findall(read, len(read) - period)) < SHAPE_WORDS:
        return None
    return period


def _shape_read(text: str) -> tuple[str, list[int]]:
    """``text`` with every run of digits one ``0``, and where each of its characters stands in ``text``
    (one more entry: the end)."""
    shape: list[str] = []
    at: list[int] = []
    last = 0
    for number in _NUMBER.finditer(text):
        shape.append(text[last : number.start()])
        at.extend(range(last, number.start()))
        shape.append("0")
        at.append(number.start())
        last = number.end()
    shape.append(text[last:])
    at.extend(range(last, len(text) + 1))
    return "".join(shape), at


def without_loop(text: str) -> str:
    """``text`` with the loop it ends in written once: up to the end of the repeated piece's first copy,
    where the repeating begins; ``text`` unchanged when it ends in no loop (as :class:`RepetitionWatch`
    reads one). For an answer held until it is whole: stopped in a loop, the 1.5B model's list of a
    folder's entries ended in "- docs/async-await.rst" some sixty times. Linear in the text."""
    tail_start = max(0, len(text) - (WINDOW + MOST_PERIOD))
    period = _period(text[tail_start:])
    if period is not None:
        return _once(text, text, list(range(len(text) + 1)), period)
    read, at = _shape_read(text)
    period = _shape_period(read)
    return text if period is None else _once(text, read, at, period)


def _once(text: str, read: str, at: list[int], period: int) -> str:
    """``text`` cut after the first copy of the piece of ``period`` characters that ``read`` (``text`` as
    the loop was found in, ``at`` mapping its characters back) ends in repeating."""
    # Back through the text while each character is the one a period after it: where the loop begins.
    start = len(read) - period
    while start > 0 and read[start - 1] == read[start - 1 + period]:
        start -= 1
    # That copy may begin inside a line ("api.rst" and "async-await.rst" end alike): go on to its end.
    end = at[start + period]
    stop = _PIECE_END.search(text, end, at[min(start + 2 * period, len(read))])
    return text[: stop.end() if stop else end].rstrip()


_PIECE_END = re.compile(r"\n|[.!?](?=\s)")
