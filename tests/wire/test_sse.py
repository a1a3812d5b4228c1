"""The SSE decoder: the fast block path and the line path against a slow reference, under every chunking."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.wire.sse import DONE, SSEDecoder
from steadyloop.wire.transport import json_codec


def reference(stream: bytes) -> tuple[list[Any], int, int]:
    """The event-stream rules read one whole line at a time, with no shortcuts.

    An event whose data is not JSON is skipped and counted, unless it is an ``error`` event.
    """
    events: list[Any] = []
    comments = 0
    unreadable = 0
    data: list[bytes] = []
    name = b""
    text = stream.replace(b"\r\n", b"\n")
    lines = text.split(b"\n")
    lines.pop()  # an unterminated last line is not a line yet
    for line in lines:
        if not line:
            if data:
                payload = b"\n".join(data)
                if payload == b"[DONE]":
                    events.append(DONE)
                else:
                    try:
                        decoded = json.loads(payload)
                    except (ValueError, RecursionError):
                        if name != b"error":
                            unreadable += 1
                            data = []
                            name = b""
                            continue
                        decoded = {"error": {"message": payload[:500].decode("utf-8", "replace")}}
                    if name == b"error" and isinstance(decoded, dict) and "error" not in decoded:
                        decoded = {"error": decoded}
                    events.append(decoded)
                data = []
                name = b""
        elif line.startswith(b"data:"):
            payload = line[5:]
            data.append(payload[1:] if payload.startswith(b" ") else payload)
        elif line.startswith(b":"):
            comments += 1
        elif line.startswith(b"event:"):
            name = line[6:].strip()
    return events, comments, unreadable


def decode(pieces: list[bytes]) -> tuple[list[Any], int, int]:
    decoder = SSEDecoder()
    events: list[Any] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    return events, decoder.comments, decoder.unreadable


def chunk(n: int, text: str) -> bytes:
    body = {"id": f"c{n}", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


_pieces = st.sampled_from(
    [
        chunk(0, "hello"),
        chunk(1, " wörld ✓"),
        b": keep-alive\n\n",
        b'event: error\ndata: {"message": "boom"}\n\n',
        b'data: {"a":\ndata: 1}\n\n',
        b'data:{"tight": true}\n\n',
        b"data: not json\n\n",
        b"event: error\ndata: not json either\n\n",
        b"data: null\n\n",
        b"data: 5\n\n",
        b"data: [1, 2]\n\n",
        b"data: " + b"[" * 1500 + b"\n\n",
        b"<html><body>502 Bad Gateway</body></html>\n",
        b"data: {not json\n\n",
        b'data: {"n": NaN}\n\n',
        b"\n",
        b"data: [DONE]\n\n",
        chunk(2, "crlf").replace(b"\n", b"\r\n"),
        b'id: 7\nretry: 10\ndata: {"x": 1}\n\n',
    ]
)


@given(st.lists(_pieces, max_size=12), st.data())
def test_every_chunking_decodes_like_the_reference(blocks: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(blocks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert decode(pieces) == reference(stream)
    assert decode([stream]) == reference(stream)
    assert decode([bytes([b]) for b in stream]) == reference(stream)


def test_a_named_error_event_split_from_its_data_is_still_an_error() -> None:
    # The event name arrives in one read and the data in the next: the name must not be lost on the fast path.
    events, *_ = decode([b"event: error\n", b'data: {"message": "overloaded"}\n\n'])
    assert events == [{"error": {"message": "overloaded"}}]


def test_keepalives_are_counted_and_yield_nothing() -> None:
    events, comments, _ = decode([b": ping\n\n", b": ping\n\n", chunk(0, "x")])
    assert comments == 2
    assert len(events) == 1


def test_an_unreadable_event_is_skipped_and_counted_with_its_first_bytes() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b"data: {oops\n\n" + chunk(0, "x") + b"data: <junk>\n\n")
    assert [e["id"] for e in events] == ["c0"]
    assert decoder.unreadable == 2 and decoder.first_unreadable == b"{oops"


def test_an_unreadable_error_event_is_still_an_error() -> None:
    events, *_ = decode([b"event: error\ndata: upstream exploded\n\n"])
    assert events == [{"error": {"message": "upstream exploded"}}]


def test_an_event_arriving_a_byte_at_a_time_is_joined_once() -> None:
    # The decoder keeps the pieces of a line and joins them when the line ends, so 100 KB fed a byte at a
    # time costs as little joining as 100 KB fed whole. Counted, not timed: the pieces only ever grow
    # until the newline, then go at once.
    big = chunk(0, "x" * 100_000)
    decoder = SSEDecoder()
    held: list[int] = []
    events: list[Any] = []
    for index in range(len(big)):
        events.extend(decoder.feed(big[index : index + 1]))
        held.append(len(decoder._parts))
    assert [e["id"] for e in events] == ["c0"]
    assert held[: len(big) - 2] == list(range(1, len(big) - 1))
    assert held[-1] == 0


def test_flush_reads_an_event_without_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a": 1}') == []
    assert decoder.flush() == [{"a": 1}]
    assert decoder.flush() == []


def test_non_strict_json_reads_the_same_with_or_without_orjson() -> None:
    # orjson refuses NaN; the codec then reads it with the standard library, as every server's output must.
    assert json_codec.loads(b'{"x": NaN}')["x"] != json_codec.loads(b'{"x": NaN}')["x"]
    assert json_codec.dumps({"big": 2**70, "s": "ü"}) == b'{"big":1180591620717411303424,"s":"\xc3\xbc"}'
