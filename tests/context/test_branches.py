"""Branch summaries: which entries a move leaves, the newest under a budget, the files they touched."""

from __future__ import annotations

import asyncio

import pytest

from steadyloop.context.branches import (
    BRANCH_SUMMARY_LEAD,
    DEFAULT_RESERVE_TOKENS,
    BranchFiles,
    BranchPreparation,
    BranchSummary,
    Entry,
    branch_budget,
    branch_summary_message,
    collect_branch,
    file_operations,
    prepare_branch,
    summarise_branch,
)
from steadyloop.context.compaction import transcript_tokens
from steadyloop.errors import InvalidInput
from steadyloop.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage


def _tree(*edges: tuple[str, str | None]) -> dict[str, Entry]:
    return {i: Entry(i, parent, UserMessage(content=f"entry {i}")) for i, parent in edges}


#       a
#      / \
#     b   e
#    / \
#   c   f
#   |
#   d
TREE = _tree(("a", None), ("b", "a"), ("c", "b"), ("d", "c"), ("e", "a"), ("f", "b"))


def _ids(entries: tuple[Entry, ...]) -> list[str]:
    return [e.id for e in entries]


def test_moving_to_a_sibling_branch_leaves_the_old_one_up_to_the_common_ancestor() -> None:
    left = collect_branch(TREE, "d", "f")
    assert _ids(left.entries) == ["c", "d"]  # chronological
    assert left.common_ancestor == "b"
    left = collect_branch(TREE, "d", "e")
    assert _ids(left.entries) == ["b", "c", "d"]
    assert left.common_ancestor == "a"


def test_moving_up_leaves_what_is_below_the_target() -> None:
    left = collect_branch(TREE, "d", "b")
    assert _ids(left.entries) == ["c", "d"]
    assert left.common_ancestor == "b"


def test_moving_down_the_same_branch_leaves_nothing() -> None:
    left = collect_branch(TREE, "b", "d")
    assert left.entries == ()
    assert left.common_ancestor == "b"


def test_no_old_leaf_leaves_nothing() -> None:
    assert collect_branch(TREE, None, "d").entries == ()


def test_two_trees_with_no_shared_root_leave_the_whole_old_path() -> None:
    entries = _tree(("a", None), ("b", "a"), ("x", None))
    left = collect_branch(entries, "b", "x")
    assert _ids(left.entries) == ["a", "b"]
    assert left.common_ancestor is None


def test_a_cycle_or_a_missing_parent_does_not_hang() -> None:
    entries = _tree(("a", "b"), ("b", "a"), ("c", "gone"))
    assert _ids(collect_branch(entries, "a", "c").entries) == ["b", "a"]


def test_unknown_ids_are_refused() -> None:
    with pytest.raises(InvalidInput):
        collect_branch(TREE, "d", "nope")
    with pytest.raises(InvalidInput):
        collect_branch(TREE, "nope", "a")


def _call(name: str, **arguments: object) -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(f"id-{name}-{len(arguments)}", name, dict(arguments)),))


def test_file_operations_come_from_the_tool_calls() -> None:
    messages: list[Message] = [
        _call("read_file", path="src/a.py"),
        _call("cat", file="notes.txt"),
        _call("view_image", filename="shot.png"),
        _call("str_replace_edit", file_path="src/a.py"),  # read, then changed: counts as changed
        _call("write_file", path="out/b.py"),
        _call("delete", path="old.py"),
        _call("grep", path="src"),  # neither reads nor writes a file by its name
        _call("read_file", path=""),
        _call("move", target="x"),  # no path argument
        ToolResultMessage(call_id="x", content="ignored"),
    ]
    assert file_operations(messages) == (("notes.txt", "shot.png"), ("old.py", "out/b.py", "src/a.py"))


def _entries(n: int) -> list[Entry]:
    return [
        Entry(str(i), str(i - 1) if i else None, UserMessage(content=f"m{i} " + "x" * 96)) for i in range(n)
    ]


