"""The SessionStore protocol, held to the same suite for the SQLite and the in-memory store."""

from __future__ import annotations

from typing import Any

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.events import AgentEnd, AgentStart, Event, MessageUpdate, Notice, ToolExecutionEnd, TurnEnd
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
from steadyloop.sessions import SessionConfig, SessionNotFound, SessionStore, SessionUsage
from steadyloop.usage import Usage

A, B = "agent-a", "agent_b"

TRANSCRIPT: list[Message] = [
    SystemMessage(content="be brief"),
    UserMessage(
        content=(TextPart("what is in this picture?"), ImagePart.from_bytes(b"\x89PNG", "image/png"))
    ),
    AssistantMessage(
        content="Let me look.",
        reasoning="The user wants a description; read the file first.",
        tool_calls=(
            ToolCall(
                "call_1", "read", {"path": "a.txt", "nested": {"n": [1, 2.5, None]}}, raw_arguments='{"path":'
            ),
            ToolCall("call_2", "ls", {}),
        ),
    ),
    ToolResultMessage(call_id="call_2", content="a.txt\nb.txt", name="ls"),
    ToolResultMessage(
        call_id="call_1",
        content=(TextPart("no such file"), ImagePart(url="https://x/y.png", detail="low")),
        is_error=True,
    ),
    AssistantMessage(content="A cat. ✓ ünïcode"),
]


def test_the_stores_satisfy_the_protocol(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)


async def test_history_round_trips_exactly(store: SessionStore) -> None:
    info = await store.create(A, title="first")
    await store.append_messages(info.session_id, TRANSCRIPT[:3], agent_id=A)
    await store.append_messages(info.session_id, TRANSCRIPT[3:], agent_id=A)
    assert await store.load_messages(info.session_id, agent_id=A) == TRANSCRIPT
    assert await store.load_messages(info.session_id, agent_id=A, limit=2) == TRANSCRIPT[-2:]
    assert await store.load_messages(info.session_id, agent_id=A, limit=0) == []
    again = await store.get(info.session_id, agent_id=A)
    assert again is not None
    assert (again.title, again.agent_id, again.message_count) == ("first", A, len(TRANSCRIPT))


async def test_create_list_latest_and_delete(store: SessionStore, clock: Any) -> None:
    first = await store.create(A)
    clock.advance(1)
    second = await store.create(A, session_id="mine-2")
    clock.advance(1)
    await store.append_messages(first.session_id, [UserMessage(content="again")], agent_id=A)
    assert second.session_id == "mine-2"
    assert [i.session_id for i in await store.list(A)] == [first.session_id, "mine-2"]
    latest = await store.latest(A)
    assert latest is not None and latest.session_id == first.session_id
    with pytest.raises(InvalidInput, match="already in use"):
        await store.create(A, session_id="mine-2")
    assert await store.delete("mine-2", agent_id=A) is True
    assert await store.delete("mine-2", agent_id=A) is False
    assert await store.get("mine-2", agent_id=A) is None
    assert await store.latest(B) is None
    with pytest.raises(SessionNotFound):
        await store.load_messages("mine-2", agent_id=A)


async def test_a_title_is_set_and_cleared_without_moving_the_session_in_the_list(
    store: SessionStore, clock: Any
) -> None:
    first = await store.create(A)
    clock.advance(1)
    second = await store.create(A, title="kept")
    clock.advance(1)
    await store.set_title(first.session_id, "Renamed ✓", agent_id=A)
    got = await store.get(first.session_id, agent_id=A)
    assert got is not None and (got.title, got.updated_at) == ("Renamed ✓", first.updated_at)
    assert [i.session_id for i in await store.list(A)] == [second.session_id, first.session_id]
    await store.set_title(second.session_id, None, agent_id=A)
    assert [i.title for i in await store.list(A)] == [None, "Renamed ✓"]
    with pytest.raises(SessionNotFound):
        await store.set_title(first.session_id, "taken", agent_id=B)
    with pytest.raises(SessionNotFound):
        await store.set_title("no-such-session", "x", agent_id=A)


