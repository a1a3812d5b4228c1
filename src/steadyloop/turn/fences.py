"""Thinking fences: telling a scratchpad written into content apart from the answer (sans-I/O).

A server without a reasoning parser streams the model's deliberation as ordinary content, wrapped in tags
such as ``<think>...</think>``. Left alone it would be shown as output, stored and sent back on every later
request. ``FenceSplitter`` routes text inside a fence to reasoning as a stream arrives, and
``strip_thinking`` does the same for a whole reply. Both read the same rules:

- Text inside a fence is reasoning; everything else is answer. Inside a fence only its own closing tag
  ends it, so a tag quoted in the scratchpad stays there.
- A fence whose ``close`` is empty is framing: the tag is dropped and what follows stays answer
  (gpt-oss names its final channel this way).
- The first tag of a reply may be a closing one, when the chat template opened the fence in the prompt.
  Everything before it is then reasoning, including content already released (see ``FenceSplitter.moved``).
  ``start_in_reasoning=True`` says so up front, so none of it is ever released as content.
- Whitespace before the answer is dropped when a tag comes before it or right after it (models write
  ``</think>\\n\\n``, templates ``\\n<think>``). A reply with no tag at all is passed through untouched, and
  whitespace after the answer has begun is the answer's.
- A reply cut off inside a fence keeps that text as reasoning: deliberation is never promoted to an answer.

The result is the same however the text is chunked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..errors import InvalidInput

__all__ = ["ALL_FENCES", "DEFAULT_FENCES", "Fence", "FenceSplitter", "Split", "strip_thinking"]


@dataclass(frozen=True, slots=True)
class Fence:
    """A pair of tags around text that is reasoning rather than answer.

    Attributes:
        open: the tag that starts the fence.
        close: the tag that ends it; ``""`` makes ``open`` framing, dropped without starting a fence.
        name: what the fence is, for people reading a table of them.
    """

    open: str
    close: str
    name: str = ""

    def __post_init__(self) -> None:
        if not self.open:
            raise InvalidInput(f"a fence needs a non-empty opening tag (close={self.close!r})")


@dataclass(frozen=True, slots=True)
class Split:
    """Text divided into answer and reasoning."""

    content: str = ""
    reasoning: str = ""


DEFAULT_FENCES: tuple[Fence, ...] = (
    Fence("<think>", "</think>", "think"),
    # gpt-oss served without a harmony parser: the analysis channel is the scratchpad. A later analysis
    # message repeats the role header, which must not leak into the answer, hence the longer form too.
    Fence("<|start|>assistant<|channel|>analysis<|message|>", "<|end|>", "harmony-analysis"),
    Fence("<|channel|>analysis<|message|>", "<|end|>", "harmony-analysis"),
    # The final channel's header is framing, not answer text.
    Fence("<|start|>assistant<|channel|>final<|message|>", "", "harmony-final"),
    Fence("<|channel|>final<|message|>", "", "harmony-final"),
    Fence("◁think▷", "◁/think▷", "kimi"),
)
"""Fences no model writes as part of an answer: safe to take out of every streamed reply."""

ALL_FENCES: tuple[Fence, ...] = (
    *DEFAULT_FENCES,
    Fence("<thinking>", "</thinking>", "thinking"),
    Fence("<reasoning>", "</reasoning>", "reasoning"),
)
"""``DEFAULT_FENCES`` plus tags a model may also be quoting; for replies whose answer is known not to."""

_EMPTY = Split()

# A frozen dataclass's own __init__ costs as much as the rest of a plain chunk's handling; filling its slots
# directly saves about a third of that on the hot path.
_new = object.__new__
_set_content: Callable[[Split, str], None] = Split.__dict__["content"].__set__
_set_reasoning: Callable[[Split, str], None] = Split.__dict__["reasoning"].__set__


def _split(content: str, reasoning: str) -> Split:
    split: Split = _new(Split)
    _set_content(split, content)
    _set_reasoning(split, reasoning)
    return split


# What a tag does when it is found.
_OPEN, _FRAMING, _ORPHAN, _CLOSE = range(4)


class _Tag:
    __slots__ = ("kind", "next", "text")

    def __init__(self, text: str, kind: int, next_mode: _Mode) -> None:
        self.text = text
        self.kind = kind
        self.next = next_mode


class _Mode:
    """The tags looked for in one state of the splitter, indexed for the scan."""

    __slots__ = ("by_text", "firsts", "inside", "longest", "pattern", "prefixes", "single")

    def __init__(self, inside: bool) -> None:
        self.inside = inside
        self.firsts = ""
        self.longest = 0
        self.prefixes: frozenset[str] = frozenset()
        self.by_text: dict[str, _Tag] = {}
        self.single: _Tag | None = None
        self.pattern: re.Pattern[str] | None = None

    def set_tags(self, tags: Sequence[_Tag]) -> None:
        by_text: dict[str, _Tag] = {}
        for tag in tags:
            by_text.setdefault(tag.text, tag)  # the first fence in a table wins a shared tag
        # Longest first, so that at one position the longest tag wins (``<|start|>assistant<|channel|>...``
        # over anything it starts with).
        texts = sorted(by_text, key=len, reverse=True)
        self.by_text = by_text
        self.firsts = "".join(dict.fromkeys(t[0] for t in texts))
        self.longest = len(texts[0]) if texts else 0
        # What the end of a chunk may hold back: every proper prefix of a tag, looked up in one step.
        self.prefixes = frozenset(t[:n] for t in texts for n in range(1, len(t)))
        if len(texts) == 1:
            self.single = by_text[texts[0]]
        elif texts:
            # One C-level search finds the earliest and longest tag, where a find per tag would rescan.
            self.pattern = re.compile("|".join(map(re.escape, texts)))


@lru_cache(maxsize=64)
def _modes(fences: tuple[Fence, ...]) -> tuple[_Mode, _Mode]:
    """The splitter's states for a fence table: (at the start of a reply, inside an unknown fence)."""
    start = _Mode(inside=False)  # no tag seen yet: a closing tag here is an orphan
    answer = _Mode(inside=False)  # after the first tag
    any_fence = _Mode(inside=True)  # start_in_reasoning: whichever closing tag comes first ends it
    inside: dict[str, _Mode] = {}
    opens: list[_Tag] = []
    for fence in fences:
        if not fence.close:
            opens.append(_Tag(fence.open, _FRAMING, answer))
            continue
        mode = inside.get(fence.close)
        if mode is None:
            mode = inside[fence.close] = _Mode(inside=True)
            mode.set_tags([_Tag(fence.close, _CLOSE, answer)])
        opens.append(_Tag(fence.open, _OPEN, mode))
    closes = list(inside)
    start.set_tags([*opens, *(_Tag(c, _ORPHAN, answer) for c in closes)])
    answer.set_tags(opens)
    any_fence.set_tags([_Tag(c, _CLOSE, answer) for c in closes])
    return start, any_fence


