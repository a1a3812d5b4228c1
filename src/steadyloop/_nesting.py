"""How deep brackets nest in a text, found in one linear pass before any recursive reader sees it (internal).

The standard library's JSON decoder, the JSON repairer and ``ast`` all recurse once per level of nesting:
``'[' * 1000`` in a model's reply or a server's error body is enough to exhaust the stack, and they fail
with ``RecursionError`` (or the repairer's own ``ValueError``) after doing all that work. Every parser
that hands outside text to one of them asks ``too_deep`` first; its callers still catch the recursive
reader's own failure, because a lenient reader may read quotes differently and nest where this scan did
not look.

No tool argument, tool call envelope or error body a real model or server writes nests anywhere near
``MAX_NESTING`` levels.
"""

from __future__ import annotations

import re

__all__ = ["MAX_NESTING", "too_deep"]

#: The deepest nesting of brackets steadyloop reads from outside text.
MAX_NESTING = 100

# A double-quoted string with JSON's escapes. Only closed strings are skipped: an unclosed quote hides
# nothing, so the brackets after it still count.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OPENS = bytes.maketrans(b"[{(]})", b"\x01\x01\x01\x00\x00\x00")
# Every byte but the six brackets. UTF-8 never puts an ASCII byte inside a longer character, so deleting
# these from the encoded text leaves exactly its brackets, in one C loop that makes no object per run of
# other text (a regular expression's substitution made one per run: many runs, much allocation).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}()")


def too_deep(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether brackets (``[``, ``{``, ``(``) outside double-quoted strings nest deeper than ``limit``.

    A closer with nothing open is ignored, as a lenient reader would skip it. Linear in the text, nearly
    free for text with few brackets, and it stops at the first level past the limit.
    """
    if text.count("[") + text.count("{") + text.count("(") <= limit:
        return False
    outside = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    brackets = outside.translate(None, _NOT_BRACKETS)
    if len(brackets) <= limit:
        return False
    depth = 0
    for opens in brackets.translate(_OPENS):
        if opens:
            depth += 1
            if depth > limit:
                return True
        elif depth:
            depth -= 1
    return False
