"""A write of a run's events whose commit went through but whose reply was lost (the database connection
dropped in between) is not made twice when the server tries it again, and one that did not go through is
still made: the record holds each event once, in order. The same holds for messages, entries and usage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from steadyloop import AssistantMessage, Message, Usage, UserMessage
from steadyloop.context import BranchFiles
from steadyloop.events import Event, Notice
from steadyloop.server.recording import RecordingStore
from steadyloop.sessions import SessionUsage, SQLiteSessionStore, StoreUnavailable

AGENT = "a"
T = TypeVar("T")


class Flaky(SQLiteSessionStore):
    """A real store whose next append fails once: after its commit (``lost_reply``) or before it."""

    fail: str | None = None

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        fail, self.fail = self.fail, None
        if fail == "before_commit":
            raise StoreUnavailable("the session database is unavailable: connection refused")
        last = await super().append_events(session_id, events, agent_id=agent_id)
        if fail == "lost_reply":
            raise StoreUnavailable("the session database is unavailable: server closed the connection")
        return last


async def _record_with_one_failure(tmp_path: Path, fail: str) -> tuple[list[tuple[int, Event]], list[int]]:
    heard: list[int] = []
    async with Flaky(tmp_path / "s.db") as inner:
        store = RecordingStore(inner, lambda _sid, seq, _e: heard.append(seq))
        tries: list[str] = []

        async def outage(session_id: str) -> bool:
            tries.append(session_id)
            return len(tries) <= 3

        store.outage = outage
        sid = (await store.create(AGENT)).session_id
        await store.append_events(sid, [Notice(text="one")], agent_id=AGENT)
        inner.fail = fail
        await store.append_events(sid, [Notice(text="two"), Notice(text="three")], agent_id=AGENT)
        await store.append_events(sid, [Notice(text="four")], agent_id=AGENT)
        assert len(tries) == 1  # one failure, tried again once
        return await inner.load_events(sid, agent_id=AGENT), heard


@pytest.mark.parametrize(
    "fail",
    [
        pytest.param("lost_reply", id="a write whose reply was lost is not made again"),
        pytest.param("before_commit", id="a write that did not go through is made when tried again"),
    ],
)
async def test_each_event_is_recorded_once_in_order_after_a_failed_append(tmp_path: Path, fail: str) -> None:
    record, heard = await _record_with_one_failure(tmp_path, fail)
    assert [(seq, e.text) for seq, e in record if isinstance(e, Notice)] == [
        (1, "one"),
        (2, "two"),
        (3, "three"),
        (4, "four"),
    ]
    assert heard == [1, 2, 3, 4]


# -- messages, entries and usage: writes that say nothing back to compare --------------------------------


class FlakyWrites(SQLiteSessionStore):
    """A real store whose next message, entry or usage write fails once: after its commit or before it."""

    fail: str | None = None

    async def _once(self, write: Callable[[], Awaitable[T]]) -> T:
        fail, self.fail = self.fail, None
        if fail == "before_commit":
            raise StoreUnavailable("the session database is unavailable: connection refused")
        done = await write()
        if fail == "lost_reply":
            raise StoreUnavailable("the session database is unavailable: server closed the connection")
        return done

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        await self._once(
            lambda: super(FlakyWrites, self).append_messages(session_id, messages, agent_id=agent_id)
        )

    async def record_usage(
        self, session_id: str, usage: Usage, *, agent_id: str, turns: int = 0
    ) -> SessionUsage:
        return await self._once(
            lambda: super(FlakyWrites, self).record_usage(session_id, usage, agent_id=agent_id, turns=turns)
        )

    async def append_entry(
        self,
        session_id: str,
        message: Message,
        *,
        agent_id: str,
        parent: str | None,
        files: BranchFiles | None = None,
    ) -> str:
        return await self._once(
            lambda: super(FlakyWrites, self).append_entry(
                session_id, message, agent_id=agent_id, parent=parent, files=files
            )
        )


def _retrying(store: RecordingStore) -> list[str]:
    tries: list[str] = []

    async def outage(session_id: str) -> bool:
        tries.append(session_id)
        return len(tries) <= 3

    store.outage = outage
    return tries


@pytest.mark.parametrize("fail", ["lost_reply", "before_commit"])
async def test_messages_entries_and_usage_are_written_once_after_a_failed_write(
    tmp_path: Path, fail: str
) -> None:
    async with FlakyWrites(tmp_path / "s.db") as inner:
        store = RecordingStore(inner, lambda _sid, _seq, _e: None)
        tries = _retrying(store)
        sid = (await store.create(AGENT)).session_id
        await store.append_messages(sid, [UserMessage(content="one")], agent_id=AGENT)
        inner.fail = fail
        await store.append_messages(
            sid, [UserMessage(content="two"), AssistantMessage(content="three")], agent_id=AGENT
        )
        assert [m.content for m in await inner.load_messages(sid, agent_id=AGENT)] == ["one", "two", "three"]

        inner.fail = fail
        total = await store.record_usage(
            sid, Usage(prompt_tokens=10, completion_tokens=2), agent_id=AGENT, turns=1
        )
        assert (total.prompt_tokens, total.runs, total.turns) == (10, 1, 1)
        await store.record_usage(sid, Usage(prompt_tokens=5), agent_id=AGENT)
        info = await inner.get(sid, agent_id=AGENT)
        assert info is not None and (info.usage.prompt_tokens, info.usage.runs) == (15, 2)

        inner.fail = fail
        leaf = info.leaf
        made = await store.append_entry(sid, UserMessage(content="four"), agent_id=AGENT, parent=leaf)
        entries = await inner.load_entries(sid, agent_id=AGENT)
        assert [e.message.content for e in entries] == ["one", "two", "three", "four"]
        assert made == entries[-1].id
        assert len(tries) == 3  # one failure each, tried again once


async def test_without_retries_a_failed_write_goes_to_the_writer_and_nothing_more_is_read(
    tmp_path: Path,
) -> None:
    async with FlakyWrites(tmp_path / "s.db") as inner:
        store = RecordingStore(inner, lambda _sid, _seq, _e: None)
        sid = (await store.create(AGENT)).session_id
        inner.fail = "before_commit"
        with pytest.raises(StoreUnavailable):
            await store.append_messages(sid, [UserMessage(content="one")], agent_id=AGENT)
        assert await inner.load_messages(sid, agent_id=AGENT) == []