def _find(buf: str, start: int, mode: _Mode, final: bool) -> tuple[int, _Tag | None]:
    """The earliest tag in ``buf[start:]``.

    Returns ``(position, tag)`` for a whole tag, ``(position, None)`` when ``buf[position:]`` could be the
    beginning of one (never when ``final``), and ``(-1, None)`` when there is neither.
    """
    n = len(buf)
    hold = -1
    if not final:
        # Only the last ``longest - 1`` characters can be the start of a tag that has not finished arriving.
        low = n - mode.longest + 1
        if low < start:
            low = start
        prefixes = mode.prefixes
        for c in mode.firsts:
            p = buf.find(c, low)
            while p != -1 and (hold == -1 or p < hold):
                if buf[p:] in prefixes:
                    hold = p
                    break
                p = buf.find(c, p + 1)
    tag = mode.single
    if tag is not None:
        at = buf.find(tag.text, start)
        if at == -1:
            tag = None
    else:
        assert mode.pattern is not None
        match = mode.pattern.search(buf, start)
        at, tag = (match.start(), mode.by_text[match.group()]) if match else (-1, None)
    # A tag that may still be completing at or before a whole one decides: it is earlier, or longer.
    if hold != -1 and (at == -1 or hold <= at):
        return hold, None
    return at, tag


