"""Clearing stale tool results: the cheap way to make room, before anything is summarised (sans-I/O).

A 40k-character file read is 10k tokens on every request after it, and by the time a few more results have
come in the model has usually taken what it wanted from it. ``prune_tool_results`` swaps such results for a
stub that says how much was there; the call stays answered, so the transcript stays one a server accepts.

Pruning rewrites the prompt's prefix, and a prompt cache matches from the first token: a pruned transcript is
prefilled again from the first changed message. Prune when a fold is due, not on every step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import InvalidInput
from ..messages import ImagePart, Message, ToolResultMessage, text_of
from ..sizing.tokens import CHARS_PER_TOKEN, IMAGE_TOKENS

__all__ = ["IMAGE_CHARS", "PruneStats", "prune_stats", "prune_tool_results", "pruned_stub"]

#: What an image weighs against ``max_chars``: its token allowance at the default ratio.
IMAGE_CHARS = IMAGE_TOKENS * CHARS_PER_TOKEN

_STUB = re.compile(r"\[result cleared, [\d,]+ chars(?: and \d+ images?)?\]")


@dataclass(frozen=True, slots=True)
class PruneStats:
    """What a pruning cleared, in the terms ``ContextPruned`` reports.

    Attributes:
        cleared: how many tool results became stubs.
        chars: characters freed (an image weighed as ``IMAGE_CHARS``), net of the stubs.
    """

    cleared: int = 0
    chars: int = 0


def _weight(message: ToolResultMessage) -> tuple[int, int]:
    """The result's text characters and its images."""
    content = message.content
    if isinstance(content, str):
        return len(content), 0
    return len(text_of(content)), sum(isinstance(p, ImagePart) for p in content)


def pruned_stub(chars: int, images: int = 0) -> str:
    """The text a cleared result is replaced by, e.g. ``[result cleared, 10,412 chars]``."""
    pictures = f" and {images} image{'s' if images != 1 else ''}" if images else ""
    return f"[result cleared, {chars:,} chars{pictures}]"


def _is_stub(message: ToolResultMessage) -> bool:
    return isinstance(message.content, str) and _STUB.fullmatch(message.content) is not None


def prune_tool_results(
    messages: Sequence[Message], keep_last: int = 5, max_chars: int = 256
) -> list[Message]:
    """The transcript with every tool result but the latest ``keep_last`` cleared when over ``max_chars``.

    The list that comes back is new and as long as the one given, message for message, so an index (or a
    ``CompactionPlan``) made before pruning still applies after it. A cleared result keeps its call id, tool
    name, error flag and disposition; images count toward its size (as ``IMAGE_CHARS`` each) and are
    cleared with it. Results that are already stubs are left alone, so pruning twice is pruning once.

    Raises:
        InvalidInput: a negative ``keep_last`` or ``max_chars``.
    """
    if keep_last < 0 or max_chars < 0:
        raise InvalidInput(f"keep_last and max_chars must be >= 0, got {keep_last} and {max_chars}")
    out = list(messages)
    results = [i for i, m in enumerate(out) if isinstance(m, ToolResultMessage)]
    stale = results[: max(len(results) - keep_last, 0)]
    for index in stale:
        message = out[index]
        assert isinstance(message, ToolResultMessage)
        chars, images = _weight(message)
        if chars + images * IMAGE_CHARS <= max_chars or _is_stub(message):
            continue
        out[index] = ToolResultMessage(
            call_id=message.call_id,
            content=pruned_stub(chars, images),
            is_error=message.is_error,
            name=message.name,
            disposition=message.disposition,
        )
    return out


def prune_stats(before: Sequence[Message], after: Sequence[Message]) -> PruneStats:
    """What ``prune_tool_results`` cleared, comparing the transcript before it with the one it returned.

    Raises:
        InvalidInput: the two are not the same length, so one is not a pruning of the other.
    """
    if len(before) != len(after):
        raise InvalidInput(f"a pruned transcript keeps its length: {len(before)} before, {len(after)} after")
    cleared = freed = 0
    for old, new in zip(before, after, strict=True):
        if old is new or not isinstance(old, ToolResultMessage) or not isinstance(new, ToolResultMessage):
            continue
        if old.content == new.content:
            continue
        chars, images = _weight(old)
        cleared += 1
        freed += chars + images * IMAGE_CHARS - _weight(new)[0]
    return PruneStats(cleared=cleared, chars=freed)
