"""The SSE decoder (which also splits raw events for ``on_sse_event``) at its edges: real captures mutated
as bytes, invalid UTF-8, NUL, CR-only line ends, deep JSON, a megabyte line a byte at a time. It never
raises, keeps every event as sent, and its cost is linear in the bytes however they are cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.wire.sse import DONE, SSEDecoder

from ._edges import LINEAR_BOUND, ODD_TEXTS, growth, mutated_text

DATA = Path(__file__).parent.parent / "data"
CAPTURES = sorted((DATA / "providers").glob("*/*.sse")) + sorted((DATA / "captures").glob("*stream*.txt"))


def _decode(pieces: list[bytes], keep_raw: bool) -> tuple[list[Any], list[tuple[bytes, bytes]]]:
    decoder = SSEDecoder(keep_raw=keep_raw)
    out: list[Any] = []
    raw: list[tuple[bytes, bytes]] = []
    for piece in pieces:
        out += decoder.feed(piece)
        if decoder.raw is not None:
            raw += decoder.raw
            decoder.raw.clear()
    out += decoder.flush()
    if decoder.raw is not None:
        raw += decoder.raw
    return out, raw


def _cut(blob: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(blob) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(blob[last:point])
        last = point
    return [*pieces, blob[last:]]


def test_the_captures_are_there() -> None:
    assert len(CAPTURES) >= 10


@given(st.sampled_from(CAPTURES), st.data(), st.lists(st.integers(0, 100_000), max_size=10))
def test_any_mutated_capture_cut_anywhere_decodes_the_same_as_whole(
    path: Path, data: st.DataObject, cuts: list[int]
) -> None:
    text = data.draw(mutated_text(path.read_bytes().decode()))
    blob = text.encode("utf-8", "surrogatepass")
    whole, whole_raw = _decode([blob], keep_raw=True)
    cut, cut_raw = _decode(_cut(blob, cuts), keep_raw=True)
    plain, _ = _decode(_cut(blob, cuts), keep_raw=False)
    assert [e for e in cut if e is not DONE] == [e for e in whole if e is not DONE]
    assert cut_raw == whole_raw
    assert [e for e in plain if e is not DONE] == [e for e in whole if e is not DONE]


@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6))
def test_any_bytes_decode_without_raising(blob: bytes, cuts: list[int]) -> None:
    _decode(_cut(blob, cuts), keep_raw=True)
    _decode(_cut(blob, cuts), keep_raw=False)


@pytest.mark.parametrize("text", ODD_TEXTS, ids=lambda t: ascii(t[:12]))
def test_every_odd_text_as_data_an_event_name_or_a_line_end(text: str) -> None:
    odd = text.encode("utf-8", "surrogatepass")
    for blob in (
        b"data: " + odd + b"\n\n",
        b"event: " + odd + b"\ndata: {}\n\n",
        b"event: error\ndata: " + odd + b"\n\n",
        b"data: " + odd + b"\r\rdata: {}\r\n\r\n",
        odd + b"\n\n" + odd,
    ):
        _decode([blob], keep_raw=True)
        _decode([blob[i : i + 1] for i in range(len(blob))][:5000], keep_raw=False)


def test_invalid_utf8_and_deep_json_are_unreadable_events_not_errors() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"data: \xff\xfe{\n\ndata: " + b"[" * 10_000 + b"\n\ndata: {}\n\n")
    assert events == [{}] and decoder.unreadable == 2


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_a_long_line_in_small_pieces_costs_linear_time(size: int) -> None:
    def work(n: int) -> None:
        blob = b'data: {"x": "' + b"a" * n + b'"}\n\n'
        decoder = SSEDecoder(keep_raw=True)
        for at in range(0, len(blob), size):
            decoder.feed(blob[at : at + size])

    ratio = growth(work, 20_000 if size == 1 else 200_000)
    assert ratio < LINEAR_BOUND, ratio


@pytest.mark.parametrize("keep_raw", [False, True])
def test_many_events_cost_linear_time(keep_raw: bool) -> None:
    def work(n: int) -> None:
        _decode([b'data: {"a": 1}\n\n: ping\n\nevent: x\ndata: 2\r\n\r\n' * n], keep_raw)

    assert growth(work, 2_000) < LINEAR_BOUND
