"""The stable prefix, sans I/O: a frozen head with a fingerprint and a version, and append-only messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.context.prefix import Rewrite, StablePrefix, prefix_fingerprint
from steadyloop.errors import InvalidInput
from steadyloop.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from steadyloop.tools.definition import Tool, tool


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: where it is.
    """
    return path


@tool
def list_dir(path: str) -> str:
    """List a folder.

    Args:
        path: which folder.
    """
    return path


def talk(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(UserMessage(content=f"question {i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}"))
    return out


def test_the_first_hold_takes_a_snapshot_with_a_fingerprint_and_version_one() -> None:
    prefix = StablePrefix()
    assert prefix.snapshot is None and prefix.version == 0 and prefix.fingerprint is None
    snap = prefix.hold("Be brief.", [read_file])
    assert (
        snap.version == 1 and snap.system == "Be brief." and snap.tools == (read_file,) and snap.reason == ""
    )
    assert snap.fingerprint == prefix_fingerprint("Be brief.", [read_file]) == prefix.fingerprint
    assert prefix.hold("Be brief.", [read_file]) is snap  # nothing changed: the same snapshot


def test_the_fingerprint_follows_the_system_prompt_and_every_tool_definition() -> None:
    base = prefix_fingerprint("s", [read_file, list_dir])
    assert base == prefix_fingerprint("s", [read_file, list_dir])
    assert base != prefix_fingerprint("t", [read_file, list_dir])
    assert base != prefix_fingerprint("s", [list_dir, read_file])
    renamed = Tool(name="read_file", description="Other words.", parameters={}, execute=read_file.execute)
    assert base != prefix_fingerprint("s", [renamed, list_dir])


def test_a_changed_head_is_a_new_version_whose_reason_says_what_changed() -> None:
    prefix = StablePrefix()
    prefix.hold("s", [read_file])
    second = prefix.hold("t", [read_file, list_dir])
    assert second.version == 2 and second.reason == "the system prompt changed; tools added: list_dir"
    assert second.told() == (
        "the stable prefix was rebuilt as version 2: the system prompt changed; tools added: list_dir"
    )
    third = prefix.hold("t", [list_dir])
    assert (third.version, third.reason, third.tools) == (3, "tools removed: read_file", (list_dir,))
    changed = Tool(name="list_dir", description="Changed.", parameters={}, execute=list_dir.execute)
    assert prefix.hold("t", [changed]).reason == "tools redefined: list_dir"
    assert prefix.version == 4


def test_the_same_definitions_in_new_objects_are_no_new_version() -> None:
    prefix = StablePrefix()
    first = prefix.hold(None, [read_file])
    again = Tool(
        name=read_file.name,
        description=read_file.description,
        parameters=read_file.parameters,
        execute=read_file.execute,
    )
    held = prefix.hold(None, [again])
    assert held.version == 1 and held.fingerprint == first.fingerprint
    assert held.tools[0] is again  # the new object is what runs, and what the next look compares with


def test_invalidate_makes_a_new_version_with_its_reason_even_when_nothing_changed() -> None:
    prefix = StablePrefix()
    first = prefix.hold("s", [read_file])
    prefix.invalidate("the model changed to m2")
    assert prefix.snapshot is None
    second = prefix.hold("s", [read_file])
    assert second.version == 2 and second.reason == "the model changed to m2"
    assert second.fingerprint == first.fingerprint


def test_a_new_version_starts_the_message_log_over() -> None:
    prefix = StablePrefix()
    prefix.hold("s", [read_file])
    prefix.admit(talk(4))
    prefix.hold("s", [])
    assert prefix.admit([UserMessage(content="anything")]) is None  # no baseline to be rewritten


def test_on_rewrite_must_be_notice_or_raise() -> None:
    with pytest.raises(InvalidInput):
        StablePrefix(on_rewrite="ignore")  # type: ignore[arg-type]


def test_appending_is_admitted_and_a_rewrite_names_the_first_changed_message() -> None:
    prefix = StablePrefix()
    history = talk(4)
    assert prefix.admit(history) is None  # the first request has nothing to match
    assert prefix.admit([*history, UserMessage(content="more")]) is None
    rewritten = [*history, UserMessage(content="more")]
    rewritten[1] = AssistantMessage(content="changed")
    assert prefix.admit(rewritten) == Rewrite(index=1, role="assistant")
    # Told once: the rewritten request is the baseline now.
    assert prefix.admit([*rewritten, AssistantMessage(content="x")]) is None


def test_a_shorter_request_is_a_rewrite_at_its_end_and_equal_copies_are_not() -> None:
    prefix = StablePrefix()
    history = talk(5)
    prefix.admit(history)
    copies = [UserMessage(content=m.content) if isinstance(m, UserMessage) else m for m in history]
    assert prefix.admit(copies) is None
    assert prefix.admit(history[:3]) == Rewrite(index=3, role="")


def test_a_fold_is_the_sanctioned_rewrite() -> None:
    prefix = StablePrefix()
    prefix.admit(talk(6))
    folded = [UserMessage(content="[summary] question 4"), AssistantMessage(content="a5")]
    assert prefix.admit(folded, sanctioned=True) is None
    assert prefix.admit([*folded, UserMessage(content="next")]) is None
    assert prefix.admit([UserMessage(content="other"), *folded[1:]]) == Rewrite(index=0, role="user")


def test_a_refused_rewrite_keeps_the_baseline() -> None:
    prefix = StablePrefix(on_rewrite="raise")
    history = talk(4)
    prefix.admit(history)
    bad = [UserMessage(content="edited"), *history[1:]]
    assert prefix.admit(bad) == Rewrite(index=0, role="user")
    assert prefix.admit(bad) == Rewrite(index=0, role="user")  # still refused: it was never sent
    assert prefix.admit([*history, AssistantMessage(content="x")]) is None


class Counting(list[Message]):
    """A list that counts how often its items are read."""

    reads = 0

    def __iter__(self) -> Iterator[Message]:
        Counting.reads += len(self)
        return super().__iter__()

    def __getitem__(self, index: Any) -> Any:
        Counting.reads += 1
        return super().__getitem__(index)


def test_a_request_derived_from_the_same_growing_transcript_is_admitted_without_reading_it() -> None:
    prefix = StablePrefix()
    transcript: list[Message] = talk(2000)
    prefix.admit(Counting(transcript), source=transcript, pure=True)
    Counting.reads = 0
    transcript.append(UserMessage(content="new"))
    assert prefix.admit(Counting(transcript), source=transcript, pure=True) is None
    assert Counting.reads == 0  # O(new): the head was not compared
    # A hook between transcript and request, or another transcript, means reading it after all.
    transcript.append(AssistantMessage(content="reply"))
    assert prefix.admit(Counting(transcript), source=transcript, pure=False) is None
    assert Counting.reads >= 2000


def test_dressings_are_applied_where_they_were_found_and_forgotten_when_gone() -> None:
    prefix = StablePrefix()
    question = UserMessage(content="q")
    dressed = UserMessage(content="context\n\nq")
    view: list[Message] = [UserMessage(content="first"), AssistantMessage(content="a"), question]
    assert prefix.dress(view) is view
    prefix.remember(question, dressed, 2)
    assert prefix.dressing(question) is dressed
    assert prefix.dress(view)[2] is dressed and view[2] is question
    # A hook that copies messages keeps their places: an equal message where it was counts.
    copied = [*view[:2], UserMessage(content="q"), AssistantMessage(content="b")]
    assert prefix.dress(copied)[2] is dressed
    # Moved (the transcript was replaced): found by identity.
    moved = [question, AssistantMessage(content="b")]
    assert prefix.dress(moved)[0] is dressed
    # Gone: forgotten.
    assert prefix.dress([UserMessage(content="other")]) == [UserMessage(content="other")]
    assert prefix.dressing(question) is None


def test_forget_messages_keeps_the_head_and_invalidate_drops_both() -> None:
    prefix = StablePrefix()
    prefix.hold("s", [])
    prefix.admit(talk(3))
    prefix.forget_messages()
    assert prefix.admit([UserMessage(content="new conversation")]) is None
    assert prefix.version == 1
    prefix.invalidate()
    assert prefix.admit([AssistantMessage(content="anything")]) is None


MESSAGES = st.one_of(
    st.builds(UserMessage, content=st.text(max_size=20)),
    st.builds(AssistantMessage, content=st.text(max_size=20)),
    st.builds(ToolResultMessage, call_id=st.sampled_from(["a", "b"]), content=st.text(max_size=20)),
)


@given(
    first=st.lists(MESSAGES, max_size=30),
    edits=st.lists(st.tuples(st.integers(min_value=0, max_value=40), MESSAGES), max_size=4),
    cut=st.integers(min_value=0, max_value=40),
    added=st.lists(MESSAGES, max_size=5),
)
def test_admit_reports_exactly_the_first_difference(
    first: list[Message], edits: list[tuple[int, Message]], cut: int, added: list[Message]
) -> None:
    prefix = StablePrefix()
    prefix.admit(first)
    second = list(first[: max(cut, 0)]) if cut < len(first) else list(first)
    for at, message in edits:
        if at < len(second):
            second[at] = message
    second += added
    expected = next((i for i, (a, b) in enumerate(zip(first, second, strict=False)) if a != b), None)
    if expected is None and len(second) < len(first):
        expected = len(second)
    found = prefix.admit(second)
    assert (found.index if found is not None else None) == expected