async def test_another_agent_cannot_touch_a_session_even_with_its_id(store: SessionStore) -> None:
    info = await store.create(A)
    sid = info.session_id
    await store.append_messages(sid, [UserMessage(content="secret")], agent_id=A)
    await store.append_events(sid, [AgentStart(run_id="r")], agent_id=A)

    assert await store.get(sid, agent_id=B) is None
    assert await store.list(B) == []
    assert await store.latest(B) is None
    for attempt in (
        store.load_messages(sid, agent_id=B),
        store.append_messages(sid, [UserMessage(content="injected")], agent_id=B),
        store.load_events(sid, agent_id=B),
        store.append_events(sid, [Notice(text="injected")], agent_id=B),
        store.record_usage(sid, Usage(prompt_tokens=5), agent_id=B),
        store.export_jsonl(sid, agent_id=B),
    ):
        with pytest.raises(SessionNotFound):
            await attempt
    assert await store.delete(sid, agent_id=B) is False
    with pytest.raises(InvalidInput, match="already in use"):
        await store.create(B, session_id=sid)

    # A's session is untouched by all of it.
    assert await store.load_messages(sid, agent_id=A) == [UserMessage(content="secret")]
    assert [e for _, e in await store.load_events(sid, agent_id=A)] == [AgentStart(run_id="r")]
    got = await store.get(sid, agent_id=A)
    assert got is not None and got.usage == SessionUsage()


@pytest.mark.parametrize("bad", ["", "a" * 65, "../etc", "a b", "ses/1", "ünï", "a\n", None, 7])
async def test_ids_are_validated(store: SessionStore, bad: Any) -> None:
    info = await store.create(A)
    with pytest.raises(InvalidInput, match="session_id must be 1-64"):
        await store.get(bad, agent_id=A)
    with pytest.raises(InvalidInput, match="agent_id must be 1-64"):
        await store.get(info.session_id, agent_id=bad)
    with pytest.raises(InvalidInput, match="agent_id"):
        await store.create(bad)
    if bad is not None:  # None asks for a fresh id
        with pytest.raises(InvalidInput, match="session_id"):
            await store.create(A, session_id=bad)
    with pytest.raises(InvalidInput):
        await store.append_messages(bad, [], agent_id=A)
    with pytest.raises(InvalidInput):
        await store.list(bad)
    assert await store.get("a" * 64, agent_id="Z-_9") is None  # the edges of the pattern are fine


async def test_idle_timeout_expires_a_session_on_read(make_store: Any, clock: Any) -> None:
    store = make_store(SessionConfig(idle_timeout_s=60))
    info = await store.create(A)
    clock.advance(50)
    await store.append_messages(
        info.session_id, [UserMessage(content="hi")], agent_id=A
    )  # activity resets idle
    clock.advance(50)
    assert await store.get(info.session_id, agent_id=A) is not None
    clock.advance(11)
    assert await store.get(info.session_id, agent_id=A) is None
    assert await store.list(A) == []
    with pytest.raises(SessionNotFound):
        await store.load_messages(info.session_id, agent_id=A)


async def test_max_age_expires_however_active(make_store: Any, clock: Any) -> None:
    store = make_store(SessionConfig(max_age_s=100))
    old = await store.create(A)
    clock.advance(60)
    young = await store.create(A)
    for _ in range(4):
        clock.advance(10)
        await store.record_usage(old.session_id, Usage(prompt_tokens=1), agent_id=A)
    clock.advance(1)  # old is 101 s old, young 41 s
    assert [i.session_id for i in await store.list(A)] == [young.session_id]
    with pytest.raises(SessionNotFound):
        await store.append_messages(old.session_id, [UserMessage(content="late")], agent_id=A)


async def test_history_cap_keeps_the_newest_entries(make_store: Any) -> None:
    store = make_store(SessionConfig(max_history_entries=3))
    info = await store.create(A)
    for n in range(5):
        await store.append_messages(info.session_id, [UserMessage(content=str(n))], agent_id=A)
    await store.append_messages(
        info.session_id, [AssistantMessage(content="5"), UserMessage(content="6")], agent_id=A
    )
    kept = await store.load_messages(info.session_id, agent_id=A)
    assert kept == [UserMessage(content="4"), AssistantMessage(content="5"), UserMessage(content="6")]
    got = await store.get(info.session_id, agent_id=A)
    assert got is not None and got.message_count == 3


async def test_usage_accumulates_over_runs_including_failed_ones(store: SessionStore) -> None:
    info = await store.create(A)
    sid = info.session_id
    ok = Usage(
        prompt_tokens=100, completion_tokens=20, total_tokens=120, cached_tokens=64, reasoning_tokens=7
    )
    failed = Usage(
        prompt_tokens=50, completion_tokens=3, total_tokens=53
    )  # the server said nothing of reasoning
    await store.record_usage(sid, ok, agent_id=A, turns=2)
    total = await store.record_usage(sid, failed, agent_id=A, turns=1)
    expected = SessionUsage(
        prompt_tokens=150, completion_tokens=23, cached_tokens=64, reasoning_tokens=7, turns=3, runs=2
    )
    assert total == expected
    got = await store.get(sid, agent_id=A)
    assert got is not None and got.usage == expected


