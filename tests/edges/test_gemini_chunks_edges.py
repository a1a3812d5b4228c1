"""The Gemini chunk reader at its edges: chunks as the SDK hands them over, and raw SSE bytes.

Seeds are real captures (tests/data/providers/gemini, streamed and whole), mutated: values of the wrong
kind at any depth, odd text, cut and spliced streams. Only typed errors (``EndpointError``) may come out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import EndpointError, EndpointUnreadable
from steadyloop.wire.gemini.shape import GeminiChunks
from steadyloop.wire.sse import SSEDecoder

from ._edges import LINEAR_BOUND, ODD_VALUES, growth, json_like, mutated, mutated_text, nested

DATA = Path(__file__).parent.parent / "data" / "providers" / "gemini"


def _chunks(path: Path) -> list[Any]:
    if path.suffix == ".json":
        return [json.loads(path.read_text())]
    decoder = SSEDecoder()
    return [c for c in decoder.feed(path.read_bytes()) + decoder.flush() if isinstance(c, dict)]


SEEDS = {path.name: _chunks(path) for path in sorted(DATA.glob("*.sse")) + sorted(DATA.glob("*.json"))}
STREAMS = sorted(path.name for path in DATA.glob("*.sse"))


def _read(chunks: list[Any]) -> GeminiChunks:
    reader = GeminiChunks(endpoint="http://gemini.test", model="gemini-test")
    for chunk in chunks:
        try:
            json.dumps(reader.feed(chunk))  # what it hands on is plain JSON
        except EndpointError:
            return reader
    reader.chat_usage()
    return reader


def test_the_captures_are_there() -> None:
    assert len(SEEDS) >= 9 and all(SEEDS.values())


@given(st.sampled_from(sorted(SEEDS)).flatmap(lambda name: mutated(SEEDS[name])))
def test_any_mutation_of_a_captured_reply_reads_or_fails_typed(chunks: Any) -> None:
    _read(chunks if isinstance(chunks, list) else [chunks])


@given(st.sampled_from(STREAMS), st.data())
def test_raw_sse_bytes_mutated_and_cut_anywhere_read_or_fail_typed(name: str, data: st.DataObject) -> None:
    mangled = data.draw(mutated_text((DATA / name).read_text()))
    blob = mangled.encode("utf-8", "surrogatepass")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=6)))
    decoder = SSEDecoder()
    decoded: list[Any] = []
    last = 0
    for cut in [*cuts, len(blob)]:
        decoded += decoder.feed(blob[last:cut])
        last = cut
    _read(decoded + decoder.flush())


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _places(item, (*path, index))
    return out


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    inner = copy
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = new
    return copy


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_an_odd_value_in_every_place_of_every_chunk(value: Any) -> None:
    for chunks in SEEDS.values():
        for i, chunk in enumerate(chunks):
            for place in _places(chunk):
                _read([*chunks[:i], _replaced(chunk, place, value), *chunks[i + 1 :]])


@given(json_like)
def test_any_json_value_as_a_chunk_reads_or_fails_typed(value: Any) -> None:
    _read([value, {"candidates": [value]}, {"candidates": [{"content": {"parts": [value]}}]}])


def test_args_too_deep_to_write_are_a_typed_error() -> None:
    # Raised RecursionError from json.dumps.
    part = {"functionCall": {"name": "f", "args": {"a": nested(5_000)}}}
    with pytest.raises(EndpointUnreadable, match="functionCall's args"):
        GeminiChunks().feed({"candidates": [{"content": {"parts": [part]}}]})
    fine = {"functionCall": {"name": "f", "args": {"a": nested(50), "n": float("nan")}}}
    out = GeminiChunks().feed({"candidates": [{"content": {"parts": [fine]}}]})
    assert json.loads(out[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"])["a"]


def _many_parts(n: int) -> None:
    reader = GeminiChunks()
    chunk = {"candidates": [{"content": {"parts": [{"text": "abcdefgh"}, {"functionCall": {"name": "f"}}]}}]}
    for _ in range(n):
        reader.feed(chunk)
    reader.feed({"candidates": [{"finishReason": "STOP"}]})


def test_a_long_reply_costs_linear_time_in_its_chunks() -> None:
    assert growth(_many_parts, 5_000) < LINEAR_BOUND
