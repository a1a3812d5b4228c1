"""Pruning stale tool results: stubs, kept indexes, the latest N untouched, images, stats."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.context.integrity import check_transcript
from steadyloop.context.pruning import IMAGE_CHARS, prune_stats, prune_tool_results, pruned_stub
from steadyloop.errors import InvalidInput
from steadyloop.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def _run(sizes: list[int]) -> list[Message]:
    """A user question and one call and result per size, results ``size`` characters long."""
    out: list[Message] = [UserMessage(content="go")]
    for n, size in enumerate(sizes):
        out.append(AssistantMessage(tool_calls=(ToolCall(f"c{n}", "read_file", {"path": f"f{n}"}),)))
        out.append(ToolResultMessage(call_id=f"c{n}", content="x" * size, name="read_file", is_error=n == 0))
    return out


def test_stub_says_how_much_was_there_with_thousands_separators() -> None:
    assert pruned_stub(10_412) == "[result cleared, 10,412 chars]"
    assert pruned_stub(12, 1) == "[result cleared, 12 chars and 1 image]"
    assert pruned_stub(0, 2) == "[result cleared, 0 chars and 2 images]"


def test_all_but_the_latest_n_are_cleared_and_the_calls_stay_answered() -> None:
    messages = _run([10_412, 300, 5_000, 400])
    pruned = prune_tool_results(messages, keep_last=2, max_chars=256)
    assert len(pruned) == len(messages)
    assert pruned[2] == ToolResultMessage(
        call_id="c0", content="[result cleared, 10,412 chars]", name="read_file", is_error=True
    )
    assert pruned[4] == ToolResultMessage(
        call_id="c1", content="[result cleared, 300 chars]", name="read_file"
    )
    assert pruned[6] is messages[6]  # the latest two are kept whatever their size
    assert pruned[8] is messages[8]
    # Everything else is the same object at the same index: a plan made before pruning still applies.
    assert all(pruned[i] is messages[i] for i in (0, 1, 3, 5, 7))
    assert check_transcript(pruned) == pruned


def test_short_results_are_left_alone() -> None:
    messages = _run([256, 257, 10])
    pruned = prune_tool_results(messages, keep_last=0, max_chars=256)
    assert pruned[2] is messages[2]
    assert pruned[4] == ToolResultMessage(
        call_id="c1", content="[result cleared, 257 chars]", name="read_file"
    )
    assert pruned[6] is messages[6]


def test_keep_last_larger_than_the_results_clears_nothing() -> None:
    messages = _run([9_999, 9_999])
    assert prune_tool_results(messages, keep_last=5) == messages


def test_a_new_list_and_the_input_untouched() -> None:
    messages = _run([1_000, 1_000])
    snapshot = list(messages)
    pruned = prune_tool_results(messages, keep_last=0)
    assert pruned is not messages
    assert messages == snapshot
    unchanged = prune_tool_results(messages, keep_last=9)
    assert unchanged is not messages
    assert unchanged == messages


def test_images_count_toward_size_and_are_cleared() -> None:
    image = ToolResultMessage(
        call_id="c0", content=(TextPart("a screenshot"), ImagePart(url="https://x/y.png")), name="shot"
    )
    messages: list[Message] = [
        UserMessage(content="look"),
        AssistantMessage(tool_calls=(ToolCall("c0", "shot", {}),)),
        image,
    ]
    # Twelve characters of text alone would stay under the limit; the image does not.
    pruned = prune_tool_results(messages, keep_last=0, max_chars=256)
    assert pruned[2] == ToolResultMessage(
        call_id="c0", content="[result cleared, 12 chars and 1 image]", name="shot"
    )
    assert prune_tool_results(messages, keep_last=0, max_chars=IMAGE_CHARS + 12) == messages
    stats = prune_stats(messages, pruned)
    assert stats.cleared == 1
    assert stats.chars == 12 + IMAGE_CHARS - len("[result cleared, 12 chars and 1 image]")


def test_stats_count_what_was_cleared() -> None:
    messages = _run([1_000, 2_000, 50])
    pruned = prune_tool_results(messages, keep_last=1, max_chars=100)
    stats = prune_stats(messages, pruned)
    assert stats.cleared == 2
    assert stats.chars == 3_000 - len("[result cleared, 1,000 chars]") - len("[result cleared, 2,000 chars]")
    assert prune_stats(messages, messages).cleared == 0
    with pytest.raises(InvalidInput):
        prune_stats(messages, messages[:-1])


def test_negative_arguments_are_refused() -> None:
    with pytest.raises(InvalidInput):
        prune_tool_results([], keep_last=-1)
    with pytest.raises(InvalidInput):
        prune_tool_results([], max_chars=-1)


@given(
    sizes=st.lists(st.integers(0, 3_000), max_size=12),
    keep_last=st.integers(0, 6),
    max_chars=st.integers(0, 1_000),
)
def test_pruning_keeps_shape_and_is_idempotent(sizes: list[int], keep_last: int, max_chars: int) -> None:
    messages = _run(sizes)
    pruned = prune_tool_results(messages, keep_last=keep_last, max_chars=max_chars)
    assert len(pruned) == len(messages)
    assert prune_tool_results(pruned, keep_last=keep_last, max_chars=max_chars) == pruned
    results = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
    latest = set(results[max(len(results) - keep_last, 0) :]) if keep_last else set()
    for index, (old, new) in enumerate(zip(messages, pruned, strict=True)):
        if not isinstance(old, ToolResultMessage):
            assert new is old
            continue
        assert isinstance(new, ToolResultMessage)
        assert (new.call_id, new.name, new.is_error) == (old.call_id, old.name, old.is_error)
        size = len(old.content)
        if index in latest or size <= max_chars:
            assert new is old
        else:
            assert new.content == f"[result cleared, {size:,} chars]"
    assert check_transcript(pruned) == pruned
