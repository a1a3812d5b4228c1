"""How the PostgreSQL store reads a failure: by its SQLSTATE when psycopg gives one (the code decides, whatever
the words, so a server that answers in another language is read as well), by libpq's English words when it
gives none, as for every refusal at connection start-up on psycopg 3.3 and libpq 18."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg import errors

from steadyloop.errors import InvalidInput
from steadyloop.sessions._pg_reach import _CANNOT_RETRY
from steadyloop.sessions.postgres import PostgresSessionStore, read_failure

URL = "postgresql://app:s3cret@db.example:5432/app"


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("28P01", "échec de l'authentification par mot de passe pour l'utilisateur « app »"),
        ("28000", "le rôle « app » n'est pas autorisé à se connecter"),
        ("3D000", "la base de données « app » n'existe pas"),
        ("42501", "droit refusé pour la base de données app"),
        ("55000", "la base de données « app » n'accepte plus les connexions"),
    ],
)
def test_a_refusal_code_decides_whatever_the_words(code: str, words: str) -> None:
    failure = read_failure(errors.lookup(code)(words), URL)
    assert failure.refused and failure.sqlstate == code and failure.reason == words


@pytest.mark.parametrize("code", ["53300", "57P03", "57P01", "08006"])
def test_a_code_that_passes_decides_even_against_refusing_words(code: str) -> None:
    failure = read_failure(errors.lookup(code)('password authentication failed for user "app"'), URL)
    assert not failure.refused and failure.sqlstate == code


@pytest.mark.parametrize(
    "words",
    [
        'connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication failed for user "app"',
        'connection to server at "127.0.0.1", port 5432 failed: fe_sendauth: no password supplied',
        'connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "nobody" does not exist',
        'connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "nodb" does not exist',
        'connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "app" is not permitted to log in',
        'FATAL:  pg_hba.conf rejects connection for host "127.0.0.1", user "app", database "app", no encryption',
        'FATAL:  database "app" is not currently accepting connections',
        "server does not support SSL, but SSL was required",
    ],
)
def test_without_a_code_the_words_of_a_refusal_decide(words: str) -> None:
    failure = read_failure(psycopg.OperationalError(words), URL)
    assert failure.refused and failure.sqlstate is None


@pytest.mark.parametrize(
    "words",
    [
        'FATAL:  too many connections for role "app"',
        "FATAL:  the database system is starting up",
        'connection to server at "127.0.0.1", port 1 failed: Connection refused',
        "server closed the connection unexpectedly",
        "la connexion au serveur a échoué",  # words we do not know: the patient path
    ],
)
def test_without_a_code_other_words_pass(words: str) -> None:
    assert not read_failure(psycopg.OperationalError(words), URL).refused


def test_the_password_is_hidden_in_the_reason() -> None:
    failure = read_failure(
        errors.lookup("28P01")("no entry for postgresql://app:s3cret@db.example\n  s3cret"), URL
    )
    assert "s3cret" not in failure.reason and "\n" not in failure.reason


async def test_a_real_refusal_at_start_up_is_read_as_psycopg_gives_it(postgres_password_url: str) -> None:
    wrong = postgres_password_url.replace(str(urlsplit(postgres_password_url).password), "wrong")
    with pytest.raises(psycopg.OperationalError) as caught:
        await psycopg.AsyncConnection.connect(wrong)
    failure = read_failure(caught.value, wrong)
    # By its code if this psycopg and libpq give one (they did not when this was written), else by its words.
    assert failure.refused and failure.sqlstate == caught.value.sqlstate
    assert "password authentication failed" in failure.reason


async def test_a_real_cut_connection_is_read_by_its_code(postgres_url: str, postgres_server: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        with psycopg.connect(postgres_server, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError) as caught:
            await conn.execute("SELECT 1")
    failure = read_failure(caught.value, postgres_url)
    assert failure.sqlstate == "57P01" and not failure.refused  # admin_shutdown: a new connection may work


async def test_a_role_the_store_schema_refuses_is_invalid_input_by_the_code(
    new_postgres_database: Callable[[], str], postgres_server: str
) -> None:
    # The schema is there, another role's, and this role may not use it: 42501, in words no list knows.
    url = new_postgres_database()
    database = urlsplit(url).path.lstrip("/")
    role = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")  # type: ignore[arg-type]
        admin.execute(f"GRANT CREATE ON DATABASE {database} TO {role}")  # type: ignore[arg-type]
    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute("CREATE SCHEMA steadyloop")
    async with PostgresSessionStore(url.replace("postgres@", f"{role}@"), connect_timeout=30) as store:
        with pytest.raises(InvalidInput) as caught:
            await store.list("agent-a")
    message = str(caught.value)
    assert "permission denied for schema steadyloop" in message and "trying again will not help" in message
    assert _CANNOT_RETRY.search(message) is None  # the code decided, not the words


@given(
    st.text(max_size=2000),
    st.sampled_from([None, "28P01", "28000", "3D000", "42501", "53300", "57P03", "57P01", "XX000"]),
)
def test_any_words_and_any_code_are_read_without_error(words: str, code: str | None) -> None:
    exc = psycopg.OperationalError(words) if code is None else errors.lookup(code)(words)
    failure = read_failure(exc, URL)
    assert failure.sqlstate == code and "s3cret" not in failure.reason
    assert failure.refused == (
        code in {"28P01", "28000", "3D000", "42501"} if code else bool(_CANNOT_RETRY.search(failure.reason))
    )
    assert not any(c in failure.reason for c in "\n\r\t")
