"""A write of a run's events whose commit went through but whose reply was lost (the database connection
dropped in between) is not made twice when the server tries it again, and one that did not go through is
still made: the record holds each event once, in order."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from steadyloop.events import Event, Notice
from steadyloop.server.recording import RecordingStore
from steadyloop.sessions import SQLiteSessionStore, StoreUnavailable

AGENT = "a"


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
