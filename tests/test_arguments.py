"""parse_tool_arguments and canonical_arguments."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from json_repair import repair_json

from steadyloop.arguments import canonical_arguments, parse_tool_arguments
from steadyloop.errors import ToolArgumentsError


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
    (Path(__file__).parent / "data" / "json_repair_cases.json").read_text(encoding="utf-8")
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


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # A missing colon: the repairer read a placeholder's index as the value 3.
        ('{"key": "value"}, "key2" "value2"}', {"key": "value", "key2": "value2"}),
        # The bracket that closes the object, and a code fence, are not the unclosed string's.
        ('{"lorem_ipsum": "sic tamet, quick brown fox. }', {"lorem_ipsum": "sic tamet, quick brown fox."}),
        ('{"key": "value}```', {"key": "value"}),
        ('{"a": {"b": "x}', {"a": {"b": "x"}}),
        ('{"code": "if (a) { b }', {"code": "if (a) { b }"}),  # a bracket the string opened is its own
        ('{"a": "x } more', {"a": "x } more"}),
        # A key whose closing quote went to the next line.
        ('{"key_1\n": "value"}', {"key_1": "value"}),
        ('{"a": "v\n", "b": 1}', {"a": "v\n", "b": 1}),  # a value keeps its line break
        # An escape past the last code point is no character: kept as written, never clamped to one.
        ('{"a": "\\U00701b5c", "b": }', {"a": "\\U00701b5c", "b": ""}),
    ],
)
def test_repair_follows_the_repairer_and_never_makes_up_a_value(raw: str, expected: dict[str, Any]) -> None:
    assert parse_tool_arguments(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": [1, 5.431854588179251+16]}',  # the repairer splits it into 5.43... and 16
        '{"" {"" -229}}',
        '{"x": 1, "\ua680\ua641\ua682": 2',  # text that fakes a placeholder is read only as written
    ],
)
def test_a_reading_that_would_make_up_a_value_is_refused_or_read_as_written(raw: str) -> None:
    try:
        result = parse_tool_arguments(raw)
    except ToolArgumentsError as error:
        assert error.kind == "malformed"
    else:
        assert not invented(result, raw), result


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


# No invented leaf: every key and leaf of a repaired object was written in the input ---------------------
#
# The oracle is written apart from the parser's own check: a string must match a stretch of the input where
# each of its characters is written as itself or as any escape of it, and a backslash may have been dropped;
# a number must be one of the input's numbers as a whole; true, false and null must be written in some letter
# case (None for null).

_HEX = "0123456789abcdefABCDEF"


def _hex(code: int, width: int) -> str:
    return "".join(f"[{d.lower()}{d.upper()}]" for d in f"{code:0{width}x}")


def _spellings(char: str) -> str:
    code = ord(char)
    ways = [re.escape(char)]
    simple = {"\n": "n", "\t": "t", "\r": "r", "\b": "b", "\f": "f", "\\": "\\\\", "/": "/"}
    if char in simple:
        ways.append(r"\\" + simple[char])
    if char in "\"'‘’“”":
        ways.append(r"\\" + re.escape(char))
    if code < 0x100:
        ways.append(r"\\x" + _hex(code, 2))
    if code < 0x10000:
        ways.append(r"\\u" + _hex(code, 4))
    else:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        ways.append(r"\\u" + _hex(high, 4) + r"\\u" + _hex(low, 4))
    ways.append(r"\\U" + _hex(code, 8))
    return r"(?:\\)?(?:" + "|".join(ways) + ")"


def _written(text: str, raw: str) -> bool:
    if text in raw:
        return True
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return any(re.search("".join(_spellings(c) for c in form), raw) for form in {text, joined})


_WHOLE_NUMBER = re.compile(r"(?<![\w.+-])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def _numbers(raw: str) -> list[float]:
    out: list[float] = []
    for token in _WHOLE_NUMBER.findall(raw):
        out.append(float(token))
        if not any(mark in token for mark in ".eE") and len(token) < 4000:
            out.append(int(token))
    return out


def invented(value: Any, raw: str) -> list[Any]:
    """The keys and leaves of ``value`` not written in ``raw``."""
    found: list[Any] = []
    lowered = raw.lower()
    if isinstance(value, dict):
        for key, item in value.items():
            found += invented(key, raw) + invented(item, raw)
    elif isinstance(value, list):
        for item in value:
            found += invented(item, raw)
    elif isinstance(value, str):
        if value and not _written(value, raw):
            found.append(value)
    elif value is None or isinstance(value, bool):
        words = {True: ["true"], False: ["false"], None: ["null", "none"]}[value]
        if not any(word in lowered for word in words):
            found.append(value)
    elif isinstance(value, float) and math.isnan(value):
        if "nan" not in lowered:
            found.append(value)
    elif value not in _numbers(raw) and not (math.isinf(value) and "infinity" in lowered):
        found.append(value)
    return found


_leaf_texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=10) | st.sampled_from(
    ["", "x,}", "it's", 'a"b', "C:\\tmp", "é", "😀", "True", "null", "```", "3"]
)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | _leaf_texts
)
_generated = st.dictionaries(
    _leaf_texts,
    st.recursive(
        _leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_leaf_texts, inner, max_size=3),
        max_leaves=8,
    ),
    min_size=1,
    max_size=4,
)
_JUNK = st.sampled_from(
    [*"{}[]\"',:\\ \n", "True", "None", "//", "/*", "```", "“", "’", "x", "7", "-", "1e5"]
)


@st.composite
def _broken(draw: st.DrawFn) -> str:
    """A generated object written as JSON or as Python, then cut, stripped of quotes, commas or colons, or
    given junk."""
    obj = draw(_generated)
    style = draw(st.sampled_from(["json", "ascii", "indented", "python"]))
    if style == "python":
        text = repr(obj)
    else:
        text = json.dumps(obj, ensure_ascii=style == "ascii", indent=1 if style == "indented" else None)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["cut", "quote", "comma", "colon", "junk", "char"]))
        if kind == "cut":
            text = text[: draw(st.integers(1, max(1, len(text))))]
        elif kind in ("quote", "comma", "colon"):
            marks = {"quote": "\"'", "comma": ",", "colon": ":"}[kind]
            places = [i for i, c in enumerate(text) if c in marks]
            if places:
                at = draw(st.sampled_from(places))
                text = text[:at] + text[at + 1 :]
        elif kind == "junk":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(_JUNK) + text[at:]
        elif text:
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + text[at + 1 :]
    return text


@given(_broken())
def test_every_leaf_of_a_repaired_object_was_written_in_the_input(raw: str) -> None:
    try:
        result = parse_tool_arguments(raw)
    except ToolArgumentsError as error:
        assert error.kind == "malformed" and error.raw == raw
        return
    assert not invented(result, raw), result


def test_the_oracle_catches_what_the_parser_used_to_make_up() -> None:
    raw = '{"key": "value"}, "key2" "value2"}'
    assert invented({"key": "value", "key2": 3}, raw) == [3]
    assert invented({"a": 16}, '{"a": 5.4+16}') == [16]
    assert invented({"a": "\U0010ffff"}, '{"a": "\\U00701b5c"}') == ["\U0010ffff"]
    assert invented({"é": True, "x": None, "n": 1e400}, '{"\\u00e9": TRUE, x: None, n: 1e400}') == []
