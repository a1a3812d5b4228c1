"""Stored transcripts, events and agent documents read back from text anyone may have edited.

``message_from_json``, ``messages_from_json`` and ``event_from_json`` read what a session store, a JSONL
export or a replayed event log holds; ``parse_spec_text`` reads an agent file. Whatever the text, each
answers with a value or its documented typed error (``InvalidInput``, ``SpecError``), and a value it
accepts is written back and read again unchanged. Reading takes time linear in the text.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.events import MessageEnd, MessageUpdate, Notice, TurnEnd, event_from_json, event_to_json
from steadyloop.messages import message_from_json, message_to_json, messages_from_json, messages_to_json
from steadyloop.spec import SpecError, parse_spec_text

from ._edges import LINEAR_BOUND, ODD_TEXTS, any_text, growth, json_like, mutated, mutated_text

MESSAGES: list[sl.Message] = [
    sl.SystemMessage(content="be brief"),
    sl.UserMessage(content="what is the weather in Oslo?"),
    sl.AssistantMessage(
        content="checking",
        tool_calls=(sl.ToolCall(id="c1", name="weather", arguments={"city": "Oslo"}),),
    ),
    sl.ToolResultMessage(call_id="c1", name="weather", content="4 °C, rain"),
    sl.AssistantMessage(content="It is 4 °C and raining."),
]
EVENTS: list[sl.Event] = [
    MessageUpdate(kind="text", delta="It is 4 °C"),
    MessageEnd(message=MESSAGES[2]),
    TurnEnd(step=1, message=MESSAGES[4], tool_results=(MESSAGES[3],)),  # type: ignore[arg-type]
    Notice(text="the endpoint was slow"),
]
MESSAGE_SEEDS = [json.loads(message_to_json(m)) for m in MESSAGES]
EVENT_SEEDS = [json.loads(event_to_json(e)) for e in EVENTS]
SPEC_TOML = """\
spec = "steadyloop.agent/1"
name = "reader"
description = "Reads files and answers"

[model]
name = "m"
temperature = 0

[[prompt]]
id = "role"
text = "You read files and answer."

