"""parse_tool_arguments and canonical_arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import ToolArgumentsError
from steadyloop.tools.arguments import canonical_arguments, parse_tool_arguments


@pytest.mark.parametrize("raw", [None, "", "   ", "\n\t"])
def test_nothing_is_an_empty_object(raw: str | None) -> None:
    assert parse_tool_arguments(raw) == {}


def test_a_mapping_is_returned_as_a_dict() -> None:
    result = parse_tool_arguments({"a": 1})
    assert result == {"a": 1}
    assert type(result) is dict


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"city": "Paris"}', {"city": "Paris"}),
        ('"{\\"param\\": \\"max_connections\\"}"', {"param": "max_connections"}),
        ("\"{'a': True}\"", {"a": True}),
        ("{'city': 'Paris', 'metric': None}", {"city": "Paris", "metric": None}),
        ("{'a': True, 'b': False}", {"a": True, "b": False}),
        ("{city: 'Paris', days: 3}", {"city": "Paris", "days": 3}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ('{"a": 1, // the first\n "b": 2 /* the second */}', {"a": 1, "b": 2}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ("{“city”: “Paris”}", {"city": "Paris"}),
        ("{‘city’: ‘Paris’, ‘ok’: True}", {"city": "Paris", "ok": True}),
        ('{"a": {"b": 1}', {"a": {"b": 1}}),
        ('{"path": "/tmp/x"', {"path": "/tmp/x"}),
    ],
)
def test_almost_json_is_repaired(raw: str, expected: dict[str, Any]) -> None:
    assert parse_tool_arguments(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{'msg': 'It is True that None came', ok: True}", {"msg": "It is True that None came", "ok": True}),
        ("{'msg': \"it's here\", 'n': None}", {"msg": "it's here", "n": None}),
        ("{'msg': 'it's here', 'n': None}", {"msg": "it's here", "n": None}),
        ("{'q': 'say “hi” and ‘bye’', x: 1}", {"q": "say “hi” and ‘bye’", "x": 1}),
        ("{“q”: “it’s fine”, x: None}", {"q": "it’s fine", "x": None}),
        ("{'code': 'x,}', 'y': 1,}", {"code": "x,}", "y": 1}),
        ("{'url': 'http://a.b/c // d', /* c */ 'n': 1}", {"url": "http://a.b/c // d", "n": 1}),
        ("{'json': '{\"a\": [1,]}', 'b': None}", {"json": '{"a": [1,]}', "b": None}),
        ("{'esc': 'tab\\there\\x1b', 'b': False}", {"esc": "tab\there\x1b", "b": False}),
    ],
)
def test_repair_keeps_what_is_inside_strings(raw: str, expected: dict[str, Any]) -> None:
    assert parse_tool_arguments(raw) == expected


def test_two_objects_run_together_give_the_first() -> None:
    # A known server bug merges the fragments of two calls into one arguments string.
    assert parse_tool_arguments('{"a": 1}{"b": 2}') == {"a": 1}
    assert parse_tool_arguments('{"a": 1}{"a": 1}') == {"a": 1}


@pytest.mark.parametrize(
    "raw", ["hello", "[1, 2]", "42", '"just a string"', "null", "I think {'a': 1}", "[{'a': 1}]"]
)
def test_what_is_not_an_object_is_malformed(raw: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        parse_tool_arguments(raw)
    assert caught.value.kind == "malformed"
    assert caught.value.raw == raw
    assert "JSON object" in str(caught.value)
    assert "did not run" in str(caught.value)


@pytest.mark.parametrize("raw", ['{"content": "half a sent', "{'a': 1}", '{"a": 1', "[1, 2]"])
def test_nothing_is_healed_when_truncated(raw: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        parse_tool_arguments(raw, truncated=True)
    assert caught.value.kind == "truncated"
    assert caught.value.raw == raw
    message = str(caught.value)
    assert "cut off" in message
    assert "token limit" in message
    assert "shorter" in message


def test_a_complete_object_is_accepted_when_truncated() -> None:
    assert parse_tool_arguments('{"a": 1}', truncated=True) == {"a": 1}
    assert parse_tool_arguments('"{\\"a\\": 1}"', truncated=True) == {"a": 1}
    assert parse_tool_arguments("", truncated=True) == {}


def test_the_error_quotes_a_long_input_only_in_part() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        parse_tool_arguments("x" * 5000)
    assert len(str(caught.value)) < 600
    assert caught.value.raw == "x" * 5000


def test_canonical_arguments_ignore_key_order_and_spacing() -> None:
    assert canonical_arguments({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert canonical_arguments(parse_tool_arguments("{'a': 1}")) == canonical_arguments({"a": 1})
    assert canonical_arguments({"é": "ü"}) == '{"é":"ü"}'


# Properties ---------------------------------------------------------------------------------------------

_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
_objects = st.dictionaries(st.text(), _values, max_size=6)


@given(_objects)
def test_any_json_object_round_trips(obj: dict[str, Any]) -> None:
    assert parse_tool_arguments(json.dumps(obj)) == obj
    assert parse_tool_arguments(json.dumps(obj, ensure_ascii=False, indent=2)) == obj


@given(_objects)
def test_double_encoded_objects_open(obj: dict[str, Any]) -> None:
    assert parse_tool_arguments(json.dumps(json.dumps(obj))) == obj


_texts = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40)
_flat = st.dictionaries(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
    _texts | st.none() | st.booleans() | st.integers(),
    max_size=6,
)


@given(_flat)
def test_python_literals_are_read_without_touching_strings(obj: dict[str, Any]) -> None:
    # repr() writes single quotes, True/None and Python escapes: the almost-JSON local models produce.
    assert parse_tool_arguments(repr(obj)) == obj


@given(_flat)
def test_trailing_commas_and_fences_leave_strings_alone(obj: dict[str, Any]) -> None:
    if not obj:
        return
    body = json.dumps(obj)[:-1] + ",}"
    assert parse_tool_arguments(body) == obj
    assert parse_tool_arguments(f"```json\n{body}\n```") == obj


@given(st.text(max_size=60))
def test_the_parser_only_ever_returns_a_dict_or_raises_its_own_error(raw: str) -> None:
    try:
        result = parse_tool_arguments(raw)
    except ToolArgumentsError as error:
        assert error.kind == "malformed"
    else:
        assert isinstance(result, dict)
