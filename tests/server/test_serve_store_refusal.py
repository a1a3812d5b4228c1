"""``steadyloop serve`` on a PostgreSQL store that refuses it ends at once in one error line, where it used
to wait out the pool's connect timeout and end in uvicorn's traceback of a failed start; a role that may
not create the store's schema is told what to grant."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from urllib.parse import urlsplit

import psycopg

from .conftest import free_port


async def test_serve_on_a_store_with_a_wrong_password_prints_one_line_and_fails(
    postgres_password_url: str,
) -> None:
    password = str(urlsplit(postgres_password_url).password)
    wrong = postgres_password_url.replace(password, "not-the-password")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "steadyloop.cli", "serve", "--base-url", "http://127.0.0.1:9/v1", "-m", "m",
        "--store", wrong, "--no-tools", "--port", str(free_port()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
    )  # fmt: skip
    try:
        # A guard against a hang only: the old wait (30 s) ended in exit code 3 and a traceback.
        _, stderr = await asyncio.wait_for(process.communicate(), 120)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith("steadyloop: error: ") and "password authentication failed" in lines[0]
    assert "not-the-password" not in lines[0]


async def test_serve_as_a_role_that_may_not_create_the_stores_schema_says_what_to_grant(
    postgres_server: str,
) -> None:
    role = f"nc_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # type: ignore[arg-type]
        conn.execute(f"CREATE DATABASE {role}")  # type: ignore[arg-type]  # owned by another role
    base = postgres_server.split("://", 1)[1].split("@", 1)[1].rsplit("/", 1)[0]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "steadyloop.cli", "serve", "--base-url", "http://127.0.0.1:9/v1", "-m", "m",
        "--store", f"postgresql://{role}@{base}/{role}", "--no-tools", "--port", str(free_port()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "STEADYLOOP_SERVER_TOKENS": ""},
    )  # fmt: skip
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 120)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 1
    assert len(lines) == 1, lines
    assert f"GRANT CREATE ON DATABASE {role} TO {role}" in lines[0], lines[0]
