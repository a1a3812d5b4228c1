"""Token estimates: exact arithmetic on known bodies, and parts that always sum to the total."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.sizing.tokens import (
    CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_CHARS,
    ContextParts,
    ContextTokens,
    context_chars,
    context_tokens,
    estimate_tokens,
    reply_ceiling,
    request_tokens,
    tool_schema_tokens,
)

FRAME = MESSAGE_OVERHEAD_CHARS

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
TOOLS_CHARS = len(json.dumps(TOOLS))


def test_estimate_tokens_rounds_up() -> None:
    assert CHARS_PER_TOKEN == 4
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("a" * 10, 2.5) == 4
    assert estimate_tokens("a" * 11, 2.5) == 5


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True])
def test_a_ratio_must_be_a_positive_number(bad: float) -> None:
    with pytest.raises(InvalidInput):
        estimate_tokens("abc", bad)
    with pytest.raises(InvalidInput):
        request_tokens({"messages": []}, chars_per_token=bad)


def test_request_tokens_exact() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "s" * 20},
            {"role": "user", "content": "u" * 30},
        ]
    }
    assert request_tokens(body) == math.ceil((20 + 30 + 2 * FRAME) / 4)
    assert request_tokens(body, chars_per_token=2) == (20 + 30 + 2 * FRAME) // 2


def test_every_string_the_server_reads_is_counted() -> None:
    body = {
        "messages": [
            {"role": "user", "name": "ann", "content": [{"type": "text", "text": "t" * 10}, "x" * 3]},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "r" * 40,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"p":1}'},
                    },
                    {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": {"p": 1}}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "o" * 50},
        ],
    }
    parts = context_chars(body)
    assert parts.history == (3 + 10 + 3 + FRAME) + (40 + 9 + 7 + 2 + len(json.dumps({"p": 1})) + FRAME)
    assert parts.tool_results == 50 + FRAME
    assert parts.system == 0
    assert parts.tools == 0


def test_tools_are_their_json_and_agree_with_tool_schema_tokens() -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    assert context_chars(body).tools == TOOLS_CHARS
    assert tool_schema_tokens(TOOLS) == math.ceil(TOOLS_CHARS / 4)
    assert tool_schema_tokens(None) == 0
    assert request_tokens(body) == math.ceil((2 + FRAME) / 4) + tool_schema_tokens(TOOLS)
    assert context_tokens(body).tools == tool_schema_tokens(TOOLS)
    assert context_tokens(body, chars_per_token=2.7).tools == tool_schema_tokens(TOOLS, 2.7)


@pytest.mark.parametrize("spelling", ["max_tokens", "max_completion_tokens"])
def test_the_reply_ceiling_is_counted_under_either_spelling(spelling: str) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "u" * 16}]}
    bare = request_tokens(body)
    assert bare == math.ceil((16 + FRAME) / 4)
    assert request_tokens({**body, spelling: 4096}) == bare + 4096
    # context_tokens weighs the prompt only.
    assert context_tokens({**body, spelling: 4096}).total == bare


def test_reply_ceiling() -> None:
    assert reply_ceiling({}) == 0
    assert reply_ceiling({"max_tokens": None}) == 0
    assert reply_ceiling({"max_tokens": -1}) == 0
    assert reply_ceiling({"max_tokens": True}) == 0
    assert reply_ceiling({"max_tokens": 100, "max_completion_tokens": 300}) == 300


def test_images_weigh_a_fixed_allowance() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100_000}}
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "t" * 8}, image, image]}]}
    assert context_chars(body) == ContextParts(history=8 + FRAME, images=2)
    assert request_tokens(body) == math.ceil((8 + FRAME) / 4) + 2 * IMAGE_TOKENS
    split = context_tokens(body)
    assert split.history == split.total == request_tokens(body)


def test_context_tokens_four_ways() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "s" * 24},
            {"role": "developer", "content": "d" * 24},
            {"role": "user", "content": "u" * 64},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "function": {"name": "f" * 4, "arguments": "a" * 60}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "o" * 184},
        ],
        "tools": TOOLS,
        "max_tokens": 1000,
    }
    got = context_tokens(body)
    assert got == ContextTokens(
        system=(24 + FRAME) * 2 // 4,
        tools=math.ceil(TOOLS_CHARS / 4),
        tool_results=(184 + FRAME) // 4,
        history=(64 + FRAME + 64 + FRAME) // 4,
        total=request_tokens(body) - 1000,
    )


def test_context_tokens_with_the_endpoints_count_shares_it_by_characters() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "s" * (100 - FRAME)},
            {"role": "user", "content": "u" * (300 - FRAME)},
            {"role": "tool", "content": "o" * (600 - FRAME)},
        ]
    }
    assert context_tokens(body, prompt_tokens=1000) == ContextTokens(
        system=100, tools=0, tool_results=600, history=300, total=1000
    )
    # The rounding goes to the largest part.
    odd = context_tokens(body, prompt_tokens=7)
    assert (odd.system, odd.history, odd.tool_results, odd.total) == (0, 2, 5, 7)


def test_an_empty_body() -> None:
    assert request_tokens({}) == 0
    assert context_tokens({}) == ContextTokens(0, 0, 0, 0, 0)
    assert context_tokens({}, prompt_tokens=12) == ContextTokens(0, 0, 0, 12, 12)


texts = st.text(max_size=300)
parts = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, texts),
        st.just({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}),
    ),
    max_size=3,
)
calls = st.lists(
    st.builds(
        lambda n, a: {"id": "c", "type": "function", "function": {"name": n, "arguments": a}}, texts, texts
    ),
    max_size=2,
)
message = st.builds(
    lambda role, content, tool_calls, reasoning: {
        "role": role,
        "content": content,
        **({"tool_calls": tool_calls} if role == "assistant" and tool_calls else {}),
        **({"reasoning_content": reasoning} if role == "assistant" and reasoning else {}),
    },
    st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    st.one_of(st.none(), texts, parts),
    calls,
    texts,
)
bodies = st.builds(
    lambda messages, tools, ceiling, spelling: {
        "messages": messages,
        **({"tools": tools} if tools else {}),
        **({spelling: ceiling} if ceiling else {}),
    },
    st.lists(message, max_size=8),
    st.lists(
        st.fixed_dictionaries(
            {"type": st.just("function"), "function": st.fixed_dictionaries({"name": texts})}
        )
    ),
    st.integers(min_value=0, max_value=100_000),
    st.sampled_from(["max_tokens", "max_completion_tokens"]),
)
ratios = st.floats(min_value=0.5, max_value=10, allow_nan=False)


@given(bodies, ratios, st.one_of(st.none(), st.integers(min_value=0, max_value=10**7)))
def test_parts_always_sum_exactly_to_the_total(
    body: dict[str, Any], ratio: float, prompt_tokens: int | None
) -> None:
    got = context_tokens(body, chars_per_token=ratio, prompt_tokens=prompt_tokens)
    assert got.system + got.tools + got.tool_results + got.history == got.total
    assert min(got.system, got.tools, got.tool_results, got.history) >= 0
    if prompt_tokens is None:
        assert got.total == request_tokens(body, chars_per_token=ratio) - reply_ceiling(body)
        assert got.tools == tool_schema_tokens(body.get("tools"), ratio)
    else:
        assert got.total == prompt_tokens
