"""The defaults a tool's schema names, read from ``default`` and from the description; and a call made
already, seen with its defaults left out (sans I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.decision import Decision, already_made, not_made
from steadyloop.steering.defaults import is_default, named_defaults, without_defaults


@pytest.mark.parametrize(
    ("description", "named"),
    [
        ("Optional: The venue of the game. Default is 'home'.", ["home"]),
        ("Unit of distance. Defaults to miles.", ["miles"]),
        ("The date; the default value of 'null' represents the current date.", ["null"]),
        ("How many results. Default: 5", ["5"]),
        ('Sort order, default "asc"', ["asc"]),
        ("Precision. Default 0.5, at most 1.", ["0.5"]),
        ("Defaults to the current date if not provided.", []),
        ("Default is not use if not specified.", []),
        ("A default filename will be used.", []),
        ("No word of it here.", []),
    ],
)
def test_a_description_names_its_default(description: str, named: list[str]) -> None:
    assert named_defaults({"type": "string", "description": description}) == named


def test_the_schema_s_own_default_comes_first() -> None:
    assert named_defaults({"default": None, "description": "Default is 'x'"}) == [None, "x"]


@pytest.mark.parametrize(
    ("value", "default", "same"),
    [
        ("Home", "home", True),
        (5, "5", True),
        ("5.0", 5, True),
        (True, "true", True),
        (False, "true", False),
        (None, "null", True),
        ("null", None, True),
        ("", "", True),
        (" ", "", False),
        (["x"], ["x"], True),
        ({"a": 1}, {"a": 2}, False),
        (10**400, "1e400", False),
        (float("nan"), "nan", False),
        ("miles", 5, False),
    ],
)
def test_a_value_is_its_default_as_a_schema_or_description_writes_it(
    value: Any, default: Any, same: bool
) -> None:
    assert is_default(value, default) is same


SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path"],
    "properties": {
        "path": {"type": "string", "default": "."},
        "depth": {"type": "integer", "description": "How deep. Default is 1."},
    },
}
TOOLS = [{"type": "function", "function": {"name": "list_dir", "parameters": SCHEMA}}]


def test_a_required_argument_is_kept_even_at_its_default() -> None:
    assert without_defaults({"path": ".", "depth": 1}, SCHEMA) == {"path": "."}
    assert without_defaults("not an object", SCHEMA) == "not an object"


def _body(*made: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "list_dir", "arguments": json.dumps(a)}}
        for i, a in enumerate(made)
    ]
    return {
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "What is in this folder?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
        ],
    }


def test_a_call_sent_without_its_default_is_made_already_when_decided_with_it() -> None:
    body = _body({"path": "."})
    assert already_made(body, Decision("list_dir", {"path": ".", "depth": 1}))
    assert already_made(body, Decision("list_dir", {"path": ".", "depth": "1"}))
    deeper = Decision("list_dir", {"path": ".", "depth": 2})
    assert not already_made(body, deeper) and not_made(body, deeper) == [
        ("list_dir", {"path": ".", "depth": 2})
    ]
    both = Decision("list_dir", {"path": ".", "depth": 1}, (("list_dir", {"path": "docs"}),))
    assert not_made(body, both) == [("list_dir", {"path": "docs"})]
    assert not already_made({"messages": "junk"}, Decision("list_dir", {}))


@given(
    arguments=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=12,
    ),
    description=st.text(max_size=200),
)
def test_any_arguments_and_description_are_read(arguments: Any, description: str) -> None:
    schema = {"type": "object", "properties": {"a": {"description": description, "default": arguments}}}
    out = without_defaults({"a": arguments, "b": arguments}, schema)
    assert "b" in out
    named_defaults({"description": description})
    is_default(arguments, description)
