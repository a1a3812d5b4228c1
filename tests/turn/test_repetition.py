"""A reply that falls into a loop: seen as it streams, and stopped there."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, Notice
from steadyloop.loop import LoopResult, run_agent_loop
from steadyloop.messages import AssistantMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import text_chunks, tool_call_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn.repetition import (
    EVERY,
    MOST_PERIOD,
    SHAPE_MOST_PERIOD,
    SHAPE_WINDOW,
    SHAPE_WORDS,
    WINDOW,
    ArgumentsWatch,
    RepetitionWatch,
    without_loop,
)
from steadyloop.wire.endpoints import Endpoint

from ..edges._edges import LINEAR_BOUND, growth

UNO = "Each player is dealt seven cards. The first player to play all their cards wins the round. "
README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
ORDINALS = ("one hundred-thirty-fourth", "one hundred-thirty-fifth", "one hundred-thirty-eighth")


def passes(count: int, first: int = 701) -> str:
    """The shape the 1.5B model fell into, counting on: a sentence per pass, three ordinals in turn."""
    return "".join(
        f"The ball is then passed to the {ORDINALS[i % 3]} person, who has the number {first + 2 * i} on "
        "their shirt. "
        for i in range(count)
    )


def fed(text: str, piece: int = 7) -> int | None:
    watch = RepetitionWatch()
    found = None
    for start in range(0, len(text), piece):
        found = watch.feed(text[start : start + piece])
    return found


def test_a_sentence_said_again_and_again_is_a_loop_of_its_length() -> None:
    opening = "Uno is a card game for two to ten players.\n\n"
    assert fed(opening + UNO * 30) == len(UNO)
    assert fed("\n" * 3000) == 1  # a model that writes nothing but line breaks
    assert fed("1. Draw a card.\n" * 200, piece=1) == len("1. Draw a card.\n")


def test_sentences_whose_numbers_alone_count_on_are_a_loop() -> None:
    opening = "To find the winner, follow the ball round the circle.\n\n"
    period = fed(opening + passes(80))
    assert period is not None and period == len(passes(3, first=1))
    # Found within the shape's window and a copy of the piece, not at the end of the text.
    watch, seen = RepetitionWatch(), 0
    for line in (opening + passes(400)).split(" "):
        seen += len(line) + 1
        if watch.feed(line + " "):
            break
    assert watch.period is not None and seen < len(opening) + SHAPE_WINDOW + 2 * SHAPE_MOST_PERIOD


def test_counted_rows_and_lines_of_few_words_are_answers() -> None:
    primes = [p for p in range(2, 4000) if all(p % d for d in range(2, int(p**0.5) + 1))][:500]
    assert fed("".join(f"The {i}th prime is {p}. " for i, p in enumerate(primes, 1))) is None
    assert fed("".join(f"- item {i}: {i * 3} units at {i}.50 each\n" for i in range(600))) is None
    few = " ".join(["word"] * (SHAPE_WORDS - 2))
    assert fed("".join(f"{few} {i}. " for i in range(1000))) is None


def test_a_loop_shorter_than_the_window_is_not_one_yet() -> None:
    assert fed(UNO * (WINDOW // len(UNO) - 1)) is None


def test_prose_tables_and_code_are_not_loops() -> None:
    assert fed(README) is None
    table = "".join(f"| row {i} | {i * i} | {'yes' if i % 2 else 'no'} |\n" for i in range(400))
    assert fed("| n | square | odd |\n|---|---|---|\n" + table) is None
    code = "".join(f"    values[{i}] = compute({i}, scale)\n" for i in range(300))
    assert fed(code) is None


def test_a_piece_longer_than_the_most_is_not_a_loop() -> None:
    rng = random.Random(3)
    page = "".join(rng.choice("abcdefgh ") for _ in range(MOST_PERIOD + 50))
    assert fed(page * 6) is None


@given(st.text(min_size=1, max_size=MOST_PERIOD), st.integers(min_value=1, max_value=300))
def test_any_piece_repeated_past_the_window_is_found(piece: str, chunk: int) -> None:
    times = (WINDOW + 2 * EVERY) // len(piece) + 2 * MOST_PERIOD // len(piece) + 2
    period = fed(piece * times, chunk)
    assert period is not None and len(piece) % period == 0


@given(st.lists(st.text(max_size=400), max_size=40))
def test_watching_any_text_is_total(pieces: list[str]) -> None:
    watch = RepetitionWatch()
    for piece in pieces:
        found = watch.feed(piece)
        assert found is None or 0 < found <= max(MOST_PERIOD, SHAPE_MOST_PERIOD)


def test_watching_is_linear_in_the_text() -> None:
    rng = random.Random(7)
    for letters in ("abcdefghij klmnop\n", "abcdefghij klmnop\n0123456789"):
        text = "".join(rng.choice(letters) for _ in range(1_000_000))
        started = time.perf_counter()
        assert fed(text, piece=5) is None
        assert time.perf_counter() - started < 5.0


@given(
    st.lists(
        st.sampled_from(["pass", "ball", "person", "shirt", "number", "circle", "to", "the"]),
        min_size=SHAPE_WORDS,
        max_size=30,
    ),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=1, max_value=300),
)
def test_any_sentence_of_enough_words_counting_on_is_found(words: list[str], start: int, chunk: int) -> None:
    sentence = " ".join(words)
    text = "".join(f"{sentence} {start + i}. " for i in range(SHAPE_WINDOW // len(sentence) + 40))
    period = fed(text, chunk)
    piece = len(sentence) + len(" 0. ")  # the numbers read as one digit
    assert period is not None and (period % piece == 0 or piece % period == 0)
    assert text.startswith(without_loop(text))


async def stopped_run(pieces: list[str], question: str, delay: float) -> tuple[LoopResult, list[Notice]]:
    """``pieces`` streamed as one reply that would go on for ever (the server stalls after them and never
    finishes), so only the watch can end the run; the run's result and its ``repetition`` notices."""
    reply = Reply.stream(text_chunks(pieces), stall_after=len(pieces) + 1, delay=delay)
    events: list[Event] = []
    async with ScriptedServer(reply) as server:
        running = run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content=question)],
            on_event=events.append,
        )
        result = await asyncio.wait_for(running, timeout=60)
    return result, [e for e in events if isinstance(e, Notice) and e.name == "repetition"]


