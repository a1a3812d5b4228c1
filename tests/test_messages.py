"""The transcript values: JSON round-trip, the OpenAI chat-completions shape both ways, clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    Turn,
    UserMessage,
    from_openai,
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
    text_of,
    to_openai,
)
from steadyloop.usage import Usage

text = st.text(max_size=40)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
calls = st.builds(
    ToolCall,
    st.text(min_size=1, max_size=8),
    st.text(min_size=1, max_size=8),
    st.dictionaries(text, json_value, max_size=3),
)
parts = st.lists(
    st.builds(TextPart, text) | st.builds(ImagePart, st.just("data:image/png;base64,AAAA")), max_size=3
)
messages = st.one_of(
    st.builds(SystemMessage, content=text),
    st.builds(UserMessage, content=text | parts.map(tuple)),
    st.builds(
        AssistantMessage, content=text, reasoning=text, tool_calls=st.lists(calls, max_size=2).map(tuple)
    ),
    st.builds(
        ToolResultMessage, call_id=st.text(min_size=1, max_size=8), content=text, is_error=st.booleans()
    ),
)


@given(st.lists(messages, max_size=6))
def test_any_transcript_round_trips_through_json(transcript: list[Message]) -> None:
    assert messages_from_json(messages_to_json(transcript)) == transcript
    for message in transcript:
        assert message_from_json(message_to_json(message)) == message


@given(st.lists(messages, max_size=6))
def test_any_transcript_round_trips_through_the_openai_shape(transcript: list[Message]) -> None:
    back = [from_openai(to_openai(m)) for m in transcript]
    for original, again in zip(transcript, back, strict=True):
        if isinstance(original, AssistantMessage):
            assert again == AssistantMessage(
                content=original.content,
                tool_calls=tuple(
                    ToolCall(c.id, c.name, c.arguments, again.tool_calls[i].raw_arguments)
                    for i, c in enumerate(original.tool_calls)
                ),  # type: ignore[union-attr]
            )
        elif isinstance(original, ToolResultMessage):
            # The error flag travels as our own field (native providers read it; the chat wire drops it).
            assert again == ToolResultMessage(
                call_id=original.call_id, content=original.content, is_error=original.is_error
            )
        else:
            assert again == original


def test_the_openai_shape_of_each_message() -> None:
    call = ToolCall("c1", "get_weather", {"city": "Paris"})
    assert to_openai(AssistantMessage(tool_calls=(call,))) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    image = UserMessage(content=(TextPart("look"), ImagePart("https://x/y.png", detail="low")))
    assert to_openai(image)["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x/y.png", "detail": "low"},
    }
    assert to_openai(ToolResultMessage(call_id="c1", content="18C")) == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "18C",
    }
    thought = AssistantMessage(content="", reasoning="hmm", tool_calls=(call,))
    assert to_openai(thought, reasoning_field="reasoning_content")["reasoning_content"] == "hmm"
    assert "reasoning_content" not in to_openai(thought)


def test_reading_what_users_already_hold() -> None:
    assert from_openai({"role": "developer", "content": "rules"}) == SystemMessage(content="rules")
    read = from_openai(
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "plan",
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{'a': True}"}}
            ],
        }
    )
    assert isinstance(read, AssistantMessage) and read.reasoning == "plan"
    assert read.tool_calls[0].arguments == {"a": True} and read.tool_calls[0].raw_arguments == "{'a': True}"


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"role": "wizard", "content": "x"}, "unknown message role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": 5}, "content must be"),
        ({"role": "user", "content": [{"type": "audio"}]}, "not supported"),
        ({"role": "assistant", "tool_calls": [{"function": {}}]}, "function.name"),
        ("not a dict", "must be an object"),
    ],
)
def test_bad_input_is_a_clear_typed_error(raw: Any, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        from_openai(raw)


def test_bad_json_is_a_clear_typed_error() -> None:
    with pytest.raises(InvalidInput):
        message_from_json('{"role": "nobody"}')
    with pytest.raises(InvalidInput):
        messages_from_json("[1, 2]")


def test_text_of_and_image_helpers() -> None:
    part = ImagePart.from_bytes(b"\x89PNG", "image/png")
    assert part.mime_type == "image/png" and part.url.startswith("data:image/png;base64,")
    assert text_of((TextPart("a"), part, TextPart("b"))) == "a\nb"
    turn = Turn(content="x", reasoning="r", tool_calls=[ToolCall("c", "f", {})])
    assert turn.to_message(keep_reasoning=False) == AssistantMessage(
        content="x", tool_calls=(ToolCall("c", "f", {}),)
    )


def test_usage_adds_counts_and_keeps_unmeasured_fields_absent() -> None:
    a = Usage(10, 2, 12, 4, uncached_tokens=6, prompt_ms=100.0, prompt_tokens_per_second=100.0)
    b = Usage(20, 3, 23, 0, prompt_ms=300.0, prompt_tokens_per_second=50.0, retries=1)
    total = a + b
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens, total.cached_tokens) == (
        30,
        5,
        35,
        4,
    )
    assert total.uncached_tokens == 6 and total.retries == 1 and total.reasoning_tokens is None
    assert total.prompt_tokens_per_second == pytest.approx((10 + 15) / 0.4)
    assert "reasoning_tokens" not in total.to_dict()


def test_signed_thinking_survives_json_and_the_openai_shape_unchanged() -> None:
    from steadyloop.messages import SignedThinking

    blocks = (
        SignedThinking(provider="anthropic", text="Let me think.\n", signature="EqsDCp+/=="),
        SignedThinking(provider="anthropic", redacted="EmwKAhgBEgy3va3p"),
        SignedThinking(provider="gemini", signature="CiQB", call_id="fc_1"),
    )
    message = AssistantMessage(content="", tool_calls=(ToolCall("fc_1", "f", {}),), thinking=blocks)
    assert message_from_json(message_to_json(message)) == message
    shaped = to_openai(message)
    assert shaped["thinking_blocks"][0] == {
        "provider": "anthropic",
        "signature": "EqsDCp+/==",
        "text": "Let me think.\n",
    }
    back = from_openai(shaped)
    assert isinstance(back, AssistantMessage) and back.thinking == blocks
    assert "thinking_blocks" not in to_openai(AssistantMessage(content="plain"))
    assert SignedThinking.from_dict({"signature": "x"}) is None  # no provider: not a block
