"""A PostgreSQL server that refuses the store for good (a wrong password, a missing role or database) is an
``InvalidInput`` at once with libpq's reason, where the pool used to wait out its whole connect timeout and
then lose the reason; a server that only refuses for now is still waited for."""

from __future__ import annotations

import asyncio
import logging
import socket
from urllib.parse import urlsplit

import psycopg
import pytest

from steadyloop.errors import InvalidInput
from steadyloop.sessions import StoreUnavailable
from steadyloop.sessions.postgres import PostgresSessionStore

A = "agent-a"


def _with(url: str, **parts: str) -> str:
    """``url`` with its user, password or database swapped."""
    split = urlsplit(url)
    user = parts.get("user", split.username or "")
    password = parts.get("password", split.password or "")
    database = parts.get("database", split.path.lstrip("/"))
    return f"postgresql://{user}:{password}@{split.hostname}:{split.port}/{database}"


async def _refusal(url: str) -> InvalidInput:
    # The default connect timeout: waiting it out would end in StoreUnavailable, not InvalidInput.
    store = PostgresSessionStore(url)
    try:
        with pytest.raises(InvalidInput) as caught:
            await store.list(A)
        with pytest.raises(InvalidInput):  # and again: nothing half-open was kept
            await store.list(A)
    finally:
        await store.close()
    return caught.value


async def test_a_wrong_password_is_invalid_input_at_once_with_libpqs_reason(
    postgres_password_url: str,
) -> None:
    refused = await _refusal(_with(postgres_password_url, password="not-the-password"))
    assert "password authentication failed" in str(refused)
    assert "not-the-password" not in str(refused)
    assert "trying again will not help" in str(refused)


async def test_a_wrong_password_in_a_conninfo_is_hidden_too(postgres_password_url: str) -> None:
    split = urlsplit(postgres_password_url)
    conninfo = (
        f"host={split.hostname} port={split.port} user={split.username} "
        f"password=not-the-password dbname={split.path.lstrip('/')}"
    )
    refused = await _refusal(conninfo)
    assert "password authentication failed" in str(refused)
    assert "not-the-password" not in str(refused) and "password=***" in str(refused)


async def test_no_password_where_one_is_asked_for_is_invalid_input(postgres_password_url: str) -> None:
    split = urlsplit(postgres_password_url)
    refused = await _refusal(f"postgresql://{split.username}@{split.hostname}:{split.port}/{split.username}")
    assert "no password supplied" in str(refused)


async def test_a_missing_database_is_invalid_input_at_once_naming_it(postgres_password_url: str) -> None:
    refused = await _refusal(_with(postgres_password_url, database="no_such_database"))
    assert 'database "no_such_database" does not exist' in str(refused)


async def test_a_missing_role_is_invalid_input_at_once_naming_it(postgres_password_url: str) -> None:
    refused = await _refusal(_with(postgres_password_url, user="no_such_role"))
    assert 'role "no_such_role" does not exist' in str(refused)


async def test_the_right_password_still_works(postgres_password_url: str) -> None:
    async with PostgresSessionStore(postgres_password_url) as store:
        info = await store.create(A)
        assert [s.session_id for s in await store.list(A)] == [info.session_id]


class _Retried(logging.Handler):
    """Sets ``tried`` when the store says it will try to connect again."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.tried = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "trying again" in record.getMessage():
            self.tried.set()


async def test_a_refusal_that_passes_is_waited_for(postgres_password_url: str, postgres_server: str) -> None:
    # "too many connections for role" (53300) passes when another connection closes: the store tries
    # again, and gets in once the role's only slot is free.
    role = urlsplit(postgres_password_url).username
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f"ALTER ROLE {role} CONNECTION LIMIT 1")  # type: ignore[arg-type]
    retried = _Retried()
    logger = logging.getLogger("steadyloop.sessions.postgres")
    logger.addHandler(retried)
    level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        holder = await psycopg.AsyncConnection.connect(postgres_password_url)
        async with PostgresSessionStore(postgres_password_url, connect_timeout=60) as store:
            listing = asyncio.ensure_future(store.list(A))
            try:
                await asyncio.wait_for(retried.tried.wait(), 60)
                assert not listing.done()
                await holder.close()
                assert await asyncio.wait_for(listing, 60) == []
            finally:
                listing.cancel()
                await holder.close()
    finally:
        logger.removeHandler(retried)
        logger.setLevel(level)


async def test_a_server_that_never_comes_is_store_unavailable_with_the_last_reason(
    postgres_password_url: str,
) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, never listening: every connect is refused
        free = bound.getsockname()[1]
        url = postgres_password_url.replace(f":{urlsplit(postgres_password_url).port}/", f":{free}/")
        store = PostgresSessionStore(url, connect_timeout=0.5)
        try:
            with pytest.raises(StoreUnavailable, match=f"port {free} failed") as caught:
                await store.list(A)
        finally:
            await store.close()
    assert str(urlsplit(postgres_password_url).password) not in str(caught.value)
