"""The PostgreSQL store's listener, cut off and then refused (its role's password changed), tries again
with growing pauses and says so once per change of state (lost, refused with libpq's reason, back), not
once per attempt; once the password is right again it listens again and tells its subscribers to read
again."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import psycopg
import pytest

from steadyloop.events import AgentStart
from steadyloop.sessions.postgres import LISTEN_MAX_PAUSE_S, PostgresSessionStore

from .._log_lines import LogLines, captured

A = "agent-a"
_PAUSE = re.compile(r"tries again in ([0-9.]+) s")


class Lines(LogLines):
    def __init__(self) -> None:
        super().__init__(_PAUSE)


@pytest.fixture
def lines() -> Iterator[Lines]:
    with captured("steadyloop.sessions.postgres", Lines()) as handler:
        yield handler


@pytest.fixture
async def admin(postgres_server: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        yield conn


async def test_a_refused_listener_backs_off_and_says_so_once_per_change(
    postgres_password_url: str, admin: psycopg.AsyncConnection[tuple[object, ...]], lines: Lines
) -> None:
    split = urlsplit(postgres_password_url)
    role, password = split.username, split.password
    assert role and password
    heard: list[tuple[str | None, int]] = []
    news = asyncio.Event()

    def on_appended(session_id: str | None, seq: int) -> None:
        heard.append((session_id, seq))
        news.set()

    async with PostgresSessionStore(postgres_password_url) as store:
        await store.subscribe(on_appended)
        await admin.execute(f"ALTER ROLE {role} PASSWORD 'another-one'")  # type: ignore[arg-type]
        await admin.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = %s", (role,)
        )
        await lines.until(lambda: len(lines.pauses()) >= 6)
        warned = lines.said(logging.WARNING)
        assert len(warned) == 2, warned  # six attempts and more, two lines
        assert warned[0].startswith("the session store's listener lost its connection: ")
        assert "refuses the connection" in warned[1] and "password authentication failed" in warned[1]
        pauses = lines.pauses()
        # Drawn between half and all of a step that doubles from 0.05 s: the sixth is above the first's
        # step whatever the draws, and none is above the bound.
        assert pauses[5] > 0.05 >= pauses[0] and max(pauses) <= LISTEN_MAX_PAUSE_S
        assert not any(password in r.getMessage() for r in lines.records)

        await admin.execute(f"ALTER ROLE {role} PASSWORD '{password}'")  # type: ignore[arg-type]
        await lines.until(lambda: bool(lines.said(logging.INFO)))
        (back,) = lines.said(logging.INFO)
        assert re.search(
            r"the session store's listener is connected again after [0-9.]+ s and \d+ failed", back
        )
        async with asyncio.timeout(60):
            while (None, 0) not in heard:  # told to read again: appends meanwhile went unheard
                news.clear()
                await news.wait()
        info = await store.create(A)
        async with PostgresSessionStore(postgres_password_url) as other:
            seq = await other.append_events(info.session_id, [AgentStart()], agent_id=A)
        async with asyncio.timeout(60):
            while (info.session_id, seq) not in heard:  # and listening again
                news.clear()
                await news.wait()
        assert len(lines.said(logging.WARNING)) == 2
