"""The native Anthropic event reader at its edges: events as the SDK hands them over, and raw SSE bytes.

Seeds are real captures (tests/data/providers/anthropic), mutated: values of the wrong kind at any depth,
odd text, cut and spliced streams. Only typed errors (``EndpointError``) may come out, and a reply's cost
grows linearly with its pieces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import EndpointError, EndpointUnreadable
from steadyloop.wire.anthropic.events import AnthropicEvents
from steadyloop.wire.sse import DONE, SSEDecoder

from ._edges import LINEAR_BOUND, ODD_VALUES, growth, json_like, mutated, mutated_text, nested

CAPTURES = sorted((Path(__file__).parent.parent / "data" / "providers" / "anthropic").glob("*.sse"))


def _events(path: Path) -> list[dict[str, Any]]:
    decoder = SSEDecoder()
    return [e for e in decoder.feed(path.read_bytes()) + decoder.flush() if isinstance(e, dict)]


SEEDS = {path.name: _events(path) for path in CAPTURES}


def _read(events: list[Any]) -> AnthropicEvents:
    reader = AnthropicEvents(endpoint="http://anthropic.test", model="claude-test")
    for event in events:
        try:
            chunks = reader.feed(event)
        except EndpointError:
            return reader
        json.dumps([c for c in chunks if c is not DONE])  # what it hands on is plain JSON
    reader.chat_usage()
    return reader


def test_the_captures_are_there() -> None:
    assert len(SEEDS) >= 8 and all(SEEDS.values())


@given(st.sampled_from(sorted(SEEDS)).flatmap(lambda name: mutated(SEEDS[name])))
def test_any_mutation_of_a_captured_stream_reads_or_fails_typed(events: Any) -> None:
    _read(events if isinstance(events, list) else [events])


@given(
    st.sampled_from(sorted(SEEDS)),
    st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["drop", "repeat", "swap"])), max_size=6),
)
def test_events_dropped_repeated_or_out_of_order_read_or_fail_typed(
    name: str, edits: list[tuple[int, str]]
) -> None:
    events = list(SEEDS[name])
    for at, how in edits:
        if not events:
            break
        i = at % len(events)
        if how == "drop":
            del events[i]
        elif how == "repeat":
            events.insert(i, events[i])
        else:
            events[i], events[-1] = events[-1], events[i]
    _read(events)


@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_raw_sse_bytes_mutated_and_cut_anywhere_read_or_fail_typed(name: str, data: st.DataObject) -> None:
    text = (Path(CAPTURES[0]).parent / name).read_bytes().decode()
    mangled = data.draw(mutated_text(text))
    blob = mangled.encode("utf-8", "surrogatepass")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=6)))
    decoder = SSEDecoder(keep_raw=True)
    decoded: list[Any] = []
    last = 0
    for cut in [*cuts, len(blob)]:
        decoded += decoder.feed(blob[last:cut])
        last = cut
    decoded += decoder.flush()
    _read([e for e in decoded if isinstance(e, dict)])


@pytest.mark.parametrize("value", ODD_VALUES, ids=repr)
def test_an_odd_value_in_every_place_of_every_event(value: Any) -> None:
    for events in SEEDS.values():
        for i, event in enumerate(events):
            for key in event:
                changed = [*events[:i], {**event, key: value}, *events[i + 1 :]]
                _read(changed)
            for key in ("delta", "content_block", "message", "usage"):
                inner = event.get(key)
                if isinstance(inner, dict):
                    for field in inner:
                        _read([*events[:i], {**event, key: {**inner, field: value}}, *events[i + 1 :]])


def _tool_block(given_input: Any, partial: str | None = None) -> AnthropicEvents:
    reader = AnthropicEvents()
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": given_input}
    reader.feed({"type": "content_block_start", "index": 0, "content_block": block})
    if partial is not None:
        delta = {"type": "input_json_delta", "partial_json": partial}
        reader.feed({"type": "content_block_delta", "index": 0, "delta": delta})
    reader.feed({"type": "content_block_stop", "index": 0})
    return reader


def test_a_tool_input_of_the_wrong_kind_is_an_empty_object() -> None:
    # input: 5 raised TypeError, input: "ab" ValueError (dict() of them).
    for odd in (5, "ab", [1, 2], [["a", 1]], True, 2.5, None):
        reader = _tool_block(odd)
        assert reader.content[-1]["input"] == {}
    assert _tool_block('{"path": "a"}').content[-1]["input"] == {"path": "a"}


def test_deeply_nested_partial_json_is_no_recursion_error() -> None:
    # Raised RecursionError from json.loads when the block stopped.
    for text in ("[" * 10_000, '{"a":' * 10_000, json.dumps(nested(900))):
        reader = _tool_block({}, partial=text)
        assert isinstance(reader.content[-1]["input"], dict)


def test_a_whole_input_too_deep_to_write_is_a_typed_error() -> None:
    with pytest.raises(EndpointUnreadable, match="tool_use block's input"):
        _tool_block({"a": nested(5_000)})


def test_an_event_that_is_not_an_object_is_skipped() -> None:
    # A list raised AttributeError ('list' object has no attribute 'get').
    reader = AnthropicEvents()
    for odd in ([1], "message_stop", 5, None, 2.5):
        assert reader.feed(odd) == []  # type: ignore[arg-type]
    assert reader.skipped == 5


@given(json_like)
def test_any_json_value_as_an_event_reads_or_fails_typed(value: Any) -> None:
    _read([value, {"type": "content_block_delta", "index": 0, "delta": value}])


def _many_deltas(kind: str, n: int) -> None:
    field = {"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "signature"}[kind]
    block = {"type": "text" if kind == "text_delta" else "thinking"}
    reader = AnthropicEvents()
    reader.feed({"type": "content_block_start", "index": 0, "content_block": block})
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: "abcdefgh"}}
    for _ in range(n):
        reader.feed(delta)
    reader.feed({"type": "content_block_stop", "index": 0})


@pytest.mark.parametrize("kind", ["text_delta", "thinking_delta", "signature_delta"])
def test_a_long_reply_costs_linear_time_in_its_pieces(kind: str) -> None:
    # Each piece was added to the block's whole string: 160,000 pieces took 12 s against 0.23 s for 20,000.
    ratio = growth(lambda n: _many_deltas(kind, n), 10_000)
    assert ratio < LINEAR_BOUND, ratio


def test_a_long_reply_is_kept_whole() -> None:
    reader = AnthropicEvents()
    reader.feed({"type": "message_start", "message": {"usage": {"input_tokens": 1}}})
    reader.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "<"}})
    for i in range(1_000):
        reader.feed(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": str(i)}}
        )
    reader.feed({"type": "content_block_stop", "index": 0})
    assert reader.content[-1]["text"] == "<" + "".join(str(i) for i in range(1_000))
