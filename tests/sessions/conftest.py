"""Fixtures for the session tests: every protocol test runs against every store (in memory, SQLite and a
real PostgreSQL), on a clock we move."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from steadyloop.sessions import InMemorySessionStore, SessionConfig, SessionStore, SQLiteSessionStore
from steadyloop.sessions.postgres import PostgresSessionStore


class Clock:
    """Seconds since the epoch that move only when a test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


StoreFactory = Callable[..., SessionStore]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock
) -> AsyncIterator[StoreFactory]:
    """A factory for a store of the parametrized kind: ``make_store(config=...)``; all are closed after."""
    made: list[SessionStore] = []

    def make(config: SessionConfig | None = None) -> SessionStore:
        store: SessionStore
        if request.param == "memory":
            store = InMemorySessionStore(config, clock=clock)
        elif request.param == "postgres":
            # Each store a database of its own, as each SQLite store gets a file of its own.
            store = PostgresSessionStore(
                request.getfixturevalue("new_postgres_database")(), config=config, clock=clock
            )
        else:
            store = SQLiteSessionStore(tmp_path / f"s{len(made)}" / "sessions.db", config=config, clock=clock)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> SessionStore:
    return make_store()
