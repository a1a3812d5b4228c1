"""Thinking fences: the splitter against a naive reference, under every chunking, plus one test per rule."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.turn.fences import ALL_FENCES, DEFAULT_FENCES, Fence, FenceSplitter, Split, strip_thinking

HARMONY_ANALYSIS = "<|channel|>analysis<|message|>"
HARMONY_FINAL = "<|start|>assistant<|channel|>final<|message|>"

# Tags that overlap on purpose: one opening tag is a prefix of another, a closing tag shared by two fences,
# and framing that starts like a fence. The shipped tables never do this, so the hold-back logic would go
# untested without it.
TRICKY_FENCES = (
    Fence("<t>", "</t>"),
    Fence("<t>x", "!!"),
    Fence("<tt", ""),
    Fence("[[", "</t>"),
)

TABLES: dict[str, tuple[Fence, ...]] = {
    "default": DEFAULT_FENCES,
    "all": ALL_FENCES,
    "none": (),
    "tricky": TRICKY_FENCES,
}


def reference(text: str, fences: Sequence[Fence], start_in_reasoning: bool = False) -> Split:
    """The rules read slowly: one character at a time, the longest tag at each position."""
    opens: dict[str, Fence] = {}
    for fence in fences:
        opens.setdefault(fence.open, fence)
    closes = [f.close for f in fences if f.close]
    any_close = "\0any"
    inside: str | None = any_close if start_in_reasoning and closes else None
    seen = False
    segments: list[tuple[str, bool]] = [("", False)]  # answer text between tags, and whether a tag preceded
    reasoning = ""
    i = 0
    while i < len(text):
        if inside is None:
            active = list(opens) + ([] if seen else closes)
        elif inside == any_close:
            active = closes
        else:
            active = [inside]
        hits = [t for t in active if text.startswith(t, i)]
        if hits:
            tag = max(hits, key=len)
            if inside is not None:
                inside = None
            elif tag in opens:
                inside = opens[tag].close or None
            else:  # a closing tag before any opening one
                reasoning += "".join(s for s, _ in segments)
                segments = []
            seen = True
            segments.append(("", True))
            i += len(tag)
            continue
        if inside is None:
            last, after = segments[-1]
            segments[-1] = (last + text[i], after)
        else:
            reasoning += text[i]
        i += 1
    for k, (segment, after_tag) in enumerate(segments):
        if segment and not segment.isspace():
            if after_tag:
                return Split(segment.lstrip() + "".join(s for s, _ in segments[k + 1 :]), reasoning)
            return Split("".join(s for s, _ in segments), reasoning)
    return Split("" if seen else "".join(s for s, _ in segments), reasoning)


def run(
    chunks: Sequence[str], fences: Sequence[Fence] = DEFAULT_FENCES, start_in_reasoning: bool = False
) -> tuple[FenceSplitter, list[Split]]:
    splitter = FenceSplitter(fences, start_in_reasoning=start_in_reasoning)
    released = [splitter.feed(chunk) for chunk in chunks]
    released.append(splitter.finish())
    return splitter, released


def joined(released: Sequence[Split]) -> Split:
    return Split("".join(s.content for s in released), "".join(s.reasoning for s in released))


def tags_of(fences: Sequence[Fence]) -> list[str]:
    return [t for f in fences for t in (f.open, f.close) if t]


def check(
    text: str, chunks: Sequence[str], fences: Sequence[Fence], start_in_reasoning: bool = False
) -> None:
    assert "".join(chunks) == text
    expected = reference(text, fences, start_in_reasoning)
    splitter, released = run(chunks, fences, start_in_reasoning)
    assert Split(splitter.content, splitter.reasoning) == expected
    assert strip_thinking(text, fences, start_in_reasoning=start_in_reasoning) == expected
    pieces = joined(released)
    assert pieces.reasoning == splitter.reasoning
    assert pieces.content == splitter.moved + splitter.content
    if start_in_reasoning:
        assert splitter.moved == ""


def cut(text: str, points: Sequence[int]) -> list[str]:
    bounds = [0, *sorted(set(points)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


# Text built from whole tags, pieces of tags and plain characters, so that near misses are common.
_VOCAB = sorted(
    {
        *tags_of(ALL_FENCES),
        *tags_of(TRICKY_FENCES),
        *(t[:n] for t in tags_of(ALL_FENCES) for n in (1, 2, 4, len(t) - 1) if 0 < n < len(t)),
        "<|start|>assistant",
        "<|",
        "▷",
        "thi",
        "nk>",
        "s",
        "a",
        "b",
        "é",
        "😀",
        " ",
        "\n",
        "\t",
        "x",
    }
)
texts = st.lists(st.one_of(st.sampled_from(_VOCAB), st.text(max_size=3)), max_size=24).map("".join)


@st.composite
def chunked(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(texts)
    points = draw(st.lists(st.integers(0, len(text)), max_size=12))
    return text, cut(text, points)


@given(case=chunked(), table=st.sampled_from(sorted(TABLES)), start_in_reasoning=st.booleans())
def test_any_chunking_gives_the_reference_result(
    case: tuple[str, list[str]], table: str, start_in_reasoning: bool
) -> None:
    text, chunks = case
    check(text, chunks, TABLES[table], start_in_reasoning)


@given(case=chunked(), table=st.sampled_from(sorted(TABLES)))
def test_only_a_possible_tag_start_is_held_back(case: tuple[str, list[str]], table: str) -> None:
    fences = TABLES[table]
    tags = tags_of(fences)
    splitter = FenceSplitter(fences)
    for chunk in case[1]:
        splitter.feed(chunk)
        held = splitter._held  # white-box: the promise is about what is not yet released
        assert held == "" or any(len(t) > len(held) and t.startswith(held) for t in tags)
        assert splitter._ws == "" or splitter._ws.isspace()


_SMALL = "ab<>/ \n"
_small_tags = st.text(_SMALL, min_size=1, max_size=4)
small_tables = st.lists(
    st.builds(Fence, _small_tags, st.one_of(st.just(""), _small_tags)), min_size=1, max_size=4
).map(tuple)


@given(table=small_tables, data=st.data(), start_in_reasoning=st.booleans())
def test_any_fence_table_and_chunking_gives_the_reference_result(
    table: tuple[Fence, ...], data: st.DataObject, start_in_reasoning: bool
) -> None:
    # Tags from a tiny alphabet overlap in every way: prefixes of each other, shared, whitespace-led.
    pieces = st.one_of(st.sampled_from(tags_of(table)), st.text(_SMALL, max_size=3))
    text = "".join(data.draw(st.lists(pieces, max_size=16)))
    points = data.draw(st.lists(st.integers(0, len(text)), max_size=10))
    check(text, cut(text, points), table, start_in_reasoning)


TRICKY_TEXTS = [
    "<think>abc</think>\n\nHello",
    "\n<think>a<think>b</think>c</think>",
    "ab</think> \n answer",
    "<thi" + "s is not a tag>",
    "x<|start|>assistant<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>final<|message|>ok",
    "◁think▷深い◁/think▷\n答え◁think▷",
    "<t>x!!<tt[[</t></t><t>",
    "  <reasoning>r</reasoning> <thinking>t</thinking>",
]


@pytest.mark.parametrize("text", TRICKY_TEXTS)
@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_split_into_three_pieces(text: str, table: str) -> None:
    fences = TABLES[table]
    for a, b in itertools.combinations_with_replacement(range(len(text) + 1), 2):
        check(text, [text[:a], text[a:b], text[b:]], fences)
    check(text, list(text), fences)
    check(text, list(text), fences, start_in_reasoning=True)


# --- the rules, one at a time ---------------------------------------------------------------------------


def test_fenced_text_is_reasoning_and_released_at_once() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("<think>abc") == Split("", "abc")
    assert splitter.feed("def</think>Answer") == Split("Answer", "def")
    assert splitter.finish() == Split()
    assert (splitter.content, splitter.reasoning) == ("Answer", "abcdef")


def test_a_tag_split_across_chunks_is_recognised() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("Hi <th") == Split("Hi ", "")
    assert splitter.feed("ink>plan</th") == Split("", "plan")
    assert splitter.feed("ink>") == Split()
    assert splitter.feed("done") == Split("done", "")
    assert (splitter.content, splitter.reasoning) == ("Hi done", "plan")


def test_a_near_miss_is_released_as_soon_as_it_stops_looking_like_a_tag() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("a <thi") == Split("a ", "")
    assert splitter.feed("s") == Split("<this", "")
    assert splitter.feed(" <b>") == Split(" <b>", "")
    assert splitter.finish() == Split()


def test_a_partial_tag_at_the_end_of_the_stream_is_text() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("x <thin") == Split("x ", "")
    assert splitter.finish() == Split("<thin", "")
    assert strip_thinking("<think>a</thin") == Split("", "a</thin")


def test_plain_chunks_pass_through_untouched() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("Hello") == Split("Hello", "")
    assert splitter.feed(", world") == Split(", world", "")
    assert splitter.feed("") == Split()


def test_only_the_fences_own_closing_tag_ends_it() -> None:
    assert strip_thinking("<think>a<think>b</think>c") == Split("c", "a<think>b")
    assert strip_thinking("◁think▷use </think> here◁/think▷ok") == Split("ok", "use </think> here")


def test_several_fences_in_one_reply() -> None:
    text = "<think>one</think>\n\nA<think>two</think>B"
    assert strip_thinking(text) == Split("AB", "onetwo")


def test_harmony_served_raw() -> None:
    text = (
        "<|channel|>analysis<|message|>User greets. Reply.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Hello!"
    )
    assert strip_thinking(text, DEFAULT_FENCES) == Split("Hello!", "User greets. Reply.")
    assert strip_thinking(HARMONY_FINAL + "Hi") == Split("Hi", "")
    assert strip_thinking("<|channel|>final<|message|>Hi") == Split("Hi", "")


def test_harmony_second_analysis_message_leaves_no_header() -> None:
    text = f"{HARMONY_ANALYSIS}a<|end|><|start|>assistant{HARMONY_ANALYSIS}b<|end|>{HARMONY_FINAL}c"
    assert strip_thinking(text) == Split("c", "ab")


def test_harmony_commentary_is_left_for_tool_call_recovery() -> None:
    call = (
        '<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>'
    )
    assert strip_thinking(f"{HARMONY_ANALYSIS}plan<|end|>{call}") == Split(call, "plan")


def test_kimi_fence() -> None:
    splitter, released = run(["◁thi", "nk▷思考◁/", "think▷\n答案"])
    assert (splitter.content, splitter.reasoning) == ("答案", "思考")
    assert joined(released) == Split("答案", "思考")


def test_all_fences_adds_tags_a_model_may_quote() -> None:
    text = "<thinking>t</thinking><reasoning>r</reasoning>answer"
    assert strip_thinking(text, DEFAULT_FENCES) == Split(text, "")
    assert strip_thinking(text) == Split("answer", "tr")
    assert set(DEFAULT_FENCES) < set(ALL_FENCES)


def test_no_fences_reads_everything_as_answer() -> None:
    text = "\n<think>a</think>\n"
    splitter, released = run(["\n<th", "ink>a</think>\n"], fences=[])
    assert splitter.content == text
    assert released[0] == Split("\n<th", "")
    assert strip_thinking(text, ()) == Split(text, "")
    assert strip_thinking(text, (), start_in_reasoning=True) == Split(text, "")


def test_cut_off_inside_a_fence_is_never_promoted_to_an_answer() -> None:
    splitter, _ = run(["<think>I should", " say hi"])
    assert (splitter.content, splitter.reasoning) == ("", "I should say hi")
    assert strip_thinking("Sure. <think>more") == Split("Sure. ", "more")
    assert strip_thinking(HARMONY_ANALYSIS + "cut") == Split("", "cut")


def test_orphan_closing_tag_moves_everything_before_it() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("The user") == Split("The user", "")
    assert splitter.feed(" wants X.</thi") == Split(" wants X.", "")
    # The released content comes back as reasoning, and the totals no longer count it as answer.
    assert splitter.feed("nk>\n\nX.") == Split("X.", "The user wants X.")
    assert splitter.finish() == Split()
    assert (splitter.content, splitter.reasoning, splitter.moved) == (
        "X.",
        "The user wants X.",
        "The user wants X.",
    )


def test_orphan_closing_tag_counts_only_as_the_first_tag() -> None:
    assert strip_thinking("<think>a</think>b</think>c") == Split("b</think>c", "a")
    assert strip_thinking("\n◁/think▷x") == Split("x", "\n")


def test_start_in_reasoning_never_releases_the_scratchpad_as_content() -> None:
    splitter = FenceSplitter(start_in_reasoning=True)
    assert splitter.feed("plan") == Split("", "plan")
    assert splitter.feed("</think>\n\nanswer") == Split("answer", "")
    assert (splitter.content, splitter.reasoning, splitter.moved) == ("answer", "plan", "")
    # Whichever closing tag comes first ends it, since the prompt's opening tag is not seen.
    assert strip_thinking("a◁/think▷b", start_in_reasoning=True) == Split("b", "a")
    assert strip_thinking("never closed", start_in_reasoning=True) == Split("", "never closed")


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("\n<think>a</think>\n\nHello", "Hello"),
        ("<think>a</think>\n\n", ""),
        ("\n\nHello", "\n\nHello"),
        ("   ", "   "),
        ("Hello<think>a</think>\n\nWorld", "Hello\n\nWorld"),
        ("Hello\n<think>a</think>", "Hello\n"),
        (f"{HARMONY_FINAL}\n Hi", "Hi"),
    ],
)
def test_whitespace_before_the_answer(text: str, content: str) -> None:
    assert strip_thinking(text).content == content
    check(text, list(text), DEFAULT_FENCES)


def test_leading_whitespace_is_held_until_its_role_is_known() -> None:
    splitter = FenceSplitter()
    assert splitter.feed("\n") == Split()
    assert splitter.feed(" ") == Split()
    assert splitter.feed("Hi") == Split("\n Hi", "")
    splitter = FenceSplitter()
    assert splitter.feed("\n") == Split()
    assert splitter.finish() == Split("\n", "")


def test_framing_fence_is_dropped() -> None:
    fences = [Fence("[[answer]]", "", "framing"), *DEFAULT_FENCES]
    assert strip_thinking("<think>a</think>[[answer]] b", fences) == Split("b", "a")


def test_fence_needs_an_opening_tag() -> None:
    with pytest.raises(InvalidInput):
        Fence("", "</x>")


def test_values_are_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        DEFAULT_FENCES[0].open = "<x>"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        Split().content = "x"  # type: ignore[misc]