async def test_a_looping_answer_is_stopped_and_the_run_ends_with_what_it_said() -> None:
    pieces = ["Uno is a card game. ", *([UNO] * 40)]
    result, said = await stopped_run(pieces, "What are the rules of Uno?", delay=0.005)
    assert result.turn.finish_reason == "repetition"
    assert result.turn.content.startswith("Uno is a card game. " + UNO)
    assert len(result.turn.content) < len("".join(pieces))  # stopped once the loop was seen, not at its end
    assert len(said) == 1 and f"one piece of {len(UNO)}" in said[0].text


async def test_an_answer_counting_on_in_one_shape_is_stopped() -> None:
    sentences = passes(600)
    pieces = ["Let us follow the ball. ", *(sentences[i : i + 40] for i in range(0, len(sentences), 40))]
    result, said = await stopped_run(pieces, "Who wins the ball game?", delay=0.001)
    assert result.turn.finish_reason == "repetition"
    assert len(result.turn.content) < SHAPE_WINDOW + 3 * SHAPE_MOST_PERIOD  # of 62,650 characters
    assert len(said) == 1 and "numbers" in said[0].text


async def test_a_long_answer_that_does_not_loop_is_read_to_its_end() -> None:
    answer = README[:6000]
    async with ScriptedServer(Reply.stream(text_chunks(answer))) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="What does the README say?")],
        )
    assert result.turn.content == answer and result.turn.finish_reason == "stop"


def test_a_loop_is_written_once_to_the_end_of_its_line_or_sentence() -> None:
    listing = "It holds:\n- CHANGES.rst\n- docs/api.rst\n" + "- docs/async-await.rst\n" * 60 + "- docs/async"
    assert without_loop(listing) == "It holds:\n- CHANGES.rst\n- docs/api.rst\n- docs/async-await.rst"
    assert without_loop("Rules. " + UNO * 20) == "Rules. " + UNO.strip()
    assert without_loop(README) == README  # no loop: unchanged
    assert without_loop("") == ""
    counted = "The winner is found by passing the ball. " + passes(120)
    assert without_loop(counted) == "The winner is found by passing the ball. " + passes(3).strip()


