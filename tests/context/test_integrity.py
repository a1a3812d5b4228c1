"""Transcript integrity: repair what is unambiguous, fail closed on the rest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.context.integrity import NOT_RUN, STOPPED, check_transcript, unique_call_ids
from steadyloop.errors import TranscriptError
from steadyloop.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage

Q = UserMessage(content="q")


def asks(*ids: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=tuple(ToolCall(i, "f", {}) for i in ids))


def answers(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(call_id=call_id, content="ok")


def test_a_clean_transcript_is_returned_as_is() -> None:
    messages: list[Message] = [
        Q,
        asks("a", "b"),
        answers("a"),
        answers("b"),
        AssistantMessage(content="done"),
    ]
    assert check_transcript(messages) == messages


def test_missing_results_at_the_end_are_synthesised() -> None:
    fixed = check_transcript([Q, asks("a", "b", "c"), answers("a")], interrupted=frozenset({"b"}))
    assert [(m.call_id, m.content, m.is_error) for m in fixed[3:]] == [
        ("b", STOPPED, True),
        ("c", NOT_RUN, True),
    ]  # type: ignore[union-attr]


def test_missing_results_before_the_next_question_are_synthesised() -> None:
    fixed = check_transcript([Q, asks("a"), UserMessage(content="next")])
    assert (
        isinstance(fixed[2], ToolResultMessage)
        and fixed[2].content == NOT_RUN
        and fixed[3] == UserMessage(content="next")
    )


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([Q, asks("a"), answers("a"), asks("a"), answers("a")], "used twice"),
        ([Q, answers("zzz")], "no preceding"),
        ([Q, asks("a"), answers("a"), answers("a")], "second result"),
        ([Q, asks("a", "b"), answers("a"), UserMessage(content="wedged"), answers("b")], "between"),
        ([Q, asks("a"), asks("b"), answers("a"), answers("b")], "between"),
    ],
)
def test_ambiguous_transcripts_fail_closed(messages: list[Message], problem: str) -> None:
    with pytest.raises(TranscriptError, match=problem):
        check_transcript(messages)


def test_reused_ids_are_renamed_at_the_source() -> None:
    taken = {"call_0"}
    renamed = unique_call_ids(
        [ToolCall("call_0", "f", {}), ToolCall("call_0", "g", {}), ToolCall("", "h", {})], taken
    )
    assert [c.id for c in renamed] == ["call_0_2", "call_0_3", "call"]


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 3)), max_size=8))
def test_any_truncated_run_is_repaired_into_a_balanced_transcript(shape: list[tuple[int, int]]) -> None:
    # Build steps of n calls with k results (k may be short), i.e. a run that stopped anywhere.
    messages: list[Message] = [Q]
    n_id = 0
    for calls, results in shape:
        ids = [f"c{n_id + i}" for i in range(calls)]
        n_id += calls
        messages.append(asks(*ids))
        messages.extend(answers(i) for i in ids[: min(results, calls)])
    fixed = check_transcript(messages)
    pending: list[str] = []
    for message in fixed:
        if isinstance(message, AssistantMessage):
            assert not pending
            pending = [c.id for c in message.tool_calls]
        elif isinstance(message, ToolResultMessage):
            assert message.call_id == pending.pop(0)
    assert not pending
    assert check_transcript(fixed) == fixed
