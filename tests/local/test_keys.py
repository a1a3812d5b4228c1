"""The key a local server asks for: kept for its owner alone, found from the URL, sent by whoever uses it."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.config import EndpointChoice, resolve
from steadyloop.local import Cache, key_file_for, key_for
from steadyloop.local.keys import new_key, read_key, write_key
from steadyloop.local.reaper import probe


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default cache is this test's own."""
    monkeypatch.setenv("STEADYLOOP_LLM_HOME", str(tmp_path))
    Cache(tmp_path).make_dirs()
    return tmp_path


def test_a_key_is_written_for_its_owner_alone_and_read_back(home: Path) -> None:
    path = Cache(home).key_file(8090)
    key = new_key()
    write_key(path, key)
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_key(path) == key
    write_key(path, "second")  # replaced whole, still private
    assert read_key(path) == "second" and path.stat().st_mode & 0o777 == 0o600
    assert list(path.parent.glob("*.tmp")) == []
    assert new_key() != key and len(key) >= 40


@pytest.mark.parametrize(
    "content", [b"", b"\n\n", b"two words", b"caf\xc3\xa9", b"\xff\xfe", b"tab\there", b"k" * 5000]
)
def test_a_key_file_that_holds_no_key_of_ours_reads_as_none(home: Path, content: bytes) -> None:
    path = Cache(home).key_file(1)
    path.write_bytes(content)
    assert read_key(path) is None


def test_key_for_reads_only_a_loopback_url_with_a_port(home: Path) -> None:
    write_key(Cache(home).key_file(8090), "local-key")
    for url in ("http://127.0.0.1:8090/v1", "http://localhost:8090/v1", "http://127.0.0.1:8090"):
        assert key_for(url) == "local-key"
    write_key(Cache(home).key_file(8091), "v6-key")
    assert key_for("http://[::1]:8091/v1") == "v6-key"
    for url in (
        "http://127.0.0.1:8092/v1",  # no server of ours there
        "http://127.0.0.1/v1",  # no port: never guessed
        "https://api.example.com:8090/v1",  # a hosted endpoint never reads the cache
        "http://10.0.0.5:8090/v1",
        "http://127.0.0.1:99999999/v1",  # a port urlsplit refuses
        "http://[::1/v1",  # a broken URL
        "",
    ):
        assert key_for(url) is None, url
    # where the key would be: the cache's file for a loopback port, nothing for any other URL
    assert key_file_for("http://localhost:8093/v1") == Cache(home).key_file(8093)
    assert key_file_for("https://api.example.com:8090/v1") is None
    assert key_file_for("http://127.0.0.1/v1") is None


@given(st.text(max_size=300))
def test_key_for_is_total_on_any_text(url: str) -> None:
    got = key_for(url, Path("/nonexistent-steadyloop-home"))
    assert got is None or isinstance(got, str)
    where = key_file_for(url, Path("/nonexistent-steadyloop-home"))
    assert where is None or where.name.endswith(".key")


@given(st.binary(max_size=6000))
def test_read_key_is_total_on_any_bytes(tmp_path_factory: pytest.TempPathFactory, content: bytes) -> None:
    path = tmp_path_factory.mktemp("keys") / "k.key"
    path.write_bytes(content)
    got = read_key(path)
    assert got is None or (got.isascii() and got.isprintable() and " " not in got and got)


# ------------------------------------------------------------------------------- who sends it


def test_the_command_sends_a_local_servers_own_key_not_a_hosted_one(home: Path) -> None:
    write_key(Cache(home).key_file(8090), "local-key")
    env = {"OPENAI_API_KEY": "sk-hosted"}
    local = resolve(EndpointChoice(base_url="http://127.0.0.1:8090/v1"), env=env, config={})
    assert local.endpoint.api_key == "local-key"
    given_key = resolve(
        EndpointChoice(base_url="http://127.0.0.1:8090/v1", api_key="mine"), env=env, config={}
    )
    assert given_key.endpoint.api_key == "mine"  # a key on the command line still wins
    other = resolve(EndpointChoice(base_url="http://127.0.0.1:8093/v1"), env=env, config={})
    assert other.endpoint.api_key == "sk-hosted"  # not ours: as before
    from_env = resolve(EndpointChoice(), env={"OPENAI_BASE_URL": "http://127.0.0.1:8090/v1"}, config={})
    assert from_env.endpoint.api_key == "local-key"
    bundled = resolve(
        EndpointChoice(), env={}, config={}, start_local=lambda: ("http://127.0.0.1:8090/v1", "m")
    )
    assert bundled.endpoint.api_key == "local-key"


class _SlotsNeedAKey(http.server.BaseHTTPRequestHandler):
    key = "reaper-key"

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps([{"id": 0, "id_task": 7, "is_processing": True}]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def keyed_slots() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _SlotsNeedAKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_the_reaper_reads_a_keyed_servers_slots_with_its_key(home: Path, keyed_slots: int) -> None:
    cache = Cache(home)
    unread = probe(keyed_slots, cache, time.monotonic())
    assert not unread.busy and unread.signs[0] is None  # refused without the key
    write_key(cache.key_file(keyed_slots), _SlotsNeedAKey.key)
    read = probe(keyed_slots, cache, time.monotonic())
    assert read.busy and read.signs[0] is not None
