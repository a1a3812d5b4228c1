"""parse_tool_arguments and canonical_arguments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from json_repair import repair_json

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
    "raw",
    ["hello", "[1, 2]", "42", '"just a string"', "null", "I think so", "[{'a': 1}]", "Here: [{'a': 1}]"],
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


# Depth, breadth of repair, and totality ------------------------------------------------------------------

_DEEP = [
    "[" * 1000,
    "{" * 600,
    "{'a':" * 300,
    '{"a": ' + "[" * 1000,
    '{"a": ' + "{" * 600,
    "[" * 101 + "]" * 101,
]


@pytest.mark.parametrize("raw", _DEEP)
@pytest.mark.parametrize("truncated", [False, True])
def test_deep_nesting_is_refused_before_any_recursive_reader(raw: str, truncated: bool) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        parse_tool_arguments(raw, truncated=truncated)
    assert caught.value.kind == ("truncated" if truncated else "malformed")


def test_valid_json_nested_past_the_bound_is_refused_and_within_it_read() -> None:
    deep = '{"a": ' + "[" * 120 + "]" * 120 + "}"
    with pytest.raises(ToolArgumentsError, match="nest deeper than 100"):
        parse_tool_arguments(deep)
    shallow = '{"a": ' + "[" * 90 + "]" * 90 + "}"
    assert parse_tool_arguments(shallow)["a"] is not None
    # Brackets inside strings are text, not nesting.
    assert parse_tool_arguments(json.dumps({"code": "[" * 5000})) == {"code": "[" * 5000}


def test_a_value_that_is_not_text_is_malformed() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        parse_tool_arguments(42)  # type: ignore[arg-type]
    assert caught.value.kind == "malformed"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('Here is your JSON: {"key": "value"}', {"key": "value"}),
        ('{"key": "value"} Hope this helps!', {"key": "value"}),
        ("I think {'a': 1}", {"a": 1}),
        ('{"key": "v"alue", "key2": "value2"}', {"key": 'v"alue', "key2": "value2"}),
        (
            '{"comment": "lorem, "ipsum" sic "tamet". To improve"}',
            {"comment": 'lorem, "ipsum" sic "tamet". To improve'},
        ),
        (
            """{""answer"":[{""traits"":''Female aged 60+'',""answer1"":""5""}]}""",
            {"answer": [{"traits": "Female aged 60+", "answer1": "5"}]},
        ),
        ('{"key:"value"}', {"key": "value"}),
        ('{"a": "x}", "b": "]"', {"a": "x}", "b": "]"}),
        ('{"text": "words{words in brackets}more words"}', {"text": "words{words in brackets}more words"}),
        ('The next 64 elements are:\n```json\n{ "key": "value" }\n```', {"key": "value"}),
        (
            "I looked at the folder first.\n\nHere are the arguments:\n```json\n{'path': '/tmp', 'all': True,}\n```\nDone.",
            {"path": "/tmp", "all": True},
        ),
    ],
)
def test_repair_is_as_wide_as_the_repairer_on_what_it_was_built_for(
    raw: str, expected: dict[str, Any]
) -> None:
    assert parse_tool_arguments(raw) == expected


def test_words_around_an_object_are_never_healed_when_truncated() -> None:
    for raw in ('Here is your JSON: {"key": "value"}', '```json\n{"key": "value"}\n```', '{"key": "v"alue"}'):
        with pytest.raises(ToolArgumentsError) as caught:
            parse_tool_arguments(raw, truncated=True)
        assert caught.value.kind == "truncated"


_REPAIRER_CASES: list[str] = json.loads(
    (Path(__file__).parent.parent / "data" / "json_repair_cases.json").read_text(encoding="utf-8")
)["inputs"]


@pytest.mark.parametrize("raw", _REPAIRER_CASES)
def test_where_the_repairer_finds_an_object_so_do_we(raw: str) -> None:
    theirs = repair_json(raw, return_objects=True)
    if not isinstance(theirs, dict) or raw.lstrip().startswith("["):
        return
    ours = parse_tool_arguments(raw)
    assert isinstance(ours, dict)
    # Same keys: shielding strings may keep more of a string than the repairer does, never fewer keys.
    assert set(ours) >= set(theirs) or len(ours) >= len(theirs)


# Properties over generated and mutated input -----------------------------------------------------------

_MUTATIONS = st.sampled_from(["delete", "insert", "duplicate", "truncate", "swap"])
_NOISE = st.sampled_from(
    [*list("{}[]\"',:\\ \n"), "True", "None", "//", "/*", "```", "“", "’", "NaN", "1e400"]
)


@st.composite
def _mutated_json(draw: st.DrawFn) -> str:
    text = json.dumps(draw(_objects), ensure_ascii=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 6))):
        if not text:
            break
        at = draw(st.integers(0, len(text)))
        kind = draw(_MUTATIONS)
        if kind == "delete":
            text = text[:at] + text[at + 1 :]
        elif kind == "insert":
            text = text[:at] + draw(_NOISE) + text[at:]
        elif kind == "duplicate":
            text = text[:at] + text[at : at + draw(st.integers(1, 20))] * draw(st.integers(2, 50)) + text[at:]
        elif kind == "truncate":
            text = text[:at]
        else:
            text = text[at:] + text[:at]
    return text


@given(_mutated_json(), st.booleans())
def test_mutated_json_gives_an_object_or_the_documented_error(raw: str, truncated: bool) -> None:
    try:
        result = parse_tool_arguments(raw, truncated=truncated)
    except ToolArgumentsError as error:
        assert error.kind == ("truncated" if truncated else "malformed")
        assert error.raw == raw
    else:
        assert isinstance(result, dict)


@given(st.integers(1, 3000), st.sampled_from(["[", "{", "{'a':", '{"a":', "(", "[{"]), st.text(max_size=20))
def test_any_depth_of_any_opener_is_total(depth: int, opener: str, tail: str) -> None:
    raw = opener * depth + tail
    try:
        parse_tool_arguments(raw)
    except ToolArgumentsError as error:
        assert error.kind == "malformed"
