"""Sans-I/O pieces of a Gemini reply: streamed call arguments joined back whatever the cut, and the parts
kept for sending a reply back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.wire.gemini.parts import ReplyParts, StreamedArguments, recorded_parts

_KEYS = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
_LEAVES = st.one_of(st.text(max_size=12), st.integers(-1000, 1000), st.booleans(), st.none())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4), st.dictionaries(_KEYS, inner, min_size=1, max_size=4)
    ),
    max_leaves=12,
)
_OBJECTS = st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4)


def _leaves(value: Any, path: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [leaf for n, item in enumerate(value) for leaf in _leaves(item, f"{path}[{n}]")]
    return [(path, value)]


def _pieces(path: str, value: Any, cut: int) -> list[dict[str, Any]]:
    """One leaf as Vertex AI streams it: a string in pieces then an empty closing piece, else whole."""
    if isinstance(value, str):
        cut = min(cut, len(value))
        pieces = [value[:cut], value[cut:]] if cut else [value]
        return [{"jsonPath": path, "stringValue": p, "willContinue": True} for p in pieces] + [
            {"jsonPath": path, "stringValue": ""}
        ]
    if value is None:
        return [{"jsonPath": path, "nullValue": None}]
    kind = "boolValue" if isinstance(value, bool) else "numberValue"
    return [{"jsonPath": path, kind: value}]


@given(_OBJECTS, st.integers(0, 6), st.integers(1, 3))
def test_streamed_arguments_join_back_whatever_the_cut(
    arguments: dict[str, Any], cut: int, per_part: int
) -> None:
    pieces = [p for path, value in _leaves(arguments, "$") for p in _pieces(path, value, cut)]
    streamed = StreamedArguments(0, "", "f")
    for at in range(0, len(pieces), per_part):
        streamed.add(pieces[at : at + per_part])
    assert streamed.skipped == 0
    assert streamed.arguments == arguments


def test_a_piece_that_cannot_be_placed_is_counted_not_guessed() -> None:
    streamed = StreamedArguments(0, "", "f")
    streamed.add(
        [
            {"jsonPath": "recipe.name", "stringValue": "no dollar"},
            {"jsonPath": "$.a", "stringValue": "x", "numberValue": 1},
            {"jsonPath": "$.a", "stringValue": "ok"},
            {"jsonPath": "$.a.b", "stringValue": "through a string"},
            "not an object",
        ]
    )
    assert streamed.arguments == {"a": "ok"}
    assert streamed.skipped == 4


def test_quoted_keys_in_a_path() -> None:
    streamed = StreamedArguments(0, "", "f")
    streamed.add([{"jsonPath": "$['a key'][1]", "numberValue": 2}])
    assert streamed.arguments == {"a key": [None, 2]}


def test_plain_text_with_one_signature_needs_nothing_kept() -> None:
    parts = ReplyParts()
    parts.add({"text": "Hello", "thought": True})
    parts.add({"text": "Hi "})
    parts.add({"text": "there", "thoughtSignature": "sig"})
    assert parts.kept() == ""
    assert parts.parts == [{"text": "Hi there", "thoughtSignature": "sig"}]


def test_code_and_several_signatures_are_kept_in_order() -> None:
    parts = ReplyParts()
    parts.add({"executableCode": {"language": "PYTHON", "code": "1"}, "thoughtSignature": "a"})
    parts.add({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}})
    parts.add({"text": "one", "thoughtSignature": "b"})
    parts.add_call({"name": "f", "args": {}}, None)
    kept = recorded_parts(parts.kept())
    assert kept == [
        {"executableCode": {"language": "PYTHON", "code": "1"}, "thoughtSignature": "a"},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
        {"text": "one", "thoughtSignature": "b"},
        {"functionCall": {"name": "f", "args": {}}},
    ]


@given(st.text(max_size=40))
def test_recorded_parts_reads_back_only_a_list_of_parts(text: str) -> None:
    value = recorded_parts(text)
    assert value is None or (isinstance(value, list) and all(isinstance(p, dict) for p in value))
    assert recorded_parts(json.dumps([{"text": text}])) == [{"text": text}]
