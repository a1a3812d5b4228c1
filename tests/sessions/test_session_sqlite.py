"""What only the SQLite store does: files and modes, migrations, durability settings, surviving a reopen."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import steadyloop.sessions._schema as schema_module
from steadyloop.errors import InvalidInput
from steadyloop.events import AgentStart, Notice
from steadyloop.messages import UserMessage
from steadyloop.sessions import EventRecorder, SQLiteSessionStore, default_session_path
from steadyloop.usage import Usage

A = "agent-a"
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _user_version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


@posix_only
async def test_files_are_0600_and_new_folders_0700(tmp_path: Path) -> None:
    old = os.umask(0o022)  # a common, permissive umask: the store must not rely on the caller's
    try:
        path = tmp_path / "new" / "deeper" / "sessions.db"
        async with SQLiteSessionStore(path) as store:
            info = await store.create(A)
            await store.append_messages(info.session_id, [UserMessage(content="hi")], agent_id=A)
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
            assert all(f.exists() for f in files)
            assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert _mode(path.parent) == 0o700
        assert _mode(path.parent.parent) == 0o700
    finally:
        os.umask(old)


async def test_nothing_touches_the_disk_until_the_first_call(tmp_path: Path) -> None:
    path = tmp_path / "lazy" / "sessions.db"
    store = SQLiteSessionStore(path)
    assert not path.parent.exists()
    await store.close()
    assert not path.parent.exists()
    with pytest.raises(InvalidInput, match="closed"):
        await store.list(A)


async def test_everything_survives_a_reopen_and_the_seq_continues(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    async with SQLiteSessionStore(path) as store:
        sid = (await store.create(A, title="kept")).session_id
        await store.append_messages(sid, [UserMessage(content="hello")], agent_id=A)
        await EventRecorder(store, sid, A).record(AgentStart(run_id="r1"))
        await store.record_usage(sid, Usage(prompt_tokens=3), agent_id=A)
    async with SQLiteSessionStore(path) as store:
        info = await store.get(sid, agent_id=A)
        assert info is not None
        assert (info.title, info.message_count, info.last_event_seq, info.usage.prompt_tokens) == (
            "kept",
            1,
            1,
            3,
        )
        assert await EventRecorder(store, sid, A).record(AgentStart(run_id="r2")) == 2
        assert await store.load_messages(sid, agent_id=A) == [UserMessage(content="hello")]


async def test_migrations_run_once_each_and_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sessions.db"
    async with SQLiteSessionStore(path) as store:
        await store.create(A, session_id="s1")
    shipped = len(schema_module.MIGRATIONS)
    assert _user_version(path) == shipped

    # A later release appends a migration; not idempotent on purpose, so a second run would show.
    probe = "CREATE TABLE probe (n INTEGER);\nINSERT INTO probe VALUES (1);"
    monkeypatch.setattr(schema_module, "MIGRATIONS", [*schema_module.MIGRATIONS, probe])
    for _ in range(3):
        async with SQLiteSessionStore(path) as store:
            assert await store.get("s1", agent_id=A) is not None  # data from before the upgrade is kept
    assert _user_version(path) == shipped + 1
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM probe").fetchone()[0] == 1
    finally:
        conn.close()


async def test_a_failing_migration_leaves_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sessions.db"
    broken = "CREATE TABLE half (n INTEGER);\nTHIS IS NOT SQL;"
    monkeypatch.setattr(schema_module, "MIGRATIONS", [*schema_module.MIGRATIONS, broken])
    store = SQLiteSessionStore(path)
    with pytest.raises(sqlite3.OperationalError):
        await store.list(A)
    await store.close()
    assert _user_version(path) == len(schema_module.MIGRATIONS) - 1
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchall() == []
    finally:
        conn.close()


async def test_a_database_from_a_newer_steadyloop_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    store = SQLiteSessionStore(path)
    with pytest.raises(InvalidInput, match="newer"):
        await store.list(A)
    await store.close()


@pytest.mark.parametrize("level", ["NORMAL", "FULL"])
async def test_wal_and_the_chosen_synchronous_level(tmp_path: Path, level: str) -> None:
    store = SQLiteSessionStore(tmp_path / "sessions.db", synchronous=level)  # type: ignore[arg-type]
    await store.list(A)
    conn = store._conn  # the store's own connection, read on its thread
    assert conn is not None
    loop = asyncio.get_running_loop()
    journal, sync = await loop.run_in_executor(
        store._worker,
        lambda: (
            conn.execute("PRAGMA journal_mode").fetchone()[0],
            conn.execute("PRAGMA synchronous").fetchone()[0],
        ),
    )
    assert (journal, sync) == ("wal", {"NORMAL": 1, "FULL": 2}[level])
    await store.close()
    with pytest.raises(InvalidInput, match="synchronous"):
        SQLiteSessionStore(tmp_path / "x.db", synchronous="OFF")  # type: ignore[arg-type]


async def test_database_work_stays_off_the_event_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: set[str] = set()
    real = sqlite3.connect

    def spy(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    async with SQLiteSessionStore(tmp_path / "sessions.db") as store:
        await store.create(A)
    assert threads and threading.current_thread().name not in threads
    assert all(name.startswith("steadyloop-sessions") for name in threads)


async def test_a_row_this_version_cannot_read_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "sessions.db"
    async with SQLiteSessionStore(path) as store:
        sid = (await store.create(A)).session_id
        await store.append_events(sid, [AgentStart()], agent_id=A)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO events VALUES (?, 2, ?)", (sid, '{"type": "from_the_future"}'))
    conn.commit()
    conn.close()
    async with SQLiteSessionStore(path) as store:
        assert [s for s, _ in await store.load_events(sid, agent_id=A)] == [1]
        assert await store.append_events(sid, [Notice(text="n")], agent_id=A) == 3  # its seq is still taken
    assert "cannot read" in caplog.text


def test_default_path_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STEADYLOOP_HOME", str(tmp_path / "home"))
    assert default_session_path() == tmp_path / "home" / "sessions.db"
    monkeypatch.delenv("STEADYLOOP_HOME")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
        assert default_session_path() == tmp_path / "xdg" / "steadyloop" / "sessions.db"
        monkeypatch.delenv("XDG_DATA_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "user"))
        assert default_session_path() == tmp_path / "user" / ".local" / "share" / "steadyloop" / "sessions.db"


def test_a_relative_xdg_data_home_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("STEADYLOOP_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert default_session_path() == tmp_path / ".local" / "share" / "steadyloop" / "sessions.db"


def test_the_package_exports_are_sorted_and_resolve() -> None:
    import steadyloop.sessions as sessions

    assert sessions.__all__ == sorted(sessions.__all__)
    assert all(hasattr(sessions, name) for name in sessions.__all__)