@given(st.text(max_size=50), st.text(min_size=1, max_size=MOST_PERIOD), st.text(max_size=30))
def test_a_loop_written_once_is_a_prefix_of_the_text(before: str, piece: str, after: str) -> None:
    text = before + piece * (WINDOW // len(piece) + 3) + after
    assert text.startswith(without_loop(text))


def test_writing_a_loop_once_is_linear() -> None:
    assert growth(lambda n: without_loop("x" * n), 20_000) < LINEAR_BOUND
    assert growth(lambda n: without_loop("ab" * n + "c"), 20_000) < LINEAR_BOUND


KFC = "我想在肯德基买10个麦辣鸡腿堡，50杯可口可乐，30个油炸鸡翅，90根薯条"


def test_a_calls_arguments_loop_over_an_answers_window_in_whole_values_and_four_inside_a_string() -> None:
    """The watch on a call's arguments: a file's rows that repeat for less than four windows, and rows whose
    numbers alone count on, are data, not a loop; values said again and again are one."""

    def fed_to(text: str) -> int | None:
        watch, found = ArgumentsWatch(), None
        for start in range(0, len(text), 50):
            found = watch.feed(text[start : start + 50])
        return found

    row = "0,0,0,0,0,0,0,0\\n"  # a file's line inside a JSON string: its newline escaped
    assert fed_to('{"path": "zeros.csv", "text": "' + row * (3 * WINDOW // len(row))) is None
    assert fed_to('{"path": "zeros.csv", "text": "' + row * (5 * WINDOW // len(row))) == len(row)
    quoted = 'she said \\"again\\" and '  # quotes inside the string are escaped
    assert fed_to('{"text": "' + quoted * (3 * WINDOW // len(quoted))) is None
    item = '"麦辣鸡腿堡", '
    assert fed_to('{"items": [' + item * ((WINDOW + 2 * EVERY) // len(item) + 10)) == len(item)
    assert fed_to('{"text": "' + passes(600)) is None
    assert fed_to('{"rows": [' + "".join(f'{{"id": {i}, "name": "item {i}"}}, ' for i in range(500))) is None


@given(st.lists(st.text(max_size=30), max_size=300))
def test_watching_any_arguments_is_total(pieces: list[str]) -> None:
    watch = ArgumentsWatch()
    for piece in pieces:
        found = watch.feed(piece)
        assert found is None or found > 0


def test_watching_arguments_is_linear() -> None:
    def watched(n: int) -> None:
        watch = ArgumentsWatch()
        for _ in range(n):
            watch.feed('ab\\"cd ')

    assert growth(watched, 20_000) < LINEAR_BOUND


async def test_a_call_whose_arguments_loop_is_stopped_and_not_run() -> None:
    """As the 1.5B model streamed it through llama-server for 800 s, until the window was full: the list
    of items said one burger's name again and again. Stopped once the loop is seen; the call is not run on
    arguments the loop cut (nothing is healed), and the model is told so."""
    ordered: list[dict[str, object]] = []

    @tool
    def order(restaurant: str, items: list[str], quantities: list[int]) -> str:
        """Place a food order."""
        ordered.append({"restaurant": restaurant, "items": items})
        return "ordered"

    looping = '{"restaurant": "肯德基", "items": [' + '"麦辣鸡腿堡", ' * 1200
    chunks = tool_call_chunks(
        [{"name": "order", "arguments": looping}], split_arguments_every=8, style="llamacpp", finish=None
    )
    stalled = Reply.stream(chunks, stall_after=len(chunks), delay=0.0005)
    events: list[Event] = []
    async with ScriptedServer(stalled, Reply.stream(text_chunks("I could not place the order."))) as server:
        result = await asyncio.wait_for(
            run_agent_loop(
                Endpoint(server.base_url),
                ModelParams(model="m"),
                messages=[UserMessage(content=KFC)],
                tools=[order],
                on_event=events.append,
            ),
            timeout=60,
        )
        told = server.chat_requests[1].json
    assert ordered == []
    said = [e for e in events if isinstance(e, Notice) and e.name == "repetition"]
    assert len(said) == 1 and "one piece of" in said[0].text
    first = next(m for m in result.messages if isinstance(m, AssistantMessage))
    assert first.tool_calls[0].arguments == {}
    raw = first.tool_calls[0].raw_arguments or ""
    assert raw.startswith('{"restaurant": "肯德基"') and len(raw) < WINDOW + 2 * MOST_PERIOD + EVERY
    assert told is not None
    result_text = str(told["messages"][-1]["content"])
    assert told["messages"][-1]["role"] == "tool" and "repeated itself" in result_text
    assert result.turn.content == "I could not place the order."