def test_prepare_keeps_the_newest_messages_that_fit_in_order() -> None:
    entries = _entries(10)
    each = transcript_tokens([entries[0].message])
    prepared = prepare_branch(entries, token_budget=each * 3 + each // 2)
    assert prepared.messages == tuple(e.message for e in entries[7:])
    assert prepared.total_tokens == each * 3
    unlimited = prepare_branch(entries)
    assert len(unlimited.messages) == 10
    assert unlimited.total_tokens == 10 * each


def test_prepare_stops_at_the_first_message_that_does_not_fit() -> None:
    # A small old message past a big one is not picked up: the kept stretch has no gaps.
    entries = [
        Entry("0", None, UserMessage(content="tiny")),
        Entry("1", "0", UserMessage(content="x" * 4_000)),
        Entry("2", "1", UserMessage(content="recent")),
    ]
    prepared = prepare_branch(entries, token_budget=100)
    assert prepared.messages == (entries[2].message,)


def test_answers_cut_off_are_found_among_the_messages_kept() -> None:
    entries = [
        Entry("0", None, AssistantMessage(content="cut early " + "x" * 4_000)),
        Entry("1", "0", UserMessage(content="again")),
        Entry("2", "1", AssistantMessage(content="whole")),
        Entry("3", "2", UserMessage(content="more")),
        Entry("4", "3", AssistantMessage(content="cut late")),
    ]
    assert prepare_branch(entries, cut_off={"0", "4"}).cut_off == (0, 4)
    # The first entry does not fit: the indexes are of what was kept.
    assert prepare_branch(entries, token_budget=100, cut_off={"0", "4"}).cut_off == (3,)
    assert prepare_branch(entries).cut_off == ()


def test_file_operations_cover_the_whole_branch_not_only_what_fits() -> None:
    entries = [
        Entry("0", None, _call("write_file", path="early.py")),
        Entry("1", "0", UserMessage(content="x" * 4_000)),
        Entry("2", "1", _call("read_file", path="late.py")),
    ]
    prepared = prepare_branch(entries, token_budget=100)
    assert prepared.read_files == ("late.py",)
    assert prepared.modified_files == ("early.py",)


async def test_the_summary_lists_the_files_after_it() -> None:
    sent: list[str] = []

    async def summarise(text: str) -> str:
        sent.append(text)
        return "tried approach A"

    prepared = prepare_branch([Entry("0", None, _call("edit_file", path="src/a.py"))])
    summary = await summarise_branch(prepared, summarise)
    assert summary.summary == "tried approach A\n\nFiles modified: src/a.py"
    assert summary.modified_files == ("src/a.py",) and summary.read_files == ()
    assert summary.summarised
    assert 'Assistant called edit_file(path="src/a.py").' in sent[0]


async def test_a_failed_branch_summary_still_records_the_branch() -> None:
    async def broken(text: str) -> str | None:
        raise RuntimeError("down")

    prepared = prepare_branch(_entries(3))
    summary = await summarise_branch(prepared, broken)
    assert summary.summary == "[branch summary unavailable: 3 messages left behind]"
    assert not summary.summarised and not summary.aborted
    assert summary.error == "the summariser failed: RuntimeError: down"


async def test_a_summariser_that_answers_nothing_is_an_error_too() -> None:
    async def silent(text: str) -> str | None:
        return "   "

    summary = await summarise_branch(prepare_branch(_entries(1)), silent)
    assert summary.error == "the summariser answered nothing" and not summary.summarised


async def test_custom_instructions_ride_on_the_request() -> None:
    sent: list[str] = []

    async def summarise(text: str) -> str:
        sent.append(text)
        return "ok"

    await summarise_branch(prepare_branch(_entries(2)), summarise, instructions="  Keep the numbers.  ")
    assert "focus on this: Keep the numbers." in sent[0] and "m1 " in sent[0]
    await summarise_branch(prepare_branch(_entries(2)), summarise, instructions="   ")
    assert "focus" not in sent[1]


async def test_a_cancelled_summary_is_aborted_and_its_request_closed() -> None:
    started, closed = asyncio.Event(), asyncio.Event()

    async def slow(text: str) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            closed.set()
        return "never"

    cancel = asyncio.Event()
    task = asyncio.ensure_future(summarise_branch(prepare_branch(_entries(2)), slow, cancel=cancel))
    await started.wait()
    cancel.set()
    summary = await task
    assert summary.aborted and summary.summary == "" and not summary.summarised and summary.error is None
    assert closed.is_set()
    already = await summarise_branch(prepare_branch(_entries(2)), slow, cancel=cancel)
    assert already.aborted


def test_files_of_summaries_in_the_branch_are_carried_forward() -> None:
    earlier = BranchFiles(read_files=("notes.md", "b.py"), modified_files=("a.py",))
    entries = [
        Entry("0", None, UserMessage(content="[summary]"), files=earlier),
        Entry("1", "0", _call("write_file", path="b.py")),
        Entry("2", "1", _call("read_file", path="c.txt")),
    ]
    prepared = prepare_branch(entries)
    assert prepared.read_files == ("c.txt", "notes.md")
    assert prepared.modified_files == ("a.py", "b.py")


def test_the_budget_is_the_window_less_the_reserve_capped_at_half() -> None:
    assert branch_budget(None) == 0 and branch_budget(0) == 0
    assert branch_budget(128_000) == 128_000 - DEFAULT_RESERVE_TOKENS
    assert branch_budget(4096) == 2048  # the default reserve would take it all
    assert branch_budget(4096, reserve_tokens=1000) == 3096
    assert branch_budget(4096, reserve_tokens=0) == 4096
    with pytest.raises(InvalidInput):
        branch_budget(4096, reserve_tokens=-1)


def test_the_summary_travels_in_a_user_message_that_says_what_it_is() -> None:
    summary = BranchSummary(summary="did things", read_files=(), modified_files=())
    message = branch_summary_message(summary)
    assert isinstance(message, UserMessage) and message.content == f"{BRANCH_SUMMARY_LEAD}\n\ndid things"


async def test_an_empty_branch_asks_nobody() -> None:
    async def never(text: str) -> str | None:
        raise AssertionError("not called")

    empty = BranchPreparation(messages=(), read_files=(), modified_files=(), total_tokens=0)
    summary = await summarise_branch(empty, never)
    assert not summary.summarised
