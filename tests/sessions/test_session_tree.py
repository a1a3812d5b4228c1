"""A session is a tree: entries with parents, a leaf to continue from, the path read back, every branch kept
and exported; a file written before trees existed reads as one straight line."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steadyloop.context.branches import BranchFiles, Entry
from steadyloop.errors import InvalidInput
from steadyloop.messages import AssistantMessage, Message, UserMessage, message_to_json
from steadyloop.sessions import InMemorySessionStore, SessionConfig, SessionStore, SQLiteSessionStore
from steadyloop.sessions._schema import MIGRATIONS

from .conftest import StoreFactory

A = "agent-1"


def u(text: str) -> UserMessage:
    return UserMessage(content=text)


def a(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


def shape(entries: list[Entry]) -> list[tuple[str, str | None, str]]:
    return [(e.id, e.parent_id, str(e.message.content)) for e in entries]


async def test_appends_chain_under_the_leaf_and_a_move_starts_a_branch(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    await store.append_messages(sid, [u("q1"), a("a1"), u("q2"), a("a2")], agent_id=A)
    info = await store.get(sid, agent_id=A)
    assert info is not None and info.leaf == "4" and info.message_count == 4
    await store.set_leaf(sid, "2", agent_id=A)
    assert [m.content for m in await store.load_messages(sid, agent_id=A)] == ["q1", "a1"]
    await store.append_messages(sid, [u("q2 again"), a("a2 again")], agent_id=A)
    assert [m.content for m in await store.load_messages(sid, agent_id=A)] == [
        "q1",
        "a1",
        "q2 again",
        "a2 again",
    ]
    assert [m.content for m in await store.load_messages(sid, agent_id=A, limit=2)] == [
        "q2 again",
        "a2 again",
    ]
    assert shape(await store.load_entries(sid, agent_id=A)) == [
        ("1", None, "q1"),
        ("2", "1", "a1"),
        ("3", "2", "q2"),
        ("4", "3", "a2"),
        ("5", "2", "q2 again"),
        ("6", "5", "a2 again"),
    ]
    info = await store.get(sid, agent_id=A)
    assert info is not None and info.leaf == "6" and info.message_count == 6


async def test_an_entry_with_files_under_any_parent_becomes_the_leaf(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    await store.append_messages(sid, [u("q1"), a("a1"), u("q2")], agent_id=A)
    files = BranchFiles(read_files=("a.py",), modified_files=("b.py",))
    new = await store.append_entry(sid, u("summary"), agent_id=A, parent="1", files=files)
    assert new == "4"
    entries = await store.load_entries(sid, agent_id=A)
    assert entries[-1] == Entry("4", "1", u("summary"), files)
    assert [m.content for m in await store.load_messages(sid, agent_id=A)] == ["q1", "summary"]
    root = await store.append_entry(sid, u("another root"), agent_id=A, parent=None)
    assert [m.content for m in await store.load_messages(sid, agent_id=A)] == ["another root"]
    assert (await store.load_entries(sid, agent_id=A))[-1].parent_id is None and root == "5"


async def test_moving_to_the_start_reads_an_empty_path(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    await store.append_messages(sid, [u("q1"), a("a1")], agent_id=A)
    await store.set_leaf(sid, None, agent_id=A)
    assert await store.load_messages(sid, agent_id=A) == []
    info = await store.get(sid, agent_id=A)
    assert info is not None and info.leaf is None
    await store.append_messages(sid, [u("fresh")], agent_id=A)
    assert shape(await store.load_entries(sid, agent_id=A))[-1] == ("3", None, "fresh")


async def test_unknown_entries_are_refused(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    await store.append_messages(sid, [u("q1")], agent_id=A)
    for bad in ("9", "0", "x", "-1", ""):
        with pytest.raises(InvalidInput):
            await store.set_leaf(sid, bad, agent_id=A)
        with pytest.raises(InvalidInput):
            await store.append_entry(sid, u("s"), agent_id=A, parent=bad)
    assert [m.content for m in await store.load_messages(sid, agent_id=A)] == ["q1"]


async def test_the_history_cap_keeps_the_newest_entries_and_the_path_stops_where_they_stop(
    make_store: StoreFactory,
) -> None:
    store = make_store(SessionConfig(max_history_entries=3))
    sid = (await store.create(A)).session_id
    await store.append_messages(sid, [u("q1"), a("a1"), u("q2"), a("a2")], agent_id=A)
    assert [e.id for e in await store.load_entries(sid, agent_id=A)] == ["2", "3", "4"]
    assert [m.content for m in await store.load_messages(sid, agent_id=A)] == ["a1", "q2", "a2"]


async def test_export_and_import_keep_every_branch_and_the_leaf(make_store: StoreFactory) -> None:
    first, second = make_store(), make_store()
    sid = (await first.create(A)).session_id
    await first.append_messages(sid, [u("q1"), a("a1"), u("q2"), a("a2")], agent_id=A)
    files = BranchFiles(read_files=("r.txt",))
    await first.append_entry(sid, u("summary"), agent_id=A, parent="2", files=files)
    text = await first.export_jsonl(sid, agent_id=A)
    copy = await second.import_jsonl(text, agent_id=A)
    assert copy.leaf == "5"
    assert shape(await second.load_entries(sid, agent_id=A)) == shape(
        await first.load_entries(sid, agent_id=A)
    )
    assert (await second.load_entries(sid, agent_id=A))[-1].files == files
    assert await second.load_messages(sid, agent_id=A) == await first.load_messages(sid, agent_id=A)


async def test_a_format_2_export_reads_as_one_line(store: SessionStore) -> None:
    header = {
        "kind": "session",
        "session_id": "old",
        "title": None,
        "created_at": 1.0,
        "updated_at": 2.0,
        "usage": {},
        "format": 2,
    }
    lines = [json.dumps(header)]
    for message in (u("q1"), a("a1"), u("q2")):
        lines.append(json.dumps({"kind": "message", "message": json.loads(message_to_json(message))}))
    info = await store.import_jsonl("\n".join(lines) + "\n", agent_id=A)
    assert info.leaf == "3"
    assert shape(await store.load_entries(info.session_id, agent_id=A)) == [
        ("1", None, "q1"),
        ("2", "1", "a1"),
        ("3", "2", "q2"),
    ]


async def test_an_export_with_entries_out_of_order_is_refused(store: SessionStore) -> None:
    header = {"kind": "session", "session_id": "bad", "title": None, "created_at": 1.0, "updated_at": 2.0}
    body = json.loads(message_to_json(u("q")))
    lines = [
        json.dumps({**header, "usage": {}, "format": 3}),
        json.dumps({"kind": "message", "message": body, "id": "2"}),
        json.dumps({"kind": "message", "message": body, "id": "1"}),
    ]
    with pytest.raises(InvalidInput, match="out of order"):
        await store.import_jsonl("\n".join(lines), agent_id=A)
    lines[2] = json.dumps({"kind": "message", "message": body, "id": "3", "parent": "3"})
    with pytest.raises(InvalidInput, match="out of order"):
        await store.import_jsonl("\n".join(lines), agent_id=A)


def _version_2_file(path: Path, messages: list[Message]) -> None:
    conn = sqlite3.connect(path)
    for script in MIGRATIONS[:2]:
        conn.executescript(script)
    conn.execute("PRAGMA user_version = 2")
    conn.execute(
        "INSERT INTO sessions (id, agent_id, title, created_at, updated_at) VALUES ('old', ?, NULL, 1e12, 1e12)",
        (A,),
    )
    conn.executemany(
        "INSERT INTO messages (session_id, pos, body) VALUES ('old', ?, ?)",
        [(pos, message_to_json(m)) for pos, m in enumerate(messages, 1)],
    )
    conn.commit()
    conn.close()


async def test_a_session_written_before_trees_reads_as_a_single_branch(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    _version_2_file(path, [u("q1"), a("a1"), u("q2"), a("a2")])
    async with SQLiteSessionStore(path) as store:
        info = await store.get("old", agent_id=A)
        assert info is not None and info.leaf == "4"
        assert shape(await store.load_entries("old", agent_id=A)) == [
            ("1", None, "q1"),
            ("2", "1", "a1"),
            ("3", "2", "q2"),
            ("4", "3", "a2"),
        ]
        assert [m.content for m in await store.load_messages("old", agent_id=A)] == ["q1", "a1", "q2", "a2"]
        await store.append_messages("old", [u("q3")], agent_id=A)
        assert (await store.load_entries("old", agent_id=A))[-1].parent_id == "4"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 3
    conn.close()


# Operations on a tree: ("append", n messages), ("move", to which existing entry or None), ("summary", under
# which existing entry). Both stores must agree with a plain model of the tree, and the path read back must be
# the walk from the leaf to the root.
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(min_value=1, max_value=3)),
        st.tuples(st.just("move"), st.integers(min_value=-1, max_value=30)),
        st.tuples(st.just("summary"), st.integers(min_value=-1, max_value=30)),
    ),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_any_sequence_of_moves_reads_back_as_the_walk_from_the_leaf(
    operations: list[tuple[str, int]], tmp_path: Path
) -> None:
    async def play(store: SessionStore) -> tuple[list[tuple[str, str | None, str]], list[str], str | None]:
        sid = (await store.create(A)).session_id
        parents: dict[str, str | None] = {}
        leaf: str | None = None
        counter = 0
        for kind, value in operations:
            ids = sorted(parents, key=int)
            pick = None if value < 0 or not ids else ids[value % len(ids)]
            if kind == "append":
                batch = []
                for _ in range(value):
                    counter += 1
                    batch.append(u(f"m{counter}"))
                    parents[str(counter)], leaf = leaf, str(counter)
                await store.append_messages(sid, batch, agent_id=A)
            elif kind == "move":
                await store.set_leaf(sid, pick, agent_id=A)
                leaf = pick
            else:
                counter += 1
                got = await store.append_entry(sid, u(f"m{counter}"), agent_id=A, parent=pick)
                assert got == str(counter)
                parents[got], leaf = pick, got
        walk: list[str] = []
        at = leaf
        while at is not None:
            walk.append(f"m{at}")
            at = parents[at]
        assert [m.content for m in await store.load_messages(sid, agent_id=A)] == walk[::-1]
        info = await store.get(sid, agent_id=A)
        assert info is not None and info.leaf == leaf
        return shape(await store.load_entries(sid, agent_id=A)), walk, leaf

    async def both() -> None:
        memory = await play(InMemorySessionStore())
        path = tmp_path / f"{uuid.uuid4().hex}.db"
        async with SQLiteSessionStore(path) as sqlite_store:
            assert await play(sqlite_store) == memory

    asyncio.run(both())


IDS = st.one_of(st.none(), st.text(max_size=6), st.integers(min_value=-3, max_value=40).map(str))


@given(lines=st.lists(st.tuples(IDS, IDS, st.booleans()), max_size=8), leaf=IDS)
def test_any_ids_and_parents_in_an_export_read_back_or_are_refused_typed(
    lines: list[tuple[str | None, str | None, bool]], leaf: str | None
) -> None:
    from steadyloop.sessions._jsonl import load_snapshot

    header = {"kind": "session", "session_id": "s", "title": None, "created_at": 1.0, "updated_at": 1.0}
    text = [json.dumps({**header, "usage": {}, "format": 3, "leaf": leaf})]
    body = json.loads(message_to_json(u("q")))
    for entry_id, parent, with_files in lines:
        line: dict[str, object] = {"kind": "message", "message": body, "id": entry_id, "parent": parent}
        if with_files:
            line["files"] = {"read_files": ["a"], "modified_files": []}
        text.append(json.dumps(line))
    try:
        snapshot = load_snapshot("\n".join(text))
    except InvalidInput:
        return
    positions = [int(e.id) for e in snapshot.entries]
    assert positions == sorted(set(positions)) and all(p > 0 for p in positions)
    for entry in snapshot.entries:
        assert entry.parent_id is None or 0 < int(entry.parent_id) < int(entry.id)
    assert snapshot.info.leaf is None or snapshot.info.leaf in {e.id for e in snapshot.entries}


@pytest.mark.parametrize("text", ["²", "¹²", "٣", "１", "", "0", "-1", "1.0", "9" * 19])
def test_an_entry_id_is_ascii_digits_naming_a_position_or_refused_typed(text: str) -> None:
    # str.isdigit() accepts superscripts that int() rejects; an id from an export must fail typed.
    from steadyloop.sessions.store import entry_position

    with pytest.raises(InvalidInput):
        entry_position(text)


def test_an_entry_id_names_its_position() -> None:
    from steadyloop.sessions.store import entry_position

    assert entry_position("7") == 7
    assert entry_position(12) == 12
