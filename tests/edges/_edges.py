"""What the edge tests share: adversarial texts and JSON values, seeds mutated, and a linearity check.

Linearity is a ratio measured in one run, never a time budget: the same work at size n and 8n, each timed
as its best of a few tries. The time is this process's CPU time, not the wall clock: on a loaded machine a
long piece of work is preempted far more often than a short one, and wall time would call that quadratic.
Linear work grows about eightfold; the bound is generous enough for caches and noise and still far below
what a quadratic scan costs (sixty-fourfold).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

#: How much more an input eight times longer may cost, at most.
LINEAR_BOUND = 24.0

# Texts that have broken readers: deep brackets, NUL, lone surrogates, digits no ASCII reader takes, the
# spellings of non-numbers, escapes that go nowhere.
ODD_TEXTS = [
    "[" * 10_000,
    "{" * 10_000,
    '{"a":' * 10_000,
    "[" * 5_000 + "]" * 5_000,
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfff\ud800y",
    "١٢٣",  # Arabic-Indic digits
    "１２３",  # full-width digits
    "NaN",
    "-Infinity",
    "1e999999",
    "9" * 5_000,
    '"\\',
    "\\u",
    '"\\ud800"',
    "\ufeff{}",
    "\r\n\r\n",
    "<tool_call>" * 1_000,
    "```json\n" * 1_000,
]

ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**70,
    math.nan,
    math.inf,
    -math.inf,
    "",
    "x" * 1_000,
    [],
    {},
    [[[]]],
    {"": {"": {}}},
    *ODD_TEXTS[4:12],
]

odd_texts = st.sampled_from(ODD_TEXTS)
any_text = st.text(max_size=60) | odd_texts | st.binary(max_size=40).map(lambda b: b.decode("latin-1"))
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
)
json_like = st.recursive(
    scalars | st.sampled_from(ODD_VALUES),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value nested ``depth`` levels of lists and objects, built without recursion."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    """A JSON seed with a few of its values, at any depth, replaced by something of another kind."""
    value = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(value)
        path = draw(st.sampled_from(paths))
        # A copy: the drawn value may be one of the shared ODD_VALUES, and a later mutation edits in place.
        value = _put(value, path, copy.deepcopy(draw(json_like)))
    return value


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*path, index))
    return out


def _put(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    value[head] = _put(value[head], rest, new)
    return value


@st.composite
def mutated_text(draw: st.DrawFn, seed: str) -> str:
    """A text seed cut, spliced with odd text, or with a stretch repeated."""
    text = seed
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["cut", "insert", "repeat", "drop"]))
        if how == "cut":
            text = text[:at]
        elif how == "insert":
            text = text[:at] + draw(any_text) + text[at:]
        elif how == "repeat":
            end = draw(st.integers(at, min(len(text), at + 40)))
            text = text[:at] + text[at:end] * draw(st.integers(2, 50)) + text[end:]
        else:
            end = draw(st.integers(at, len(text)))
            text = text[:at] + text[end:]
    return text


def growth(work: Callable[[int], object], n: int, *, tries: int = 3) -> float:
    """How many times longer ``work(8 * n)`` takes than ``work(n)``, each the best of ``tries``."""

    def best(size: int) -> float:
        times = []
        for _ in range(tries):
            started = time.process_time()
            work(size)
            times.append(time.process_time() - started)
        return min(times)

    best(n)  # warm caches and imports
    return best(8 * n) / max(best(n), 1e-6)
