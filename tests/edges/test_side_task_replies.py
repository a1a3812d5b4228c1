"""Replies to side tasks (the tool gate, routing, ``ask_json``) are read totally and in linear time.

``read_json`` reads whatever a small model wrote back; ``read_gate`` and ``read_decision`` stand on it, and
``gate_messages`` reads a step's request body. None of them may raise, whatever the text or the body.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.routing import read_decision
from steadyloop.steering.tool_gate import gate_messages, read_gate
from steadyloop.turn.side_tasks import read_json

from ._edges import LINEAR_BOUND, ODD_TEXTS, any_text, growth, json_like, mutated, mutated_text, odd_texts

TOOLS = [
    {"type": "function", "function": {"name": "list_dir", "description": "List a folder.", "parameters": {}}},
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
]
REPLIES = [
    '{"choice": "tool"}',
    '<think>the user wants files</think>\n{"choice": "answer"}',
    '```json\n{"name": "list_dir", "arguments": {"path": "src"}}\n```',
    'Sure: {"name": "read_file", "arguments": {"path": "a.txt",}}',
    "{'choice': 'tool'}",
]
BODY = {
    "tools": TOOLS,
    "messages": [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": [{"type": "text", "text": "What is in src?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
    ],
}


def _read_all(text: str) -> None:
    read_json(text)
    assert read_gate(text) in (None, "tool", "answer")
    decision = read_decision(text, TOOLS)
    assert decision is None or isinstance(decision.arguments, dict)


@given(any_text | st.sampled_from(REPLIES).flatmap(mutated_text))
def test_any_reply_is_read_or_is_none(text: str) -> None:
    _read_all(text)


@given(st.sampled_from(REPLIES), odd_texts, st.sampled_from(["", "{", '{"choice": ', "[", "```json\n"]))
def test_odd_text_inside_a_reply_is_read_or_is_none(reply: str, odd: str, opener: str) -> None:
    _read_all(opener + odd)
    _read_all(reply[: len(reply) // 2] + odd + reply[len(reply) // 2 :])


def test_deep_nesting_is_no_answer_not_a_recursion_error() -> None:
    # Each of these raised RecursionError from the standard library's decoder.
    for text in (
        "[" * 10_000,
        '{"a":' * 10_000,
        "[1," * 100_000,
        '{"choice": ' + "[" * 3_000 + "]" * 3_000 + "}",
    ):
        assert read_json(text) is None
        assert read_gate(text) is None
        assert read_decision(text, TOOLS) is None


def test_what_a_reply_says_is_still_read() -> None:
    assert read_gate(REPLIES[0]) == "tool"
    assert read_gate(REPLIES[1]) == "answer"
    decision = read_decision(REPLIES[3], TOOLS)
    assert decision is not None and decision.arguments == {"path": "a.txt"}
    nested = json.dumps({"choice": "tool", "why": [[[["deep enough"]]]]})
    assert read_gate(nested) == "tool"


def test_a_long_broken_reply_is_read_in_linear_time() -> None:
    # A megabyte of '{xxx...' once took minutes in the repairer; the repair is bounded now.
    for shape in ("{{x", "{x x ", '{"a": "x', "[1,"):
        ratio = growth(lambda n, shape=shape: read_gate(shape * n), 20_000)
        assert ratio < LINEAR_BOUND, (shape, ratio)


@given(mutated(BODY))
def test_any_mutation_of_a_request_body_asks_or_does_not(body: Any) -> None:
    if not isinstance(body, dict):
        return
    asked = gate_messages(body)
    assert asked is None or asked[-1]["role"] == "user"


@given(
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool", "system"]) | json_like},
            optional={"content": json_like, "tool_calls": json_like, "tool_call_id": json_like},
        ),
        max_size=6,
    ),
    json_like,
)
def test_a_body_of_wrong_kinds_asks_or_does_not(messages: list[dict[str, Any]], tools: Any) -> None:
    for declared in (TOOLS, tools):
        asked = gate_messages({"messages": [{"role": "user", "content": "hi"}, *messages], "tools": declared})
        assert asked is None or asked[-1]["role"] == "user"


def test_every_odd_text_as_a_request() -> None:
    for text in ODD_TEXTS:
        asked = gate_messages({"tools": TOOLS, "messages": [{"role": "user", "content": text}]})
        assert asked is None or asked[-1]["role"] == "user"


def test_a_fenced_block_where_a_key_goes_is_no_answer() -> None:
    # The repairer raised AssertionError on this (found by the slow profile).
    assert read_json('{"```json{"a": 1}```": 1}') is None
    assert read_gate('{"choice": "tool", "```json{"a": 1}```": 1}') in (None, "tool")
