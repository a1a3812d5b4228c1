"""too_deep: the one linear measure of nesting every parser asks before a recursive reader sees a text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from steadyloop._nesting import MAX_NESTING, too_deep


def reference_depth(text: str) -> int:
    """Depth of [, { and ( outside closed double-quoted strings, stray closers ignored, one char at a time."""
    depth = deepest = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if end < len(text):
                i = end + 1
                continue
        if c in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]})" and depth:
            depth -= 1
        i += 1
    return deepest


@given(st.text(alphabet='[]{}()"\\ax', max_size=400), st.integers(0, 30))
def test_too_deep_agrees_with_a_character_by_character_count(text: str, limit: int) -> None:
    assert too_deep(text, limit) == (reference_depth(text) > limit)


def test_the_bound_and_what_is_inside_strings() -> None:
    assert not too_deep("[" * MAX_NESTING)
    assert too_deep("[" * (MAX_NESTING + 1))
    assert not too_deep(json.dumps(["[" * 5000]))
    assert too_deep('"unclosed ' + "[" * 200)  # an unclosed quote hides nothing
    assert not too_deep("]" * 5000 + "[" * 50)
