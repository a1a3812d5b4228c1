"""A refusal that begins while the PostgreSQL store is open (the role's password changed, its LOGIN taken
away, the database dropped) reaches the next caller as the ``InvalidInput`` the first connection gives for
the same cause, with libpq's reason, as soon as the pool meets it: the caller used to wait out the whole
connect timeout and then get "couldn't get a connection", the reason lost. Each test keeps the default
30 s timeout, so the old behaviour fails it (a ``StoreUnavailable``, after 30 s), it does not pass slowly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import psycopg
import pytest

from steadyloop.errors import InvalidInput
from steadyloop.sessions import StoreUnavailable
from steadyloop.sessions.postgres import PostgresSessionStore

A = "agent-a"


@pytest.fixture
async def admin(postgres_server: str) -> AsyncIterator[psycopg.AsyncConnection[tuple[object, ...]]]:
    async with await psycopg.AsyncConnection.connect(postgres_server, autocommit=True) as conn:
        yield conn


async def _cut(admin: psycopg.AsyncConnection[tuple[object, ...]], role: str) -> None:
    """End every backend of ``role``, waiting until each has exited (the pool's next check finds it gone)."""
    cursor = await admin.execute(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE usename = %s", (role,)
    )
    assert all(row[0] for row in await cursor.fetchall())


async def test_a_password_changed_while_open_is_invalid_input_with_libpqs_reason(
    postgres_password_url: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    split = urlsplit(postgres_password_url)
    role, old = split.username, split.password
    assert role and old
    async with PostgresSessionStore(postgres_password_url) as store:
        info = await store.create(A)
        await admin.execute(f"ALTER ROLE {role} PASSWORD 'the-new-one'")  # type: ignore[arg-type]
        # The connections the store holds still work: only new ones are refused.
        assert [s.session_id for s in await store.list(A)] == [info.session_id]
        await _cut(admin, role)
        with pytest.raises(InvalidInput) as caught:
            await store.list(A)
        message = str(caught.value)
        assert "password authentication failed" in message and "trying again will not help" in message
        assert old not in message and "the-new-one" not in message
        # While the server still refuses, each call is refused again, with the reason.
        with pytest.raises(InvalidInput, match="password authentication failed"):
            await store.list(A)
        # And once the password is what the URL says again, the same store works again.
        await admin.execute(f"ALTER ROLE {role} PASSWORD '{old}'")  # type: ignore[arg-type]
        assert [s.session_id for s in await store.list(A)] == [info.session_id]
        assert [s.session_id for s in await store.list(A)] == [info.session_id]


async def test_a_role_that_loses_login_while_open_is_invalid_input(
    postgres_password_url: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    role = urlsplit(postgres_password_url).username
    assert role
    async with PostgresSessionStore(postgres_password_url) as store:
        await store.create(A)
        await admin.execute(f"ALTER ROLE {role} NOLOGIN")  # type: ignore[arg-type]
        await _cut(admin, role)
        with pytest.raises(InvalidInput, match=f'role "{role}" is not permitted to log in'):
            await store.append_messages("s-none", [], agent_id=A)


async def test_a_database_dropped_while_open_is_invalid_input_naming_it(
    postgres_url: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    name = urlsplit(postgres_url).path.lstrip("/")
    async with PostgresSessionStore(postgres_url) as store:
        await store.create(A)
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match=f'database "{name}" does not exist'):
            await store.list(A)


async def test_a_refusal_that_passes_is_still_waited_for_and_named_at_the_end(
    postgres_password_url: str, admin: psycopg.AsyncConnection[tuple[object, ...]]
) -> None:
    # "too many connections for role" (53300) passes when another connection closes: no InvalidInput,
    # the wait of the connect timeout, and then the reason rather than "couldn't get a connection".
    role = urlsplit(postgres_password_url).username
    assert role
    async with PostgresSessionStore(postgres_password_url, connect_timeout=1.0) as store:
        await store.create(A)
        await admin.execute(f"ALTER ROLE {role} CONNECTION LIMIT 0")  # type: ignore[arg-type]
        await _cut(admin, role)
        with pytest.raises(StoreUnavailable, match=f'too many connections for role "{role}"'):
            await store.list(A)
