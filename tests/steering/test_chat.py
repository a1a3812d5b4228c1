"""Reading a chat body's messages: the request, what came after it, and any body at all read without error."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.chat import before_request, chat_text, last_request, request_and_result_texts

_LISTING = "README.md\nsrc/\ntests/"


def test_the_request_and_results_of_a_chat_body() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "earlier"},
        {"role": "tool", "tool_call_id": "0", "content": "old"},
        {"role": "user", "content": [{"type": "text", "text": "What is here?"}]},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "1", "content": _LISTING},
        {"role": "tool", "tool_call_id": "2", "content": [{"type": "text", "text": "x"}]},
        "not a message",
    ]
    assert request_and_result_texts(messages) == ("What is here?", [_LISTING, "x"])
    assert request_and_result_texts([]) == ("", [])
    assert before_request(messages) == "be brief\nearlier\nold"
    assert before_request([{"role": "system", "content": "only"}, 7]) == "only"
    assert before_request([]) == ""


def test_the_last_request_and_the_messages_after_it() -> None:
    user = {"role": "user", "content": "now"}
    after = [{"role": "assistant", "content": ""}, {"role": "tool", "content": "x"}]
    assert last_request([{"role": "user", "content": "before"}, user, after[0], 7, after[1]]) == (user, after)
    assert last_request([after[0], "not a message", after[1]]) == (None, after), "no request: all of them"
    assert last_request([]) == (None, [])


def test_the_text_of_a_message_of_any_shape() -> None:
    assert chat_text("plain") == "plain"
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image_url", "image_url": {}},
        "x",
        {"type": "text", "text": 2},
    ]
    assert chat_text(parts) == "a\n2"
    assert chat_text(None) == "" and chat_text({"text": "no"}) == ""


_CONTENT = st.one_of(
    st.none(),
    st.text(max_size=20),
    st.integers(),
    st.lists(
        st.one_of(
            st.text(max_size=5), st.dictionaries(st.sampled_from(["type", "text"]), st.text(max_size=5))
        )
    ),
)
_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "system", 3]), "content": _CONTENT}
    ),
    st.integers(),
    st.text(max_size=5),
    st.none(),
)


@given(st.lists(_MESSAGE, max_size=12))
def test_any_messages_are_read_without_error(messages: list[Any]) -> None:
    request, results = request_and_result_texts(messages)
    user, after = last_request(messages)
    assert isinstance(request, str) and all(isinstance(r, str) for r in results)
    assert len(results) == sum(1 for m in after if m.get("role") == "tool")
    assert (user is None) == (not any(isinstance(m, dict) and m.get("role") == "user" for m in messages))
    assert isinstance(before_request(messages), str)
