"""ToolLoopDetector: each pattern, graded notes before a stop, the call cap, forgiveness and reset."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.messages import ToolCall
from steadyloop.tools.loop_detection import LoopDetectorConfig, ToolLoopDetector


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call_{name}", name=name, arguments=arguments)


def calls(detector: ToolLoopDetector, *items: ToolCall) -> list[str | None]:
    return [detector.record_call(item) for item in items]


# -- identical repeats


def test_identical_calls_get_a_note_at_the_threshold() -> None:
    detector = ToolLoopDetector()
    notes = calls(detector, *[call("read_file", path="a.txt")] * 3)
    assert notes[:2] == [None, None]
    assert notes[2] is not None
    assert "read_file" in notes[2] and "3 times in a row" in notes[2]
    assert detector.stop is None


def test_argument_key_order_does_not_make_calls_different() -> None:
    detector = ToolLoopDetector()
    first = ToolCall(id="1", name="search", arguments={"query": "x", "limit": 5})
    second = ToolCall(id="2", name="search", arguments={"limit": 5, "query": "x"})
    third = ToolCall(id="3", name="search", arguments={"query": "x", "limit": 5})
    assert calls(detector, first, second)[1] is None
    assert detector.record_call(third) is not None


def test_different_arguments_break_the_streak() -> None:
    detector = ToolLoopDetector()
    notes = calls(
        detector,
        call("read_file", path="a"),
        call("read_file", path="a"),
        call("read_file", path="b"),
        call("read_file", path="a"),
        call("read_file", path="a"),
    )
    assert notes == [None] * 5


def test_nested_arguments_compare_by_value() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(identical_repeat=2))
    assert detector.record_call(ToolCall("1", "q", {"filter": {"a": 1, "b": [1, 2]}})) is None
    assert detector.record_call(ToolCall("2", "q", {"filter": {"b": [1, 2], "a": 1}})) is not None
    assert detector.record_call(ToolCall("3", "q", {"filter": {"b": [2, 1], "a": 1}})) is None


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=4), _VALUES, min_size=1, max_size=5), st.randoms())
def test_any_key_order_is_the_same_call(arguments: dict[str, Any], random: Any) -> None:
    detector = ToolLoopDetector()
    for _ in range(2):
        keys = list(arguments)
        random.shuffle(keys)
        assert detector.record_call(ToolCall("c", "tool", {key: arguments[key] for key in keys})) is None
    keys = list(arguments)
    random.shuffle(keys)
    assert detector.record_call(ToolCall("c", "tool", {key: arguments[key] for key in keys})) is not None


# -- ping-pong


def test_alternating_calls_are_a_ping_pong() -> None:
    detector = ToolLoopDetector()
    a, b = call("list_directory", path="."), call("read_file", path="x")
    notes = calls(detector, a, b, a, b)
    assert notes[:3] == [None, None, None]
    assert notes[3] is not None and "list_directory" in notes[3] and "read_file" in notes[3]


def test_alternation_with_changing_arguments_is_progress() -> None:
    detector = ToolLoopDetector()
    notes = calls(
        detector,
        call("read_file", path="1"),
        call("edit_file", path="1"),
        call("read_file", path="2"),
        call("edit_file", path="2"),
        call("read_file", path="3"),
        call("edit_file", path="3"),
    )
    assert notes == [None] * 6


def test_ping_pong_length_is_configurable() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(ping_pong=6))
    a, b = call("a"), call("b")
    assert calls(detector, a, b, a, b, a) == [None] * 5
    assert detector.record_call(b) is not None


# -- no progress


def test_the_same_result_from_one_tool_is_no_progress() -> None:
    detector = ToolLoopDetector()
    assert detector.record_result("run_tests", "FAILED test_x") is None
    assert detector.record_result("run_tests", "FAILED test_x") is None
    note = detector.record_result("run_tests", "FAILED test_x")
    assert note is not None and "run_tests" in note and "same result 3 times" in note


def test_results_are_tracked_per_tool() -> None:
    detector = ToolLoopDetector()
    for _ in range(2):
        assert detector.record_result("a", "same") is None
        assert detector.record_result("b", "same") is None
    assert detector.record_result("a", "different") is None
    assert detector.record_result("b", "same") is not None


def test_a_changed_result_resets_no_progress() -> None:
    detector = ToolLoopDetector()
    results = ["x", "x", "y", "x", "x"]
    assert [detector.record_result("t", text) for text in results] == [None] * 5


# -- graded: notes first, then a stop


def test_a_continued_loop_stops_after_the_notes() -> None:
    detector = ToolLoopDetector()  # escalate_after=2
    repeated = call("fetch", url="https://example.com")
    notes = calls(detector, *[repeated] * 4)
    assert notes[2] is not None and notes[3] is not None
    assert detector.stop is None, "two notes come before any stop"
    final = detector.record_call(repeated)
    verdict = detector.stop
    assert verdict is not None
    assert verdict.kind == "identical_repeat"
    assert verdict.tool == "fetch"
    assert final == verdict.text
    assert "5 times" in verdict.text and "2 notes" in verdict.text


def test_notes_count_across_patterns() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(escalate_after=1))
    a, b = call("a"), call("b")
    calls(detector, a, a, a)  # identical repeat: the one note
    assert detector.stop is None
    calls(detector, b, a, b)  # then circling between two tools
    assert detector.stop is not None
    assert detector.stop.kind == "ping_pong"


def test_no_progress_escalates_too() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(no_progress=2, escalate_after=1))
    notes = [detector.record_result("search", "no results") for _ in range(3)]
    assert notes[0] is None and notes[1] is not None
    assert (
        detector.stop is not None and detector.stop.kind == "no_progress" and detector.stop.tool == "search"
    )


def test_escalate_after_zero_stops_at_the_first_detection() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(escalate_after=0))
    calls(detector, *[call("x")] * 3)
    assert detector.stop is not None and detector.stop.kind == "identical_repeat"


def test_the_stop_is_kept_once_set() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(escalate_after=0))
    calls(detector, *[call("x")] * 3)
    verdict = detector.stop
    assert detector.record_call(call("y")) is None
    assert detector.record_result("x", "r") is None
    assert detector.stop is verdict


def test_a_long_clean_stretch_forgives_earlier_notes() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(escalate_after=1, forgive_after=4))
    calls(detector, *[call("x")] * 3)  # one note given
    calls(detector, *(call("read", n=i) for i in range(4)))  # the model moved on
    calls(detector, *[call("y")] * 3)
    assert detector.stop is None, "a new loop starts with notes again"
    detector.record_call(call("y"))
    assert detector.stop is not None


def test_a_short_break_does_not_forgive() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(escalate_after=1, forgive_after=4))
    calls(detector, *[call("x")] * 3)
    calls(detector, call("other"))
    calls(detector, *[call("x")] * 3)
    assert detector.stop is not None


# -- the total cap


def test_the_call_cap_stops_at_once() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(max_calls=5))
    assert calls(detector, *(call("read", n=i) for i in range(5))) == [None] * 5
    assert detector.stop is None
    note = detector.record_call(call("read", n=5))
    verdict = detector.stop
    assert verdict is not None and verdict.kind == "max_calls" and verdict.tool == "read"
    assert note == verdict.text and "5 tool calls" in verdict.text
    assert detector.calls == 6


# -- reset and config


def test_reset_forgets_everything() -> None:
    detector = ToolLoopDetector(LoopDetectorConfig(escalate_after=0, max_calls=3))
    calls(detector, *[call("x")] * 3)
    detector.record_result("t", "r")
    detector.record_result("t", "r")
    assert detector.stop is not None
    detector.reset()
    assert detector.stop is None and detector.calls == 0
    assert calls(detector, call("x"), call("x")) == [None, None]
    assert detector.record_result("t", "r") is None


@pytest.mark.parametrize(
    "options",
    [{"identical_repeat": 1}, {"ping_pong": 2}, {"no_progress": 1}, {"max_calls": 0}, {"escalate_after": -1}],
)
def test_config_refuses_thresholds_that_cannot_work(options: dict[str, int]) -> None:
    with pytest.raises(InvalidInput):
        LoopDetectorConfig(**options)