[endpoint]
base_url = "http://127.0.0.1:8080/v1"
"""

# Values that broke readers elsewhere, as a whole document and inside a real one.
DEEP_ARRAY = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000
HOSTILE_TEXTS = [
    *ODD_TEXTS,
    DEEP_ARRAY,
    DEEP_OBJECT,
    '{"role": "user", "content": ' + DEEP_ARRAY + "}",
    '{"type": "message_update", "kind": "text", "delta": ' + DEEP_OBJECT + "}",
    '{"role": "user", "content": NaN}',
    '{"role": "user", "content": Infinity}',
    '{"role": "assistant", "content": "x", "usage": {"input_tokens": NaN}}',
    '{"role": "user", "content": "' + "x" * 1_000_000 + '"}',
    '{"role": "user", "content": "\\ud800"}',
    '{"type": "message_update", "kind": "text", "delta": "\\udfff"}',
    '{"role": "user", "content": "a\\u0000b"}',
    '{"role": "user", "content": "a\x00b"}',
    "\x00",
]


def _readers() -> list[tuple[str, Callable[[str], object], Callable[[Any], str]]]:
    return [
        ("message", message_from_json, message_to_json),
        ("messages", messages_from_json, messages_to_json),
        ("event", event_from_json, event_to_json),
    ]


def _read_or_refuse(read: Callable[[str], Any], write: Callable[[Any], str], text: str | bytes) -> None:
    """``read`` answers with a value that survives a round trip, or with ``InvalidInput``."""
    try:
        value = read(text)  # type: ignore[arg-type]
    except sl.InvalidInput:
        return
    assert read(write(value)) == value


@pytest.mark.parametrize(("name", "read", "write"), _readers(), ids=[r[0] for r in _readers()])
@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
def test_hostile_text_is_a_value_or_invalid_input(
    name: str, read: Callable[[str], Any], write: Callable[[Any], str], text: str
) -> None:
    _read_or_refuse(read, write, text)
    _read_or_refuse(read, write, text.encode("utf-8", "surrogatepass"))


@given(st.sampled_from(_readers()), any_text | st.binary(max_size=80))
def test_any_text_is_a_value_or_invalid_input(reader: Any, text: str | bytes) -> None:
    _, read, write = reader
    _read_or_refuse(read, write, text)


@given(st.sampled_from(MESSAGE_SEEDS).flatmap(mutated))
def test_a_mutated_message_is_a_message_or_invalid_input(value: Any) -> None:
    text = json.dumps(value, allow_nan=True)
    _read_or_refuse(message_from_json, message_to_json, text)
    _read_or_refuse(messages_from_json, messages_to_json, f"[{text}]")


@given(st.sampled_from(EVENT_SEEDS).flatmap(mutated))
def test_a_mutated_event_is_an_event_or_invalid_input(value: Any) -> None:
    _read_or_refuse(event_from_json, event_to_json, json.dumps(value, allow_nan=True))


@given(st.lists(st.sampled_from(MESSAGE_SEEDS) | json_like, max_size=6))
def test_a_transcript_of_wrong_kinds_is_messages_or_invalid_input(items: list[Any]) -> None:
    _read_or_refuse(messages_from_json, messages_to_json, json.dumps(items, allow_nan=True))


def test_what_was_written_is_still_read() -> None:
    assert messages_from_json(messages_to_json(MESSAGES)) == MESSAGES
    assert [event_from_json(event_to_json(e)) for e in EVENTS] == EVENTS
    with pytest.raises(sl.InvalidInput, match="not a steadyloop event"):
        event_from_json('{"type": "a_type_from_the_future"}')


def test_reading_a_transcript_takes_linear_time() -> None:
    one = messages_to_json(MESSAGES)[1:-1]

    def read(n: int) -> None:
        messages_from_json("[" + ",".join([one] * n) + "]")

    assert growth(read, 200) < LINEAR_BOUND


def test_refusing_a_long_broken_transcript_takes_linear_time() -> None:
    one = messages_to_json(MESSAGES)[1:-1]

    def refuse(n: int) -> None:
        with pytest.raises(sl.InvalidInput):
            messages_from_json("[" + ",".join([one] * n) + ',{"role": "nobody"}]')

    assert growth(refuse, 200) < LINEAR_BOUND


# ----------------------------------------------------------------------------------------- agent documents


def _spec_or_refused(text: str, format: str) -> None:
    with contextlib.suppress(SpecError):
        parse_spec_text(text, format=format)  # type: ignore[arg-type]


def test_the_seed_document_is_read() -> None:
    assert parse_spec_text(SPEC_TOML).spec.name == "reader"


@given(mutated_text(SPEC_TOML))
def test_a_mutated_agent_file_is_a_spec_or_spec_error(text: str) -> None:
    _spec_or_refused(text, "toml")


@given(st.sampled_from(["toml", "json"]), any_text)
def test_any_text_is_a_spec_or_spec_error(format: str, text: str) -> None:
    _spec_or_refused(text, format)


@pytest.mark.parametrize("format", ["toml", "json"])
@pytest.mark.parametrize(
    "text",
    [
        *HOSTILE_TEXTS,
        "a = " + DEEP_ARRAY,
        "a = " + "{b = " * 10_000 + "1" + "}" * 10_000,
        "name = nan\n",
        "name = inf\n",
        'name = "a\\u0000b"\n',
        "name = '\ud800'\n",
        SPEC_TOML + 'extra = "' + "x" * 1_000_000 + '"\n',
        json.dumps({"name": "reader", "instructions": "x" * 1_000_000}),
        json.dumps({"name": math.nan}, allow_nan=True),
        json.dumps({"name": "reader", "model": {"name": "m", "temperature": math.inf}}, allow_nan=True),
    ],
    ids=range(len(HOSTILE_TEXTS) + 10),
)
def test_a_hostile_agent_file_is_a_spec_or_spec_error(format: str, text: str) -> None:
    _spec_or_refused(text, format)


def test_reading_an_agent_file_takes_linear_time() -> None:
    def read(n: int) -> None:
        notes = "".join(f"# note {i}\n" for i in range(n))
        prompts = "".join(f'[[prompt]]\nid = "p{i}"\ntext = "{"y" * 20}"\n' for i in range(n))
        assert parse_spec_text(notes + SPEC_TOML + prompts).spec.name == "reader"

    assert growth(read, 2_000) < LINEAR_BOUND


@pytest.mark.parametrize("number", ["Infinity", "-Infinity", "NaN"])
def test_a_number_json_has_no_words_for_is_refused_not_written_back_as_null(number: str) -> None:
    # Read as a float, it was written back as null: the transcript did not come back from its own JSON.
    call = '{"id": "c1", "name": "weather", "arguments": {"city": ' + number + "}}"
    message = '{"role": "assistant", "content": "checking", "tool_calls": [' + call + "]}"
    event = '{"type": "message_end", "message": ' + message + "}"
    for read, text in [
        (message_from_json, message),
        (messages_from_json, "[" + message + "]"),
        (event_from_json, event),
    ]:
        with pytest.raises(sl.InvalidInput):
            read(text)
    # The words inside a string are text like any other.
    said = message_from_json('{"role": "user", "content": "' + number + ' is a word here"}')
    assert message_from_json(message_to_json(said)) == said
