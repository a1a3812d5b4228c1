"""Call recovery and argument repair at their edges: real model outputs (tests/data/tool_call_samples.json)
mutated, every marker shape repeated, odd text spliced in. ``recover_tool_calls`` never raises;
``parse_tool_arguments`` gives an object or ``ToolArgumentsError``; both take time linear in the text."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.arguments import parse_tool_arguments
from steadyloop.errors import ToolArgumentsError
from steadyloop.tools.recovery import recover_tool_calls

from ._edges import LINEAR_BOUND, ODD_TEXTS, any_text, growth, mutated_text, odd_texts

SAMPLES = json.loads((Path(__file__).parent.parent / "data" / "tool_call_samples.json").read_text())[
    "samples"
]
TEXTS = [s["text"] for s in SAMPLES]
NAMES = sorted({name for s in SAMPLES for name in s["tool_names"]})
MARKERS: list[str] = json.loads(
    (Path(__file__).parent.parent / "data" / "tool_call_markers.json").read_text()
)["markers"]
ARGUMENTS = [
    '{"city": "Paris", "days": 3}',
    "{'city': 'Paris', 'days': 3,}",
    '```json\n{"q": "x"}\n```',
    '"{\\"a\\": 1}"',
    '{"a": [1, {"b": null}], "c": "\\u00e9"}',
]


def _recovered(text: str) -> None:
    result = recover_tool_calls(text, NAMES)
    assert isinstance(result.content, str)
    for call in result.calls:
        assert call.name in NAMES and isinstance(call.arguments, dict)
        json.dumps(call.arguments)  # what a recovered call holds is JSON again


def _parsed(raw: Any, truncated: bool = False) -> None:
    with contextlib.suppress(ToolArgumentsError):
        assert isinstance(parse_tool_arguments(raw, truncated=truncated), dict)


def test_the_samples_are_there() -> None:
    assert len(TEXTS) > 50


@given(st.sampled_from(TEXTS).flatmap(mutated_text))
def test_any_mutation_of_a_real_output_is_recovered_or_left_as_text(text: str) -> None:
    _recovered(text)


@given(st.lists(st.sampled_from(MARKERS) | odd_texts | any_text, max_size=25))
def test_any_mix_of_markers_and_odd_text_is_handled(parts: list[str]) -> None:
    _recovered("".join(parts))


@given(st.sampled_from(ARGUMENTS).flatmap(mutated_text) | any_text, st.booleans())
def test_any_argument_text_is_an_object_or_the_documented_error(raw: str, truncated: bool) -> None:
    _parsed(raw, truncated)


@pytest.mark.parametrize("text", ODD_TEXTS, ids=lambda t: ascii(t[:12]))
def test_every_odd_text_inside_every_marker(text: str) -> None:
    for marker in MARKERS:
        _recovered(marker + text)
        _recovered(marker + '{"name": "get_weather", "arguments": ' + text + "}")
    _parsed(text)
    _parsed('{"a": ' + text + "}")


@pytest.mark.parametrize(
    "value", [None, 5, 2.5, True, [], [1], {"a": float("nan")}, {"a": "\ud800"}], ids=repr
)
def test_arguments_of_any_kind_are_an_object_or_the_documented_error(value: Any) -> None:
    _parsed(value)


@pytest.mark.parametrize("marker", MARKERS, ids=ascii)
def test_a_marker_repeated_costs_linear_time(marker: str) -> None:
    ratio = growth(lambda n: recover_tool_calls((marker + "x ") * n, NAMES), 2_000)
    assert ratio < LINEAR_BOUND, ratio


@pytest.mark.parametrize("sample", range(0, 200, 20))
def test_a_real_output_repeated_costs_linear_time(sample: int) -> None:
    text = TEXTS[sample % len(TEXTS)]
    ratio = growth(lambda n: recover_tool_calls(text * n, NAMES), max(1, 20_000 // len(text)))
    assert ratio < LINEAR_BOUND, ratio


@pytest.mark.parametrize("piece", ['{"a": 1, ', "{'a': ", "[1, ", '"x\\', "{", "a:b,"], ids=ascii)
def test_argument_repair_costs_linear_time(piece: str) -> None:
    ratio = growth(lambda n: _parsed(piece * n), 2_000)
    assert ratio < LINEAR_BOUND, ratio


@pytest.mark.parametrize(
    ("head", "piece"),
    [('{"a": [', '"x\\u00e9y", '), ("{'a': [", "'x', "), ("{", '"k": "v", "k": "w", ')],
    ids=["escaped strings", "python strings", "repeated keys"],
)
def test_checking_a_repair_for_made_up_values_costs_linear_time(head: str, piece: str) -> None:
    # Every leaf of a repaired reading is looked for in the text: in order, and never past a budget.
    ratio = growth(lambda n: _parsed(head + piece * n), 500)
    assert ratio < LINEAR_BOUND, ratio


def test_a_fenced_block_where_a_key_goes_is_no_assertion_error() -> None:
    # The repairer tripped its own assertion on this (found by the slow profile), out of every reader.
    text = '{"```json{"a": 1}```": 1}'
    with pytest.raises(ToolArgumentsError):
        parse_tool_arguments(text)
    result = recover_tool_calls(
        '<tool_call>{"name": "get_weather", "arguments": ' + text + "}</tool_call>", NAMES
    )
    assert all(isinstance(call.arguments, dict) for call in result.calls)