async def test_event_seqs_continue_and_replay_from_any_seq(store: SessionStore) -> None:
    info = await store.create(A)
    sid = info.session_id
    assert await store.append_events(sid, [], agent_id=A) == 0
    run1: list[Event] = [AgentStart(run_id="r1"), AgentEnd(outcome="completed", run_id="r1")]
    run2: list[Event] = [
        AgentStart(run_id="r2"),
        MessageUpdate(kind="text", delta="hello"),
        TurnEnd(step=1, message=AssistantMessage(content="hello")),
        ToolExecutionEnd(
            call_id="c", name="t", result=ToolResultMessage(call_id="c", content="x"), disposition="failed"
        ),
    ]
    assert await store.append_events(sid, run1, agent_id=A) == 2
    assert await store.append_events(sid, run2, agent_id=A) == 6
    assert await store.append_events(sid, [], agent_id=A) == 6
    assert await store.load_events(sid, agent_id=A) == list(enumerate(run1 + run2, 1))
    assert await store.load_events(sid, agent_id=A, after_seq=4) == [(5, run2[2]), (6, run2[3])]
    assert await store.load_events(sid, agent_id=A, after_seq=6) == []
    got = await store.get(sid, agent_id=A)
    assert got is not None and got.last_event_seq == 6


async def test_export_import_round_trip(make_store: Any) -> None:
    source, target = make_store(), make_store()
    info = await source.create(A, title="exported")
    sid = info.session_id
    await source.append_messages(sid, TRANSCRIPT, agent_id=A)
    events = [
        AgentStart(run_id="r"),
        MessageUpdate(kind="thinking", delta="hm"),
        AgentEnd(outcome="error", error="x"),
    ]
    await source.append_events(sid, events, agent_id=A)
    await source.record_usage(
        sid, Usage(prompt_tokens=9, cached_tokens=4, reasoning_tokens=2), agent_id=A, turns=1
    )
    text = await source.export_jsonl(sid, agent_id=A)
    assert text.endswith("\n") and len(text.splitlines()) == 1 + len(TRANSCRIPT) + len(events)

    imported = await target.import_jsonl(text, agent_id=B)
    assert imported.session_id == sid and imported.agent_id == B and imported.title == "exported"
    assert imported.usage == SessionUsage(
        prompt_tokens=9, cached_tokens=4, reasoning_tokens=2, turns=1, runs=1
    )
    assert await target.load_messages(sid, agent_id=B) == TRANSCRIPT
    assert await target.load_events(sid, agent_id=B) == list(enumerate(events, 1))
    assert await target.export_jsonl(sid, agent_id=B) == text  # nothing lost or added on the way
    assert await target.get(sid, agent_id=A) is None  # the importer owns the copy, not the exporter

    with pytest.raises(InvalidInput, match="already in use"):
        await target.import_jsonl(text, agent_id=B)
    copy = await target.import_jsonl(text, agent_id=B, session_id="copy")
    assert copy.last_event_seq == 3
    assert await target.append_events("copy", [Notice(text="next")], agent_id=B) == 4


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        (
            '{"kind": "message", "message": {"role": "user", "content": "x"}}\n',
            "start with its session header",
        ),
        ("not json\n", "line 1"),
        (
            '{"kind":"session","session_id":"s","title":null,"created_at":1,"updated_at":1,"usage":{}}\n'
            '{"kind":"event","seq":2,"event":{"type":"agent_start"}}\n'
            '{"kind":"event","seq":2,"event":{"type":"agent_start"}}\n',
            "does not increase",
        ),
        (
            '{"kind":"session","session_id":"../x","title":null,"created_at":1,"updated_at":1,"usage":{}}\n',
            "session_id must be",
        ),
    ],
)
async def test_import_refuses_what_is_not_a_session(store: SessionStore, text: str, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        await store.import_jsonl(text, agent_id=A)
    assert await store.list(A) == []


async def test_closed_store_is_released(make_store: Any) -> None:
    store = make_store()
    await store.create(A)
    await store.close()
    await store.close()  # twice is fine
