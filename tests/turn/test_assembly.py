"""StreamAssembler, sans I/O: every server quirk as a list of chunks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.turn.assembly import StreamAssembler, usage_from


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}], **extra}


def call(
    index: int | None = None, id: str | None = None, name: str | None = None, args: Any = None
) -> dict[str, Any]:
    fragment: dict[str, Any] = {"function": {"name": name, "arguments": args}, "id": id, "type": "function"}
    if index is not None:
        fragment["index"] = index
    return delta(tool_calls=[fragment])


def run(chunks: list[dict[str, Any]], **options: Any) -> Any:
    out: list[str] = []
    thinking: list[str] = []
    assembler = StreamAssembler(on_output=out.append, on_thinking=thinking.append, **options)
    for chunk in chunks:
        assembler.feed(chunk)
    turn = assembler.finish()
    return turn, out, thinking, assembler


def test_the_role_opener_is_not_output() -> None:
    assembler = StreamAssembler()
    assembler.feed(delta(role="assistant", content=None))
    assert not assembler.produced
    assembler.feed(delta(content="Hi"))
    assert assembler.produced


def test_content_streams_to_on_output_and_finish_reason_is_kept() -> None:
    turn, out, _, _ = run(
        [delta(role="assistant", content=None), delta(content="Hel"), delta(content="lo"), finish("stop")]
    )
    assert turn.content == "Hello" and out == ["Hel", "lo"] and turn.finish_reason == "stop"


def test_finish_reason_is_empty_when_the_server_never_says() -> None:
    turn, *_ = run([delta(content="x")])
    assert turn.finish_reason == ""


def test_reasoning_from_reasoning_content_and_reasoning_fields() -> None:
    turn, out, thinking, assembler = run(
        [delta(reasoning_content="a"), delta(reasoning="b"), delta(content="c")]
    )
    assert turn.reasoning == "ab" and turn.content == "c" and thinking == ["a", "b"] and out == ["c"]
    assert assembler.produced


def test_a_think_fence_split_across_chunks_goes_to_reasoning() -> None:
    turn, out, thinking, _ = run(
        [delta(content="<th"), delta(content="ink>plan</thi"), delta(content="nk>\n\nAnswer")]
    )
    assert turn.content == "Answer" and turn.reasoning == "plan"
    assert "".join(out) == "Answer" and "".join(thinking) == "plan"


def test_a_reply_cut_off_inside_a_fence_has_empty_content() -> None:
    turn, out, _, _ = run([delta(content="<think>still deliberating"), finish("length")])
    assert turn.content == "" and turn.reasoning == "still deliberating" and out == []


def test_start_in_reasoning_keeps_the_scratchpad_from_on_output() -> None:
    turn, out, _, _ = run([delta(content="hmm</think>Yes")], start_in_reasoning=True)
    assert turn.content == "Yes" and turn.reasoning == "hmm" and out == ["Yes"]


def test_empty_fences_read_everything_as_answer() -> None:
    turn, *_ = run([delta(content="<think>x</think>y")], fences=())
    assert turn.content == "<think>x</think>y"


def test_a_tool_call_from_fragments_without_name() -> None:
    turn, *_ = run(
        [
            call(0, "call_a", "get_weather", ""),
            call(0, None, None, '{"ci'),
            call(0, None, None, 'ty": "Paris"}'),
            finish("tool_calls"),
        ]
    )
    (only,) = turn.tool_calls
    assert only.id == "call_a" and only.name == "get_weather" and only.arguments == {"city": "Paris"}
    assert only.raw_arguments == '{"city": "Paris"}'


def test_null_fields_and_a_first_fragment_with_empty_arguments() -> None:
    turn, *_ = run([call(0, "c1", "f", None), call(0, None, None, None), call(0, None, None, '{"a": 1}')])
    assert turn.tool_calls[0].arguments == {"a": 1}


def test_every_call_at_index_zero_a_new_id_is_a_new_call() -> None:
    turn, *_ = run(
        [
            call(0, "c1", "a", '{"x": 1}'),
            call(0, "c2", "b", '{"y"'),
            call(0, None, None, ": 2}"),
        ]
    )
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("c1", "a", {"x": 1}),
        ("c2", "b", {"y": 2}),
    ]


def test_calls_with_no_index_at_all() -> None:
    turn, *_ = run(
        [call(None, "c1", "a", '{"x":'), call(None, None, None, "1}"), call(None, "c2", "b", "{}")]
    )
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("a", {"x": 1}), ("b", {})]


def test_a_repeated_id_on_every_fragment_continues_the_call() -> None:
    turn, *_ = run([call(0, "c1", "a", '{"x":'), call(0, "c1", None, "1}")])
    assert len(turn.tool_calls) == 1 and turn.tool_calls[0].arguments == {"x": 1}


def test_an_empty_object_opening_the_arguments_is_dropped() -> None:
    turn, *_ = run([call(0, "c1", "a", "{}"), call(0, None, None, '{"q": "z"}')])
    assert turn.tool_calls[0].arguments == {"q": "z"}


def test_two_objects_concatenated_into_one_arguments_string() -> None:
    turn, *_ = run([call(0, "c1", "a", '{"q": 1}{"q": 1}')])
    assert turn.tool_calls[0].arguments == {"q": 1}


def test_arguments_sent_already_parsed() -> None:
    turn, *_ = run([call(0, "c1", "a", {"q": 2})])
    assert turn.tool_calls[0].arguments == {"q": 2}


def test_unreadable_arguments_become_empty_with_the_raw_text_kept() -> None:
    turn, *_ = run([call(0, "c1", "a", "not json at all"), finish("tool_calls")])
    assert turn.tool_calls[0].arguments == {} and turn.tool_calls[0].raw_arguments == "not json at all"


def test_arguments_cut_at_the_ceiling_are_not_healed() -> None:
    turn, *_ = run([call(0, "c1", "a", '{"path": "/very/lo'), finish("length")])
    assert turn.tool_calls[0].arguments == {} and turn.finish_reason == "length"


def test_a_tool_call_fragment_is_active_but_not_produced() -> None:
    # Nothing was shown and nothing ran: a failure after a bare header, or after streamed arguments,
    # leaves the request free to be sent again.
    assembler = StreamAssembler()
    assembler.feed(call(0, "c1", "a", ""))
    assembler.feed(call(0, None, None, '{"x": 1}'))
    assert assembler.active
    assert not assembler.produced
    assembler.feed(delta(content="done"))
    assert assembler.produced


def test_missing_id_gets_a_stable_one() -> None:
    turn, *_ = run([call(0, None, "a", "{}")])
    assert turn.tool_calls[0].id == "call_0"


def test_usage_from_openai_usage_with_details() -> None:
    usage = usage_from(
        {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 64},
            "completion_tokens_details": {"reasoning_tokens": 7},
        },
        None,
    )
    assert (usage.prompt_tokens, usage.cached_tokens, usage.uncached_tokens, usage.reasoning_tokens) == (
        100,
        64,
        36,
        7,
    )
    assert usage.prompt_ms is None and usage.draft_total is None


def test_usage_without_a_cache_count_leaves_uncached_unknown() -> None:
    usage = usage_from({"prompt_tokens": 10, "completion_tokens": 2}, None)
    assert usage.cached_tokens == 0 and usage.uncached_tokens is None and usage.total_tokens == 12


def test_llamacpp_timings_stand_in_for_missing_counts() -> None:
    timings = {
        "cache_n": 30,
        "prompt_n": 12,
        "prompt_ms": 50.0,
        "prompt_per_second": 240.0,
        "predicted_n": 8,
        "predicted_ms": 160.0,
        "predicted_per_second": 50.0,
        "draft_n": 6,
        "draft_n_accepted": 4,
    }
    usage = usage_from(None, timings)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.uncached_tokens) == (
        42,
        8,
        30,
        12,
    )
    assert (usage.prompt_ms, usage.tokens_per_second, usage.draft_total, usage.draft_accepted) == (
        50.0,
        50.0,
        6,
        4,
    )


def test_usage_and_timings_from_the_final_chunk() -> None:
    turn, *_ = run(
        [
            delta(content="x"),
            finish("stop", timings={"prompt_ms": 1.0}),
            {
                "choices": [],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                "timings": {"prompt_ms": 2.0, "cache_n": 3},
            },
        ]
    )
    assert turn.usage.prompt_tokens == 5 and turn.usage.prompt_ms == 2.0 and turn.usage.cached_tokens == 3


def test_an_error_event_in_the_stream_is_noticed() -> None:
    assembler = StreamAssembler()
    assembler.feed({"error": {"message": "boom", "code": 500}})
    assert assembler.error is not None


_batch_chunks = st.sampled_from(
    [
        {"choices": [{"index": 0, "delta": {"content": "plain "}}]},
        {"choices": [{"index": 0, "delta": {"content": "<think>mull"}}]},
        {"choices": [{"index": 0, "delta": {"content": "ing</thi"}}]},
        {"choices": [{"index": 0, "delta": {"content": "nk>said"}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "field "}}]},
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f"}}]}}
            ]
        },
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x":'}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
    ]
)


@given(st.lists(_batch_chunks, max_size=14), st.data())
def test_feeding_a_read_at_once_tells_the_same_text_as_feeding_chunk_by_chunk(
    chunks: list[dict[str, Any]], data: st.DataObject
) -> None:
    def run(batches: list[list[dict[str, Any]]]) -> tuple[str, str, Any]:
        told: dict[str, list[str]] = {"out": [], "think": []}
        assembler = StreamAssembler(on_output=told["out"].append, on_thinking=told["think"].append)
        for batch in batches:
            assembler.feed_many(batch)
        turn = assembler.finish()
        return "".join(told["out"]), "".join(told["think"]), turn

    cuts = sorted(data.draw(st.lists(st.integers(0, len(chunks)), max_size=5)))
    batches = [chunks[a:b] for a, b in zip([0, *cuts], [*cuts, len(chunks)], strict=True)]
    one_by_one = run([[c] for c in chunks])
    batched, whole = run(batches), run([chunks])
    assert batched[2] == whole[2] == one_by_one[2]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    close, opening = text.find("</think>"), text.find("<think>")
    stray_close = close >= 0 and (opening < 0 or close < opening)
    if not stray_close:
        # Answer text told before a stray closing tag cannot be taken back once told in an earlier read,
        # so only there may what was told differ; the turn itself never does.
        assert batched[:2] == whole[:2] == one_by_one[:2]
        assert one_by_one[0] == one_by_one[2].content


def test_an_error_chunk_that_also_carries_choices_is_an_error_not_a_blank_reply() -> None:
    # A router's in-stream error (OpenRouter's documented shape): the error beside a choice with an empty
    # delta, finishing with "error" or not at all.
    error = {"code": "server_error", "message": "Provider disconnected unexpectedly"}
    for finish in ("error", None):
        chunk = {"error": error, "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": finish}]}
        fed = StreamAssembler()
        fed.feed(chunk)
        batched = StreamAssembler()
        batched.feed_many([delta(content="Hel"), chunk, delta(content="lo")])
        for assembler in (fed, batched):
            assert assembler.error == chunk


def test_a_batch_tells_its_text_once_and_stops_at_an_error() -> None:
    told: list[str] = []
    assembler = StreamAssembler(on_output=told.append)
    assembler.feed_many(
        [delta(content="a"), delta(content="b"), {"error": {"message": "x"}}, delta(content="c")]
    )
    assert told == ["ab"]
    assert assembler.error == {"error": {"message": "x"}}


# Shapes nobody promised ------------------------------------------------------------------------------

_WRONG_SHAPES: list[Any] = [
    None,
    5,
    "data",
    [1, 2],
    {"choices": {"0": {"delta": {"content": "x"}}}},
    {"choices": ["x"]},
    {"choices": [{"delta": "hello"}]},
    {"choices": [{"delta": {"content": 5}}]},
    {"choices": [{"delta": {"content": {"text": "x"}}}]},
    {"choices": [{"delta": {"reasoning_content": ["x"]}}]},
    {"choices": [{"delta": {"tool_calls": 5}}]},
    {"choices": [{"delta": {"tool_calls": [5, "x", None]}}]},
    {"choices": [{"delta": {"tool_calls": [{"function": "f"}]}}]},
    {"choices": [{"delta": {"tool_calls": [{"id": {"a": 1}, "function": {"name": ["f"]}}]}}]},
    {"choices": [{"delta": {}, "finish_reason": 7}]},
    {"choices": [], "usage": "lots"},
    {"choices": [], "usage": {"prompt_tokens": float("nan"), "completion_tokens": 1e400}},
    {"choices": [{"delta": {}}], "timings": [1, 2]},
    {"choices": [], "usage": {"prompt_tokens": -5, "completion_tokens": True, "total_tokens": 1e300}},
]


def test_every_wrong_shape_is_skipped_and_counted_and_the_turn_is_whole() -> None:
    out: list[str] = []
    assembler = StreamAssembler(on_output=out.append)
    assembler.feed(delta(content="Hello"))
    for chunk in _WRONG_SHAPES:
        assembler.feed(chunk)
        assembler.feed_many([chunk, delta(content="")])
    assembler.feed(delta(content=" world"))
    assembler.feed(finish("stop"))
    turn = assembler.finish()
    assert turn.content == "Hello world" and "".join(out) == "Hello world"
    assert turn.finish_reason == "stop"
    assert turn.usage.prompt_tokens >= 0 and turn.usage.completion_tokens >= 0
    assert sum(assembler.skipped.values()) >= 10
    notice = assembler.skipped_notice()
    assert "content that is not text" in notice and "events that are not JSON objects" in notice


def test_what_is_kept_is_coerced_to_its_declared_type() -> None:
    turn, *_ = run(
        [
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": 42, "function": {"name": "f"}}]}}]},
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]}}]},
            {
                "choices": [
                    {"delta": {"content": [{"type": "text", "text": "pa"}, {"type": "text", "text": "rt"}]}}
                ]
            },
            {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"prompt_tokens": 12.0, "completion_tokens": 3}},
        ]
    )
    call_ = turn.tool_calls[0]
    assert (call_.id, call_.name, call_.arguments) == ("42", "f", {"a": 1})
    assert turn.content == "part"
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (12, 3)
    assert isinstance(turn.finish_reason, str)


def test_nan_and_infinite_counts_read_as_unreported() -> None:
    usage = usage_from(
        {"prompt_tokens": float("nan"), "completion_tokens": float("inf")}, {"prompt_ms": float("nan")}
    )
    assert (usage.prompt_tokens, usage.completion_tokens, usage.prompt_ms) == (0, 0, None)


def test_a_headless_close_tag_shows_nothing_twice() -> None:
    # The template opened the thinking block, so the reply starts inside it; the first chunks were told as
    # answer before the closing tag showed what they were. They are not told again as reasoning.
    out: list[str] = []
    thinking: list[str] = []
    assembler = StreamAssembler(on_output=out.append, on_thinking=thinking.append)
    for piece in ["Let me ", "think.", "</think>", "\n\nThe answer is 4."]:
        assembler.feed(delta(content=piece))
    turn = assembler.finish()
    assert (turn.content, turn.reasoning) == ("The answer is 4.", "Let me think.")
    assert "".join(out) == "Let me think.The answer is 4."
    assert "".join(thinking) == ""
    assert assembler.opened_before_reply


def test_a_guessed_reasoning_start_without_a_closing_tag_was_answer() -> None:
    thinking: list[str] = []
    assembler = StreamAssembler(on_thinking=thinking.append, guessed_reasoning_start=True)
    assembler.feed(delta(content="Just the answer."))
    turn = assembler.finish()
    assert (turn.content, turn.reasoning) == ("Just the answer.", "")
    assert assembler.guess_was_wrong
    guessed = StreamAssembler(guessed_reasoning_start=True)
    guessed.feed(delta(content="hmm</think>Answer"))
    assert guessed.finish().content == "Answer" and not guessed.guess_was_wrong


_CAPTURES = [
    Path(__file__).resolve().parents[1] / "data" / "captures",
    Path(__file__).resolve().parents[3] / "shared" / "llm" / "captures",
]


def _real_chunks() -> list[Any]:
    chunks: list[Any] = []
    for folder in _CAPTURES:
        for path in sorted(folder.rglob("*.response.txt"))[:40]:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("data: {"):
                    try:
                        chunks.append(json.loads(line[6:]))
                    except ValueError:
                        continue
    return chunks or [delta(content="x")]


_REAL = _real_chunks()
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)
_KEYS = st.sampled_from(
    [
        "choices",
        "delta",
        "content",
        "reasoning_content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "id",
        "index",
        "finish_reason",
        "usage",
        "timings",
        "prompt_tokens",
        "error",
        "0",
    ]
)


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """A real chunk with some of its parts swapped for arbitrary JSON values."""
    if depth > 4 or data.draw(st.integers(0, 5)) == 0:
        return data.draw(_JSON)
    if isinstance(value, dict):
        out = {k: _mutate(v, data, depth + 1) for k, v in value.items()}
        if data.draw(st.booleans()):
            out[data.draw(_KEYS)] = data.draw(_JSON)
        return out
    if isinstance(value, list):
        return [_mutate(v, data, depth + 1) for v in value]
    return value


@given(st.data())
def test_mutated_real_chunks_never_raise_and_tell_nothing_twice(data: st.DataObject) -> None:
    chunks = [_mutate(data.draw(st.sampled_from(_REAL)), data) for _ in range(data.draw(st.integers(1, 12)))]
    chunks += data.draw(st.lists(_JSON, max_size=3))
    out: list[str] = []
    thinking: list[str] = []
    assembler = StreamAssembler(on_output=out.append, on_thinking=thinking.append)
    if data.draw(st.booleans()):
        assembler.feed_many(chunks)
    else:
        for chunk in chunks:
            assembler.feed(chunk)
    turn = assembler.finish()
    assert isinstance(turn.content, str) and isinstance(turn.reasoning, str)
    assert isinstance(turn.finish_reason, str)
    for c in turn.tool_calls:
        assert isinstance(c.id, str) and isinstance(c.name, str) and isinstance(c.arguments, dict)
    for count in (turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.usage.total_tokens):
        assert isinstance(count, int) and count >= 0
    # Every character told was told once: as answer, or as reasoning.
    told = len("".join(out)) + len("".join(thinking))
    assert told <= len(turn.content) + len(turn.reasoning)


@pytest.mark.parametrize("batched", [False, True])
def test_the_replys_id_and_model_are_read_off_the_chunks_however_they_are_batched(batched: bool) -> None:
    chunks = stream_of("Hello there.", usage=usage_chunk(10, 3), model="gpt-4o-2024-08-06", id="chatcmpl-9x")
    assembler = StreamAssembler()
    if batched:
        assembler.feed_many(chunks)
    else:
        for chunk in chunks:
            assembler.feed(chunk)
    turn = assembler.finish()
    assert (turn.response_id, turn.response_model) == ("chatcmpl-9x", "gpt-4o-2024-08-06")


def test_a_reply_without_an_id_or_model_has_none() -> None:
    assembler = StreamAssembler()
    assembler.feed_many([{"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]}])
    turn = assembler.finish()
    assert (turn.response_id, turn.response_model) == ("", "")
