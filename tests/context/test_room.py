"""The room tool results have in the window, the head-and-tail cut, and how far each of several results is cut."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from steadyloop.context.room import (
    CUT_FLOOR,
    REPLY_SHARE,
    cut_middle,
    fit_sizes,
    reply_room,
    result_room,
)
from steadyloop.errors import InvalidInput

from ..edges._edges import LINEAR_BOUND, growth

_SAID = re.compile(r"\n\[\.\.\. ([\d,]+) characters cut here(.*?) \.\.\.\]\n")

texts = st.text(alphabet=st.sampled_from("ab \n\té"), max_size=3000) | st.text(max_size=400)


def _parts(out: str) -> tuple[str, int, str, str]:
    """The head, the count the marker says, its reason, and the tail of a cut text."""
    marker = _SAID.search(out)
    assert marker is not None, out
    return out[: marker.start()], int(marker.group(1).replace(",", "")), marker.group(2), out[marker.end() :]


@given(texts, st.integers(min_value=0, max_value=4000))
@example("0" * 43, 42)  # a marker that fits with one character beside it: the head alone, not a tail
def test_a_cut_never_exceeds_its_budget_and_keeps_head_and_tail(text: str, limit: int) -> None:
    out = cut_middle(text, limit, why=" to fit")
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
        return
    if _SAID.search(out) is None:  # no room for the marker and some text: the head alone
        assert text.startswith(out)
        assert limit < len(f"\n[... {len(text):,} characters cut here to fit ...]\n") + 16
        return
    head, said, why, tail = _parts(out)
    assert why == " to fit"
    assert text.startswith(head) and text.endswith(tail)
    # the count is what went, exactly, and both ends are kept
    assert said == len(text) - len(head) - len(tail) > 0
    assert head and (tail or limit < 120)


@given(texts)
def test_text_that_fits_is_never_touched(text: str) -> None:
    assert cut_middle(text, len(text)) == text


def test_the_cut_falls_on_line_ends_when_they_are_near() -> None:
    text = "".join(f"line {n:03}\n" for n in range(300))  # 2,700 characters, a line every 9
    out = cut_middle(text, 600)
    head, said, _, tail = _parts(out)
    assert all(line.startswith("line ") and len(line) == 8 for line in head.split("\n"))
    assert all(line.startswith("line ") and len(line) == 8 for line in tail.rstrip("\n").split("\n"))
    assert head.startswith("line 000") and tail.endswith("line 299\n")
    assert said == len(text) - len(head) - len(tail)


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(InvalidInput):
        cut_middle("abc", -1)


def test_cutting_costs_linear_time() -> None:
    ratio = growth(lambda n: cut_middle("some line of text\n" * n, n), 20_000)
    assert ratio < LINEAR_BOUND, ratio


sizes_lists = st.lists(st.integers(min_value=0, max_value=50_000), max_size=12)


@given(sizes_lists, st.integers(min_value=0, max_value=200_000), st.integers(min_value=0, max_value=2000))
def test_fitting_sheds_enough_cutting_the_largest_to_one_cap(sizes: list[int], shed: int, floor: int) -> None:
    kept = fit_sizes(sizes, shed, floor=floor)
    assert len(kept) == len(sizes)
    assert all(new <= old for old, new in zip(sizes, kept, strict=True))
    assert all(new >= min(old, floor) for old, new in zip(sizes, kept, strict=True))
    cut = [new for old, new in zip(sizes, kept, strict=True) if new < old]
    # every result that was cut is cut to the same cap, and none that was left is over it
    assert len(set(cut)) <= 1
    if cut:
        assert all(new <= cut[0] for new in kept)
    possible = sum(sizes) - sum(min(s, floor) for s in sizes)
    assert sum(sizes) - sum(kept) >= min(shed, possible)


@given(sizes_lists, st.integers(min_value=1, max_value=200_000))
def test_fitting_cuts_no_more_than_it_must(sizes: list[int], shed: int) -> None:
    kept = fit_sizes(sizes, shed, floor=0)
    cut = [new for old, new in zip(sizes, kept, strict=True) if new < old]
    if cut and sum(sizes) > shed:
        # one character more on the cap would shed too little
        cap = cut[0] + 1
        assert sum(sizes) - sum(min(s, cap) for s in sizes) < shed


def test_fitting_a_worked_example() -> None:
    assert fit_sizes([1000, 500, 100], 600, floor=0) == [450, 450, 100]
    assert fit_sizes([1000, 500, 100], 0) == [1000, 500, 100]
    assert fit_sizes([10_000], 100_000) == [CUT_FLOOR]  # not below the floor, whatever is asked
    with pytest.raises(InvalidInput):
        fit_sizes([-1], 5)


def test_the_room_for_results_and_for_the_reply() -> None:
    assert reply_room(4096, 0) == 4096 // REPLY_SHARE == 512
    assert reply_room(4096, 300) == 0  # a ceiling in the request is counted with it
    assert result_room(limit=4096, used=1000) == 4096 - 1000 - 512
    assert result_room(limit=4096, used=1000, ceiling=300) == 4096 - 1000 - 300
    assert result_room(limit=4096, used=5000) == 0
