"""Shared fixtures: the network is blocked for unit tests; real servers live on loopback only.

Tests under ``tests/real/`` talk to a real llama.cpp ``llama-server`` started by ``steadyloop.local`` (built
and downloaded once, then cached outside the clone). Every other test may open loopback sockets only.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import steadyloop.reset as reset
from steadyloop.wire.transport.clients import aclose_clients, configure_clients

_REAL = Path(__file__).parent / "real"

# Property tests run a modest number of examples in the normal suite; HYPOTHESIS_PROFILE=slow runs many
# more, for a developer hunting what the normal suite is too quick to find. No deadline in either: a
# shared machine under load is not a slow parser, and time budgets are measured by the benchmarks.
settings.register_profile("default", max_examples=60, deadline=None)
settings.register_profile(
    "slow", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _REAL in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real_server)


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    host = address[0] if isinstance(address, tuple) else address
    inet = self.family in (socket.AF_INET, socket.AF_INET6)
    if isinstance(host, str) and inet and not (host.startswith("127.") or host in ("localhost", "::1")):
        raise OSError(f"tests may only reach loopback, not {host!r}")
    _real_connect(self, address)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.fixture(autouse=True)
async def _fresh_process_state() -> AsyncIterator[None]:
    # Latches, pools and calibration are process-wide by design; tests must not leak them to each other.
    # Pooled clients belong to the test's event loop, so they are closed while it still runs.
    reset.reset_all()
    # The default transport is aiohttp; STEADYLOOP_TEST_TRANSPORT=httpx2 runs the same tests over the other.
    if os.environ.get("STEADYLOOP_TEST_TRANSPORT") == "httpx2":
        configure_clients(transport="httpx2")
    yield
    await aclose_clients()
    reset.reset_all()


_SCRIPTS = Path(__file__).parent.parent / "scripts"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL for this test session: ``scripts/pg`` (Debian's package, installed where missing)
    in a fresh data folder on a free loopback port; stopped and removed after the last test. Yields the URL
    of its maintenance database; tests take a database of their own from ``postgres_url``."""
    folder = tempfile.mkdtemp(prefix="slpg-", dir="/tmp")  # every parent must be open to 'postgres'
    os.chmod(folder, 0o755)
    data = os.path.join(folder, "d")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = subprocess.run(
        ["bash", str(_SCRIPTS / "pg"), "start", data, str(port), "postgres"],
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"scripts/pg could not start PostgreSQL:\n{started.stderr}")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(_SCRIPTS / "pg"), "stop", data], check=False, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def new_postgres_database(postgres_server: str) -> Callable[[], str]:
    """Makes a new, empty database on the test session's PostgreSQL and returns its URL."""
    import psycopg

    def make() -> str:
        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return postgres_server.rsplit("/", 1)[0] + "/" + name

    return make


@pytest.fixture
def postgres_url(new_postgres_database: Callable[[], str]) -> str:
    """The URL of a new, empty database on the test session's PostgreSQL."""
    return new_postgres_database()


@pytest.fixture
def postgres_password_url(postgres_server: str) -> str:
    """The URL, right password included, of a new role that must log in with a password (SCRAM) and owns a
    new database of its own; the test session's server trusts every other role on loopback."""
    import psycopg

    role = f"pw_{uuid.uuid4().hex[:12]}"
    password = uuid.uuid4().hex
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")  # type: ignore[arg-type]
        conn.execute(f"CREATE DATABASE {role} OWNER {role}")  # type: ignore[arg-type]
        row = conn.execute("SHOW hba_file").fetchone()
        assert row is not None
        rules = Path(row[0])
        # The first rule that matches wins: this one, for this role only, goes before the trusting ones.
        rules.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + rules.read_text())
        conn.execute("SELECT pg_reload_conf()")
    base = postgres_server.split("://", 1)[1].split("@", 1)[1].rsplit("/", 1)[0]
    url = f"postgresql://{role}:{password}@{base}/{role}"
    # The server reads its rules again when it gets to the signal: wait until a wrong password is refused.
    for _ in range(1000):
        try:
            psycopg.connect(url.replace(password, "wrong"), connect_timeout=5).close()
        except psycopg.OperationalError:
            return url
    pytest.fail("the server never started asking the new role for a password")
