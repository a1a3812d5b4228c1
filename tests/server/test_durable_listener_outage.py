"""A node's order listener, cut off and then refused (its role's password changed), tries again with
growing pauses and logs once per change of state (lost, refused with libpq's reason, back), where it used
to log each attempt, a second apart, for as long as the database refused; once the password is right
again it listens again."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from steadyloop import Endpoint
from steadyloop.server import ServerSettings
from steadyloop.server.orders import LISTEN_MAX_PAUSE_S, Orders, listener_name
from steadyloop.server.runtime import Runtime
from steadyloop.sessions.postgres import PostgresSessionStore

from .._log_lines import LogLines, captured

_PAUSE = re.compile(r"the order listener tries again in ([0-9.]+) s")


class Lines(LogLines):
    def __init__(self) -> None:
        super().__init__(_PAUSE)

    def listener(self, level: int) -> list[str]:
        return [m for m in self.said(level) if "the order listener" in m]


@pytest.fixture
def lines() -> Iterator[Lines]:
    with captured("steadyloop.server.orders", Lines()) as handler:
        yield handler


@pytest.fixture
async def admin(postgres_server: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        yield conn


async def _listener_pid(admin: psycopg.AsyncConnection[tuple[object, ...]], node: str) -> int | None:
    cursor = await admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (listener_name(node),)
    )
    row = await cursor.fetchone()
    return None if row is None else int(str(row[0]))


async def test_a_refused_order_listener_backs_off_and_logs_once_per_change(
    postgres_password_url: str,
    admin: psycopg.AsyncConnection[tuple[object, ...]],
    lines: Lines,
    tmp_path: Path,
) -> None:
    split = urlsplit(postgres_password_url)
    role, password = split.username, split.password
    assert role and password
    runtime = Runtime(
        ServerSettings(
            endpoint=Endpoint("http://127.0.0.1:9/v1"), model="m", store_path=tmp_path / "s.db", node="node-x"
        )
    )
    orders = Orders(runtime, postgres_password_url)
    async with PostgresSessionStore(postgres_password_url) as store:
        await store.list("someone")  # its first call makes its tables, the orders' among them
    listening = asyncio.create_task(orders.listen())
    try:
        await lines.until(
            lambda: any("the order listener is listening" in r.getMessage() for r in lines.records)
        )
        pid = await _listener_pid(admin, "node-x")
        assert pid is not None
        await admin.execute(f"ALTER ROLE {role} PASSWORD 'another-one'")  # type: ignore[arg-type]
        await admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
        await lines.until(lambda: len(lines.pauses()) >= 6)
        warned = lines.listener(logging.WARNING)
        assert len(warned) == 2, warned  # six attempts and more, two lines
        assert warned[0].startswith("node node-x: the order listener lost its connection: ")
        assert "refuses the connection" in warned[1] and "password authentication failed" in warned[1]
        pauses = lines.pauses()
        # Drawn between half and all of a step that doubles from 0.1 s: the sixth is above the first's step
        # whatever the draws, and none is above the bound.
        assert pauses[5] > 0.1 >= pauses[0] and max(pauses) <= LISTEN_MAX_PAUSE_S
        assert not any(password in r.getMessage() for r in lines.records)

        await admin.execute(f"ALTER ROLE {role} PASSWORD '{password}'")  # type: ignore[arg-type]
        await lines.until(lambda: bool(lines.listener(logging.INFO)))
        (back,) = lines.listener(logging.INFO)
        assert re.fullmatch(
            r"node node-x: the order listener is connected again after [0-9.]+ s and \d+ .*", back
        )
        await lines.until(
            lambda: sum("the order listener is listening" in r.getMessage() for r in lines.records) == 2
        )
        assert await _listener_pid(admin, "node-x") not in (None, pid)
        assert len(lines.listener(logging.WARNING)) == 2
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await runtime.close()
