"""Where a run is pointed at, read totally: endpoints, named providers, failover chains, session stores.

Only typed errors (``SteadyloopError``) come out, at once: not a ``ValueError`` from the HTTP library at the
first request, nor a store that waits out its connect timeout on a URL it can never read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.errors import InvalidInput, SteadyloopError
from steadyloop.sessions.select import is_shared_store, open_store
from steadyloop.sessions.store import StoreUnavailable
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint

from ._edges import LINEAR_BOUND, ODD_TEXTS, any_text, growth, mutated_text

NAMES = ["openai", "anthropic", "gemini", "ollama", "vllm", "OpenAI", " grok ", "lmstudio"]
CHAINS = [
    "anthropic:claude-x,openai:gpt-y,ollama",
    "vllm:Qwen/Qwen3-8B, ollama:llama3:8b",
    "gemini:gemini-2.5-flash",
]
URLS = [
    "http://127.0.0.1:8080/v1",
    "https://api.example.com/v1",
    "http://[::1]:11434",
    "http://host:1/v1?x=1",
]


def _built(make: Any) -> Any:
    try:
        return make()
    except SteadyloopError:
        return None


@given(st.sampled_from(CHAINS).flatmap(mutated_text) | any_text)
def test_any_chain_text_is_a_target_or_a_typed_error(chain: str) -> None:
    target = _built(lambda: sl.failover(chain, env={}))
    assert target is None or isinstance(target.endpoint, Endpoint)


@given(st.lists(st.tuples(st.sampled_from(NAMES) | any_text, st.none() | any_text), max_size=4) | any_text)
def test_any_chain_of_pairs_is_a_target_or_a_typed_error(chain: Any) -> None:
    _built(lambda: sl.failover(chain, env={}))


@given(st.sampled_from(NAMES), any_text | st.sampled_from(URLS).flatmap(mutated_text), any_text)
def test_any_environment_gives_an_endpoint_or_a_typed_error(name: str, url: str, key: str) -> None:
    prefix = name.strip().upper()
    env = {f"{prefix}_BASE_URL": url, f"{prefix}_API_KEY": key, "STEADYLOOP_FAILOVER": f"{name}:m"}
    _built(lambda: sl.provider(name, env=env))
    _built(lambda: sl.provider_from_env(env))


@given(st.sampled_from(URLS).flatmap(mutated_text) | any_text, st.none() | any_text)
def test_any_url_and_key_make_an_endpoint_or_a_typed_error(url: str, key: str | None) -> None:
    endpoint = _built(lambda: Endpoint(url, api_key=key))
    if endpoint is not None:
        assert endpoint.base_url.startswith(("http://", "https://"))
        assert endpoint.api_key is None or endpoint.api_key.isascii()


BAD_KEYS = ["a\nb", "\x00", "sk-abc\n", "a\r\nX-Injected: 1", "\ud800", "é"]
BAD_URLS = [
    "http://[::1",
    "http://127.0.0.1:abc/v1",
    "http://127.0.0.1:99999999/v1",
    "http://\ud800/v1",
    "http://a b/v1",
    "http://127.0.0.1:8080/v1\x00",
    "http:///v1",
]


@pytest.mark.parametrize("key", BAD_KEYS, ids=ascii)
def test_a_key_no_header_can_carry_is_refused_when_the_endpoint_is_made(key: str) -> None:
    # A newline or NUL raised ValueError from the HTTP library at the first request (after opening a
    # session it left unclosed); a lone surrogate raised UnicodeEncodeError from the Anthropic and Gemini SDKs.
    with pytest.raises(InvalidInput, match="api_key"):
        Endpoint("http://127.0.0.1:8080/v1", api_key=key)
    with pytest.raises(InvalidInput, match="api_key"):
        sl.provider("openai", env={"OPENAI_API_KEY": key})


@pytest.mark.parametrize("url", BAD_URLS, ids=ascii)
def test_a_url_no_client_can_send_to_is_refused_when_the_endpoint_is_made(url: str) -> None:
    # Each raised ValueError or UnicodeError from the HTTP library at the first request.
    with pytest.raises(InvalidInput, match="base_url"):
        Endpoint(url)
    with pytest.raises(InvalidInput, match="base_url"):
        sl.failover("openai:gpt-x", env={"OPENAI_BASE_URL": url})


async def test_good_odd_urls_and_keys_still_reach_the_server() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with ScriptedServer(default_reply=Reply.stream(text_chunks(["fine"]))) as server:
        for key in (None, "sk-proj-AbC_123-xyz", "key with spaces"):
            endpoint = Endpoint(server.base_url + "/", api_key=key)
            turn = await run_turn(endpoint, body, policy=RetryPolicy(max_retries=0))
            assert turn.content == "fine"


def test_a_long_chain_is_read_in_linear_time() -> None:
    ratio = growth(lambda n: sl.failover(",".join(["ollama:m", "vllm"] * n), env={}), 200)
    assert ratio < LINEAR_BOUND, ratio


STORES = [
    "postgresql://user:pw@db.example:5432/sessions",
    "sqlite:///tmp/x.db",
    "sessions.db",
    "postgres://h/db",
]


@given(st.none() | st.sampled_from(STORES).flatmap(mutated_text) | any_text)
def test_any_store_target_opens_a_store_or_is_a_typed_error(target: str | None) -> None:
    started = time.monotonic()
    store = _built(lambda: open_store(target))
    assert time.monotonic() - started < 30  # nothing is connected to: a URL is only read
    shared = is_shared_store(target)
    assert store is None or shared == (type(store).__name__ == "PostgresSessionStore")


@pytest.mark.parametrize(
    "url",
    ["postgresql://h/db?x=1", "postgresql://a:b@[::1/db", "postgresql://\ud800/db", "postgresql://h/db?a"],
)
def test_a_postgres_url_libpq_cannot_read_is_refused_at_once(url: str) -> None:
    # The pool retried it in the background and the first call waited out the connect timeout (30 s).
    with pytest.raises(InvalidInput, match="not a PostgreSQL URL") as refused:
        open_store(url)
    assert "pw" not in str(refused.value)


def test_the_password_of_a_refused_url_is_not_shown() -> None:
    with pytest.raises(InvalidInput) as refused:
        open_store("postgresql://user:s3cret%zz@h/db?bogus=1")
    assert "s3cret" not in str(refused.value)


def test_every_odd_text_as_a_store_or_a_chain() -> None:
    for text in ODD_TEXTS:
        _built(lambda text=text: open_store(text))
        _built(lambda text=text: open_store("postgresql://h/db?application_name=" + text))
        _built(lambda text=text: sl.failover(text, env={}))


@pytest.mark.parametrize(
    "target", ["a\x00b.db", "sqlite:///tmp/\x00.db", "~\x00", "~no-such-user-here/s.db"], ids=ascii
)
def test_a_store_path_that_names_no_file_is_refused_when_selected(target: str) -> None:
    # open_store raised ValueError (embedded null byte) or RuntimeError (no home directory to expand).
    with pytest.raises(InvalidInput):
        open_store(target)


@pytest.mark.parametrize("name", ["\ud800.db", ".", "", "/proc/no/such.db"], ids=ascii)
async def test_a_store_file_that_cannot_be_opened_is_store_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # The first call raised UnicodeEncodeError, IsADirectoryError or FileNotFoundError from the worker.
    monkeypatch.chdir(tmp_path)
    store = open_store(name or str(tmp_path))
    try:
        with pytest.raises(StoreUnavailable, match="cannot be opened"):
            await store.list("agent")
        with pytest.raises(StoreUnavailable):  # and again, not a half-open store
            await store.list("agent")
    finally:
        await store.close()