class FenceSplitter:
    """Divides a streamed reply into answer and reasoning as it arrives.

    ``feed`` returns what can be released at once: everything except a trailing piece that could be the
    start of a tag, and whitespace that may turn out to lead up to a fence. ``finish`` releases the rest.

    The returned pieces are for callbacks. The totals (``content``, ``reasoning``) are what a turn should
    keep, and they are the same however the reply was chunked. They differ from the joined pieces in one
    case only: a closing tag with no opening one moves the content released before it to reasoning. That
    content is released again, as reasoning, in the same ``Split`` as the closing tag, and is kept in
    ``moved``, so that the joined content pieces always equal ``moved + content`` and the joined reasoning
    pieces equal ``reasoning``.

    A splitter reads one reply.

    Args:
        fences: the fence table; an empty one reads everything as answer.
        start_in_reasoning: the prompt already opened a fence, so the reply starts inside one and nothing
            before the first closing tag is ever released as content.
    """

    __slots__ = (
        "_content",
        "_first",
        "_held",
        "_lead",
        "_mode",
        "_moved",
        "_orphan",
        "_reasoning",
        "_start",
        "_ws",
    )

    def __init__(self, fences: Sequence[Fence] = DEFAULT_FENCES, *, start_in_reasoning: bool = False) -> None:
        start, any_fence = _modes(tuple(fences))
        self._start = start
        self._mode = any_fence if start_in_reasoning and any_fence.firsts else start
        self._first = self._mode
        self._orphan = False
        self._held = ""  # the tail of the input that could be the start of a tag
        self._ws = ""  # whitespace before the first tag, dropped if a fence follows it
        # The answer has not begun: no non-whitespace content yet. Without tags there is nothing to trim.
        self._lead = bool(start.firsts)
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._moved = ""

    @property
    def content(self) -> str:
        """The answer read so far (authoritative, whatever the chunking)."""
        return "".join(self._content)

    @property
    def reasoning(self) -> str:
        """The reasoning read so far (authoritative, whatever the chunking)."""
        return "".join(self._reasoning)

    @property
    def moved(self) -> str:
        """Content that was released before an orphan closing tag showed it to be reasoning."""
        return self._moved

    @property
    def orphan_closed(self) -> bool:
        """A closing tag came with no opening one: the reply began inside a fence the prompt opened."""
        return self._orphan

    @property
    def never_left_start(self) -> bool:
        """``start_in_reasoning`` was given and no closing tag has come: all the reply so far is inside."""
        return self._mode is self._first and self._first.inside

    def feed(self, chunk: str) -> Split:
        """Read the next piece of content.

        Returns:
            The answer and reasoning that can be released now.
        """
        mode = self._mode
        if not self._held:
            # The common case: no character in the chunk can start a tag.
            for c in mode.firsts:
                if c in chunk:
                    break
            else:
                if not chunk:
                    return _EMPTY
                if mode.inside:
                    self._reasoning.append(chunk)
                    split: Split = _new(Split)  # _split() inlined: this is the hottest line
                    _set_content(split, "")
                    _set_reasoning(split, chunk)
                    return split
                if not self._lead:
                    self._content.append(chunk)
                    split = _new(Split)
                    _set_content(split, chunk)
                    _set_reasoning(split, "")
                    return split
        return self._run(self._held + chunk, final=False)

    def finish(self) -> Split:
        """Release what was held back, at the end of the stream.

        Returns:
            The answer and reasoning not released before. A piece of a tag that never completed is text.
        """
        buf, self._held = self._held, ""
        split = self._run(buf, final=True) if buf else _EMPTY
        if self._ws:
            # Whitespace with no tag after it, in a reply that had none before it: it was the answer.
            ws, self._ws = self._ws, ""
            self._content.append(ws)
            self._lead = False
            return Split(split.content + ws, split.reasoning)
        return split

    def _run(self, buf: str, final: bool) -> Split:
        content = reasoning = ""
        pos = 0
        while True:
            mode = self._mode
            at, tag = _find(buf, pos, mode, final)
            text = buf[pos:] if at == -1 else buf[pos:at]
            to_reasoning = mode.inside
            if tag is not None and tag.kind == _ORPHAN:
                # Only ever the first tag of a reply, so nothing in this call has been released yet.
                self._moved = moved = "".join(self._content)
                self._orphan = True
                text = moved + self._ws + text
                self._content.clear()
                self._lead = True
                to_reasoning = True
            if not text:
                pass
            elif to_reasoning:
                self._reasoning.append(text)
                reasoning += text
            elif self._lead:
                content += self._answer(text)
            else:
                self._content.append(text)
                content += text
            if tag is None:
                self._held = "" if at == -1 else buf[at:]
                break
            self._ws = ""  # whitespace leading up to a tag is not the answer
            self._mode = tag.next
            pos = at + len(tag.text)
        if not content and not reasoning:
            return _EMPTY
        return _split(content, reasoning)

    def _answer(self, text: str) -> str:
        """Record text before the answer has begun, trimming what leads up to it; returns what to release."""
        if self._mode is self._start:
            # No tag yet: hold whitespace until it is known whether a fence follows it.
            if text.isspace():
                self._ws += text
                return ""
            text = self._ws + text
            self._ws = ""
        else:
            text = text.lstrip()
            if not text:
                return ""
        self._lead = False
        self._content.append(text)
        return text


def strip_thinking(
    text: str, fences: Sequence[Fence] = ALL_FENCES, *, start_in_reasoning: bool = False
) -> Split:
    """Divide a whole reply into answer and reasoning, by the same rules as ``FenceSplitter``.

    Args:
        text: the reply's content.
        fences: the fence table; the default includes tags a streamed reply is not searched for.
        start_in_reasoning: the prompt already opened a fence.

    Returns:
        The answer and the reasoning.
    """
    splitter = FenceSplitter(fences, start_in_reasoning=start_in_reasoning)
    splitter.feed(text)
    splitter.finish()
    return Split(splitter.content, splitter.reasoning)
