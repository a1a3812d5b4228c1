"""Planning a fold and the way back: threshold, tail budget, the cut, earlier summaries, indexes."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.context.compaction import (
    SUMMARY_LEAD,
    CompactionPlan,
    Fold,
    apply_compaction,
    fold_from_json,
    fold_to_json,
    plan_compaction,
    request_index,
    serialize_for_summary,
    summary_message,
    transcript_tokens,
)
from steadyloop.context.integrity import check_transcript
from steadyloop.errors import InvalidInput
from steadyloop.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from steadyloop.sizing.tokens import MESSAGE_OVERHEAD_CHARS

# A message of this many characters weighs exactly 50 tokens at four characters a token, framing included.
FIFTY = 200 - MESSAGE_OVERHEAD_CHARS


def _chat(exchanges: int, system: Sequence[Message] = (SystemMessage(content="s" * FIFTY),)) -> list[Message]:
    """System messages, then ``exchanges`` user/assistant pairs of 50 tokens a message."""
    out = list(system)
    for n in range(exchanges):
        out.append(UserMessage(content=f"{n:03}" + "u" * (FIFTY - 3)))
        out.append(AssistantMessage(content=f"{n:03}" + "a" * (FIFTY - 3)))
    return out


def _plan(messages: Sequence[Message], limit: int, **kwargs: object) -> CompactionPlan:
    plan = plan_compaction(messages, limit=limit, used=limit, **kwargs)  # type: ignore[arg-type]
    assert plan is not None
    return plan


# -- the threshold ---------------------------------------------------------------------------------


def test_nothing_is_planned_until_three_quarters_of_the_window_is_used() -> None:
    messages = _chat(10)
    assert plan_compaction(messages, limit=1000, used=0) is None
    assert plan_compaction(messages, limit=1000, used=750) is None
    assert plan_compaction(messages, limit=1000, used=751) is not None
    assert plan_compaction(messages, limit=1001, used=750) is None  # 750.75 is the line
    assert plan_compaction(messages, limit=1001, used=751) is not None


def test_an_unknown_window_never_plans() -> None:
    assert plan_compaction(_chat(10), limit=0, used=10**6) is None


# -- the tail --------------------------------------------------------------------------------------


def test_the_tail_is_the_longest_that_fits_35_percent_and_starts_on_a_user_message() -> None:
    messages = _chat(10)  # [system, u0, a0, ..., u9, a9]; each exchange is 100 tokens
    assert transcript_tokens(messages[15:]) == 300
    # floor(858 * 0.35) = 300: three exchanges fit exactly.
    plan = _plan(messages, 858)
    assert (plan.head, plan.start, plan.through) == (1, 1, 15)
    assert isinstance(messages[plan.through], UserMessage)
    assert plan.tokens_before == transcript_tokens(messages) == 1050
    assert plan.tokens_kept == 50 + 300
    assert plan.foldable and plan.folded == 14 and plan.reason == ""
    # floor(857 * 0.35) = 299: one token short, so only two exchanges stay.
    assert _plan(messages, 857).through == 17


def test_a_tail_never_starts_on_an_assistant_message_even_when_one_more_would_fit() -> None:
    messages = _chat(10)
    # 350 tokens would take the last assistant message of the fourth-last exchange too, but it is no start.
    assert _plan(messages, 1000).through == 15


def test_when_no_tail_fits_the_cut_falls_on_the_latest_question() -> None:
    messages = _chat(4)
    messages.append(UserMessage(content="x" * 4_000))
    plan = _plan(messages, 1000)
    assert plan.through == len(messages) - 1
    assert plan.tokens_kept > math.floor(1000 * 0.35)


def test_leading_system_messages_are_never_folded() -> None:
    system = [SystemMessage(content="first"), SystemMessage(content="second")]
    messages = _chat(10, system)
    plan = _plan(messages, 858)
    assert (plan.head, plan.start) == (2, 2)
    fold = Fold(summary="notes", through=plan.through, at=0.0, folded=plan.folded, head=plan.head)
    assert apply_compaction(messages, fold)[:2] == system


# -- the cut and tool calls ------------------------------------------------------------------------


def _tool_step(n: int, size: int) -> list[Message]:
    return [
        AssistantMessage(tool_calls=(ToolCall(f"c{n}", "read_file", {"path": f"f{n}"}),)),
        ToolResultMessage(call_id=f"c{n}", content="r" * size, name="read_file"),
    ]


def test_one_long_tool_run_under_one_question_has_nothing_to_fold() -> None:
    messages: list[Message] = [SystemMessage(content="sys"), UserMessage(content="fix the build")]
    for n in range(30):
        messages += _tool_step(n, 2_000)
    plan = _plan(messages, 4_000)
    assert not plan.foldable
    assert plan.start == plan.through == 1
    assert plan.folded == 0
    assert "single question" in plan.reason
    assert plan.tokens_kept == plan.tokens_before


def test_an_empty_transcript_after_the_head_has_nothing_to_fold() -> None:
    plan = _plan([SystemMessage(content="sys")], 10)
    assert not plan.foldable
    assert "nothing follows" in plan.reason


def test_the_cut_never_lands_between_a_call_and_its_result() -> None:
    # A user message wedged between a call and its result (a transcript no server accepts as it stands) is
    # still no place to cut: the result would be left answering nothing.
    messages: list[Message] = [
        UserMessage(content="q" * 4_000),
        AssistantMessage(tool_calls=(ToolCall("c1", "run", {}),)),
        UserMessage(content="wedged"),
        ToolResultMessage(call_id="c1", content="done"),
        UserMessage(content="last"),
    ]
    plan = _plan(messages, 1_000)
    assert plan.through == 4


def test_a_call_left_unanswered_before_a_user_message_is_a_safe_cut() -> None:
    messages: list[Message] = [
        UserMessage(content="q" * 4_000),
        AssistantMessage(tool_calls=(ToolCall("c1", "run", {}),)),
        UserMessage(content="never mind"),
    ]
    plan = _plan(messages, 1_000)
    assert plan.through == 2


# -- earlier summaries -----------------------------------------------------------------------------


def test_an_earlier_summary_is_continued_not_summarised_again() -> None:
    messages = [SystemMessage(content="sys"), summary_message("old notes"), *_chat(10, ())]
    plan = _plan(messages, 858)
    assert plan.previous == "old notes"
    assert (plan.head, plan.start) == (1, 2)
    fold = Fold(summary="new notes", through=plan.through, at=0.0, folded=plan.folded, head=plan.head)
    request = apply_compaction(messages, fold)
    assert request[:2] == [SystemMessage(content="sys"), summary_message("new notes")]
    assert sum(m.content.startswith(SUMMARY_LEAD) for m in request if isinstance(m, SystemMessage)) == 1


def test_from_and_previous_given_mean_nothing_is_scanned() -> None:
    messages = _chat(10, ())
    plan = _plan(messages, 858, from_=6, previous="stored notes")
    assert (plan.start, plan.through, plan.previous) == (6, 14, "stored notes")
    # A summary message in the array is not read when previous is given, and is still replaced.
    with_summary = [summary_message("array notes"), *messages]
    plan = _plan(with_summary, 858, previous="stored notes")
    assert (plan.start, plan.previous) == (1, "stored notes")


def test_from_is_checked() -> None:
    with pytest.raises(InvalidInput):
        plan_compaction(_chat(2), limit=10, used=10, from_=99)
    with pytest.raises(InvalidInput):
        plan_compaction(_chat(2), limit=10, used=10, chars_per_token=0)


def test_from_inside_the_head_still_keeps_the_head() -> None:
    plan = _plan(_chat(10), 858, from_=0)
    assert (plan.head, plan.start) == (1, 1)


# -- the way back ----------------------------------------------------------------------------------


def test_apply_without_a_fold_is_the_messages_themselves() -> None:
    messages = _chat(2)
    assert apply_compaction(messages, None) == messages


def test_apply_refuses_a_fold_that_does_not_fit() -> None:
    with pytest.raises(InvalidInput):
        apply_compaction(_chat(1), Fold(summary="x", through=9, at=0.0, folded=8))


def test_request_index_maps_stored_positions_onto_the_request() -> None:
    messages = _chat(5)
    fold = Fold(summary="notes", through=5, at=0.0, folded=4, head=1)
    request = apply_compaction(messages, fold)
    assert [request_index(i, fold) for i in range(len(messages))] == [
        0,
        None,
        None,
        None,
        None,
        2,
        3,
        4,
        5,
        6,
        7,
    ]
    for index, message in enumerate(messages):
        mapped = request_index(index, fold)
        if mapped is not None:
            assert request[mapped] is message
    assert request_index(3, None) == 3
    with pytest.raises(InvalidInput):
        request_index(-1, fold)


def test_a_fold_round_trips_through_json() -> None:
    fold = Fold(summary="notes", through=5, at=1_700_000_000.5, folded=4, summarised=False, head=1)
    assert fold_from_json(fold_to_json(fold)) == fold
    with pytest.raises(InvalidInput):
        fold_from_json('{"summary": 1}')


# -- serialization ---------------------------------------------------------------------------------


def test_serialization_tags_roles_and_marks_calls_and_results() -> None:
    text = serialize_for_summary(
        [
            SystemMessage(content="be brief"),
            UserMessage(content=(TextPart("what is this?"), ImagePart(url="https://x/y.png"))),
            AssistantMessage(
                content="Let me look.",
                reasoning="hidden scratchpad",
                tool_calls=(ToolCall("c1", "read_file", {"path": "src/a.py"}),),
            ),
            ToolResultMessage(call_id="c1", content="No such file", name="read_file", is_error=True),
        ]
    )
    assert text == (
        "[system]\nbe brief\n\n"
        "[user]\nwhat is this?\n[1 image]\n\n"
        '[assistant]\nLet me look.\n[called: read_file({"path": "src/a.py"})]\n\n'
        "[tool result: read_file (error)]\nNo such file"
    )


def test_serialization_is_truncated_with_a_marker() -> None:
    text = serialize_for_summary([UserMessage(content="x" * 60_000)])
    assert text.startswith("[user]\nxxx")
    assert text.endswith("[... truncated: 10,007 more characters ...]")
    assert len(text) < 50_100
    assert serialize_for_summary([UserMessage(content="hi")], max_chars=4) == (
        "[use\n[... truncated: 5 more characters ...]"
    )


# -- any transcript --------------------------------------------------------------------------------

_sizes = st.integers(0, 1_500)


@st.composite
def transcripts(draw: st.DrawFn) -> list[Message]:
    """Leading system messages, maybe an earlier summary, then questions answered through tool runs."""
    out: list[Message] = [SystemMessage(content="s" * draw(_sizes)) for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        out.append(summary_message("earlier notes"))
    calls = 0
    for _ in range(draw(st.integers(0, 6))):
        out.append(UserMessage(content="u" * draw(_sizes)))
        for _ in range(draw(st.integers(0, 3))):
            ids = [f"c{calls + k}" for k in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            out.append(AssistantMessage(tool_calls=tuple(ToolCall(i, "run", {"n": i}) for i in ids)))
            out += [ToolResultMessage(call_id=i, content="r" * draw(_sizes), name="run") for i in ids]
        if draw(st.booleans()):
            out.append(AssistantMessage(content="a" * draw(_sizes)))
    return out


@given(messages=transcripts(), limit=st.integers(1, 20_000), ratio=st.sampled_from([1.5, 3.0, 4.0]))
def test_every_plan_keeps_the_rules(messages: list[Message], limit: int, ratio: float) -> None:
    assert check_transcript(messages) == messages
    plan = plan_compaction(messages, limit=limit, used=limit, chars_per_token=ratio)
    assert plan is not None
    # Leading system messages are never folded, and an earlier summary is continued.
    assert all(isinstance(m, SystemMessage) for m in messages[: plan.head])
    assert plan.start >= plan.head
    assert plan.previous == (
        "earlier notes" if any(m == summary_message("earlier notes") for m in messages) else None
    )
    users = [i for i in range(plan.start + 1, len(messages)) if isinstance(messages[i], UserMessage)]
    if not plan.foldable:
        assert users == [] and plan.reason
        return
    assert isinstance(messages[plan.through], UserMessage)
    budget = math.floor(limit * 0.35)
    fits = [i for i in users if transcript_tokens(messages[i:], ratio) <= budget]
    # The longest tail that fits, or the latest question when none does.
    assert plan.through == (fits[0] if fits else users[-1])
    fold = Fold(summary="notes", through=plan.through, at=0.0, folded=plan.folded, head=plan.head)
    request = apply_compaction(messages, fold)
    assert check_transcript(request) == request
    assert request[plan.head + 1 :] == messages[plan.through :]
    assert plan.tokens_kept == transcript_tokens(messages[: plan.head] + messages[plan.through :], ratio)
