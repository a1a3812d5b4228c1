"""reconstruct: a stored history back to a transcript every server accepts."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.context.integrity import check_transcript
from steadyloop.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from steadyloop.sessions import is_balanced, reconstruct


def call(cid: str) -> ToolCall:
    return ToolCall(cid, "tool", {"id": cid})


def asks(*ids: str, reasoning: str = "") -> AssistantMessage:
    return AssistantMessage(content="", reasoning=reasoning, tool_calls=tuple(call(i) for i in ids))


def answer(cid: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(call_id=cid, content=f"result {cid}", is_error=error)


U1, U2 = UserMessage(content="one"), UserMessage(content="two")
DONE = AssistantMessage(content="done")


def test_a_balanced_history_comes_back_unchanged() -> None:
    history: list[Message] = [
        SystemMessage(content="s"),
        U1,
        asks("a", "b"),
        answer("b"),
        answer("a", error=True),
        DONE,
    ]
    assert reconstruct(history) == history
    assert is_balanced(history)


def test_leading_orphans_left_by_the_history_cap_are_dropped() -> None:
    assert reconstruct([answer("a"), answer("b"), U1, DONE]) == [U1, DONE]


def test_an_interrupted_trailing_tool_turn_is_dropped_with_its_partial_results() -> None:
    assert reconstruct([U1, asks("a", "b")]) == [U1]
    assert reconstruct([U1, asks("a", "b"), answer("a")]) == [U1]


def test_an_interrupted_turn_a_later_run_went_past_is_dropped_too() -> None:
    history: list[Message] = [U1, asks("a", "b"), answer("a"), U2, asks("c"), answer("c"), DONE]
    assert reconstruct(history) == [U1, U2, asks("c"), answer("c"), DONE]


def test_duplicate_and_stray_results_are_dropped() -> None:
    history: list[Message] = [U1, asks("a"), answer("a"), answer("a"), answer("zzz"), DONE]
    assert reconstruct(history) == [U1, asks("a"), answer("a"), DONE]


def test_a_reused_call_id_keeps_only_the_first_group() -> None:
    history: list[Message] = [U1, asks("a"), answer("a"), U2, asks("a"), answer("a"), DONE]
    assert reconstruct(history) == [U1, asks("a"), answer("a"), U2, DONE]
    assert not is_balanced(history)


def test_thinking_is_not_replayed_unless_asked() -> None:
    thought = AssistantMessage(content="hi", reasoning="hmm")
    only_thought = AssistantMessage(reasoning="nothing said")
    history: list[Message] = [U1, thought, U2, only_thought, asks("a", reasoning="why"), answer("a")]
    assert reconstruct(history) == [U1, AssistantMessage(content="hi"), U2, asks("a"), answer("a")]
    assert reconstruct(history, replay_reasoning=True) == history


def test_is_balanced_rejects_each_kind_of_break() -> None:
    assert not is_balanced([answer("a")])
    assert not is_balanced([asks("a")])
    assert not is_balanced([asks("a"), U1, answer("a")])
    assert not is_balanced([asks("a"), answer("a"), answer("a")])
    assert not is_balanced([asks("a", "a"), answer("a"), answer("a")])
    assert is_balanced([])


_messages = st.lists(
    st.one_of(
        st.just(U1),
        st.just(DONE),
        st.lists(st.sampled_from("abcd"), min_size=1, max_size=3).map(lambda ids: asks(*ids, reasoning="r")),
        st.sampled_from("abcde").map(answer),
    ),
    max_size=25,
)


@given(_messages)
def test_whatever_was_stored_reconstructs_balanced(history: list[Message]) -> None:
    out = reconstruct(history)
    assert is_balanced(out)
    assert check_transcript(out) == out  # the rules the loop checks before a request: nothing to repair
    assert all(not (isinstance(m, AssistantMessage) and m.reasoning) for m in out)
    assert reconstruct(out) == out  # already balanced stays as it is


@given(_messages)
def test_reconstruct_only_drops_never_invents(history: list[Message]) -> None:
    out = reconstruct(history, replay_reasoning=True)
    it = iter(history)
    assert all(any(m == h for h in it) for m in out)  # out is a subsequence of the input
