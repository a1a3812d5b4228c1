"""Tool results and the room the window has for them (sans-I/O): how much a step's results may take, the
cut that shortens one result keeping its head and tail, and how far each of several results is cut.

A tool result is the one part of a request nobody wrote with the window in mind: a 4,000-token README
read into a 4,096-token window leaves no room for the question, let alone the answer, and folding cannot
help a run that has only one question. So the room is known before a tool runs (``result_room``, handed
to each call as ``ToolContext.budget_tokens``) and a tool that can shorten its own answer sensibly (fewer
lines, and a note saying where to read on) does. What still does not fit is cut by the context keeper
(``ContextKeeper.fit``): ``fit_sizes`` says how far each result goes, largest first, and ``cut_middle``
cuts it, with a line in the middle saying how much went.

The room kept for the reply is ``reply_room``: the reply ceiling when the request carries one (the sizing
already counts it), else an eighth of the window, so that a result that fits still leaves the model room
to answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidInput

__all__ = [
    "CUT_FLOOR",
    "REPLY_SHARE",
    "cut_middle",
    "fit_sizes",
    "reply_room",
    "result_room",
]

#: Without a reply ceiling in the request, the share of the window (one part in this many) kept free
#: for the answer.
REPLY_SHARE = 8

#: The fewest characters the keeper cuts a result to: the marker and a little of each end. A result this
#: short is not cut further.
CUT_FLOOR = 160

# The head keeps two parts in three of what is kept: a file's opening says what it is, its end less.
_HEAD_PARTS, _PARTS = 2, 3
# A cut moves to the nearest line end when one is this close (a part in this many of the piece kept).
_LINE_SLACK = 4
# Below this many characters of text beside the marker, a marker says more than the text it frames:
# the head alone is kept.
_MIN_KEPT = 16


def reply_room(limit: int, ceiling: int) -> int:
    """The tokens a request must leave free for its reply, beyond what the sizing counts.

    Args:
        limit: the window, in tokens.
        ceiling: the reply ceiling the request carries (``max_tokens``); 0 when it carries none.
    """
    if ceiling > 0:
        return 0  # counted in the request's own size already
    return max(limit, 0) // REPLY_SHARE


def result_room(*, limit: int, used: int, ceiling: int = 0) -> int:
    """The tokens the window has left for a step's tool results, never below zero.

    Args:
        limit: the window, in tokens.
        used: what the next request holds before the results: the prompt so far and the assistant's
            message that made the calls.
        ceiling: the reply ceiling the request carries; without one, ``reply_room`` is kept free instead.
    """
    reserved = ceiling if ceiling > 0 else reply_room(limit, 0)
    return max(limit - used - reserved, 0)


def _marker(cut: int, why: str) -> str:
    return f"\n[... {cut:,} characters cut here{why} ...]\n"


def cut_middle(text: str, limit: int, *, why: str = "") -> str:
    """``text`` in at most ``limit`` characters: its head and tail, and a line between them saying how
    many characters were cut (and ``why``, e.g. ``" to fit the context window"``).

    Text that fits is returned as it is. The cut falls on a line end when one is near, so the lines kept
    are whole. When the marker would leave under 16 characters of text, there is no room to say
    anything useful: the head alone is kept.
    Linear in the text's length.
    """
    if limit < 0:
        raise InvalidInput(f"a cut keeps zero characters or more, not {limit}")
    if len(text) <= limit:
        return text
    # The marker is sized for the most it could report (the whole text), so the cut never overshoots.
    room = limit - len(_marker(len(text), why))
    if room < _MIN_KEPT:
        return text[:limit]
    head_size = room * _HEAD_PARTS // _PARTS
    tail_size = room - head_size
    head_end = head_size
    line = text.rfind("\n", 0, head_size)
    if line >= 0 and head_size - line <= head_size // _LINE_SLACK:
        head_end = line
    tail_start = len(text) - tail_size
    line = text.find("\n", tail_start, len(text))
    if tail_size and line >= 0 and line - tail_start <= tail_size // _LINE_SLACK:
        tail_start = line + 1
    return text[:head_end] + _marker(tail_start - head_end, why) + text[tail_start:]


def fit_sizes(sizes: Sequence[int], shed: int, *, floor: int = CUT_FLOOR) -> list[int]:
    """How long each of several results may stay so that together they lose ``shed`` characters, cutting
    the largest first: every result over a common cap is cut to it, and none below ``floor``.

    The cap is the largest that sheds enough; when even ``floor`` does not, every result over the floor
    is cut to it (the most that can be done). Results no longer than the cap keep their size.

    Raises:
        InvalidInput: a negative size, ``shed`` or ``floor``.
    """
    if shed < 0 or floor < 0 or any(size < 0 for size in sizes):
        raise InvalidInput("sizes, shed and floor are never negative")
    if shed == 0:
        return list(sizes)
    # Walk the sizes from the largest: with the k largest cut to a cap c, what is kept is
    # rest + k * c, where rest is the sum of the others; the first k whose cap lands between the
    # (k+1)-th size and the k-th one is the cap.
    order = sorted(sizes, reverse=True)
    keep = sum(sizes) - shed
    rest = sum(sizes)
    cap = floor
    for count, size in enumerate(order, start=1):
        rest -= size
        below = order[count] if count < len(order) else 0
        candidate = (keep - rest) // count
        if candidate >= below:
            cap = min(candidate, size)
            break
    cap = max(cap, floor)
    return [min(size, cap) for size in sizes]
