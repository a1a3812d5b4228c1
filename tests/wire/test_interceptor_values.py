"""The interceptors' sans-I/O parts: raw events kept by the SSE decoder however the bytes are cut, what an
assistant-event interceptor may return, a payload replacement, and the key resolver."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.events import MessageEnd, MessageStart, MessageUpdate
from steadyloop.wire import DROP
from steadyloop.wire.endpoints import Endpoint, with_resolved_key
from steadyloop.wire.interceptors import intercept_assistant_event, intercept_payload, wire_only
from steadyloop.wire.sse import DONE, SSEDecoder

# Data lines as servers write them: JSON, junk, the end marker; never a newline inside one line.
_DATA = st.one_of(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=3).map(
        lambda d: json.dumps(d, ensure_ascii=False)
    ),
    st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20),
    st.just("[DONE]"),
)
_NAME = st.sampled_from(["", "ping", "error", "message"])


def _encode(events: list[tuple[str, str]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


def _cut(blob: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(blob) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(blob[last:p])
        last = p
    pieces.append(blob[last:])
    return pieces


@given(st.lists(st.tuples(_NAME, _DATA), max_size=12), st.lists(st.integers(0, 10_000), max_size=8))
def test_raw_events_are_kept_as_sent_however_the_stream_is_cut(
    events: list[tuple[str, str]], cuts: list[int]
) -> None:
    blob = _encode(events)
    keeping, plain = SSEDecoder(keep_raw=True), SSEDecoder()
    decoded_keeping: list[Any] = []
    decoded_plain: list[Any] = []
    raw: list[tuple[bytes, bytes]] = []
    for piece in _cut(blob, cuts):
        decoded_keeping += keeping.feed(piece)
        decoded_plain += plain.feed(piece)
        assert keeping.raw is not None
        raw += keeping.raw
        keeping.raw.clear()
    decoded_keeping += keeping.flush()
    decoded_plain += plain.flush()
    assert [(n.decode(), d.decode()) for n, d in raw] == events
    # Keeping them changes nothing of what is read.
    assert len(decoded_keeping) == len(decoded_plain)
    assert all((a is DONE) == (b is DONE) for a, b in zip(decoded_keeping, decoded_plain, strict=True))
    assert [a for a in decoded_keeping if a is not DONE] == [b for b in decoded_plain if b is not DONE]
    assert plain.raw is None


def test_an_assistant_interceptor_keeps_replaces_or_drops_updates_only() -> None:
    update = MessageUpdate(kind="text", delta="hi", step=2)
    assert intercept_assistant_event(lambda e: None, update) is update
    assert intercept_assistant_event(lambda e: e, update) is update
    assert intercept_assistant_event(lambda e: DROP, update) is None
    other = MessageUpdate(kind="text", delta="HI")
    assert intercept_assistant_event(lambda e: other, update) is other
    with pytest.raises(sl.InterceptorFailed, match="must return None, a MessageUpdate or DROP"):
        intercept_assistant_event(lambda e: "HI", update)  # type: ignore[arg-type,return-value]
    start = MessageStart(message=sl.AssistantMessage())
    end = MessageEnd(message=sl.AssistantMessage(content="x"))
    for event in (start, end):
        assert intercept_assistant_event(lambda e: None, event) is event
        with pytest.raises(sl.InterceptorFailed, match="only message_update"):
            intercept_assistant_event(lambda e: DROP, event)
    with pytest.raises(sl.InterceptorFailed) as caught:
        intercept_assistant_event(lambda e: 1 / 0, update)  # type: ignore[arg-type,return-value]
    assert caught.value.interceptor == "on_assistant_event"
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    assert repr(DROP) == "DROP"


async def test_a_payload_replacement_is_a_new_body_and_none_keeps_it() -> None:
    body = {"model": "m", "messages": []}
    assert await intercept_payload(lambda b: None, body) is body
    replaced = await intercept_payload(lambda b: {"model": "other"}, body)
    assert replaced == {"model": "other"} and body == {"model": "m", "messages": []}

    async def slow(b: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {**b, "seed": 1}

    assert (await intercept_payload(slow, body))["seed"] == 1


def test_requests_are_sent_without_the_assistant_interceptor() -> None:
    def look(event: Any) -> None:
        return None

    assert wire_only(None) is None
    only = sl.Interceptors(on_assistant_event=look)
    assert wire_only(only) is None
    both = sl.Interceptors(on_payload=lambda b: None, on_assistant_event=look)
    kept = wire_only(both)
    assert kept is not None and kept.on_assistant_event is None and kept.on_payload is both.on_payload
    wire = sl.Interceptors(on_response=lambda r: None)
    assert wire_only(wire) is wire


async def test_a_key_resolver_may_be_async_and_none_keeps_the_endpoint() -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1", api_key="static")
    assert await with_resolved_key(endpoint, None) is endpoint

    async def fresh() -> str:
        return "fresh"

    assert (await with_resolved_key(endpoint, fresh)).api_key == "fresh"
    assert (await with_resolved_key(endpoint, lambda: "sync")).api_key == "sync"
