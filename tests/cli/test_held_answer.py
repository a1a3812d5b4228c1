"""The terminal while an answer written from tool results is held until checked: the wait says what it is."""

from __future__ import annotations

import io
import re

from steadyloop.cli.render import TextRenderer
from steadyloop.events import MessageEnd, MessageStart, MessageUpdate, Notice, TurnStart
from steadyloop.messages import AssistantMessage
from steadyloop.run.state import CALL_HELD
from steadyloop.steering import ANSWER_HELD


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def plain(screen: str) -> str:
    """What the terminal shows, without colours and line erasures."""
    return re.sub(r"\x1b\[[0-9;]*[mK]", "", screen)


def held_answer(renderer: TextRenderer, started: float) -> None:
    renderer(TurnStart(step=1))
    renderer._waiting_since = started  # the request went out at this monotonic time
    renderer.tick(started + 3)  # the prompt is read
    renderer(Notice(text=ANSWER_HELD, name="answer_held"))
    renderer.tick(started + 9)  # the answer's tokens arrive, held


def shown(renderer: TextRenderer) -> None:
    message = AssistantMessage(content="It holds a.txt.")
    renderer(MessageStart(message=message))
    renderer(MessageUpdate(delta="It holds a.txt.", kind="text"))
    renderer(MessageEnd(message=message))


def test_piped_the_wait_gets_one_more_line_saying_the_answer_is_written() -> None:
    out, aux = io.StringIO(), io.StringIO()
    renderer = TextRenderer(out, aux, show_thinking=False)
    held_answer(renderer, 100.0)
    shown(renderer)
    lines = aux.getvalue().splitlines()
    assert lines == [
        "· the model is reading the prompt…",
        "· the model is writing the answer, shown once checked against the tool results…",
    ]
    assert "answer_held" not in aux.getvalue() and ANSWER_HELD not in aux.getvalue()
    assert out.getvalue().strip() == "It holds a.txt."


def test_in_a_terminal_the_live_wait_line_changes_what_it_says_and_is_erased() -> None:
    out = aux = Tty()
    renderer = TextRenderer(out, aux, show_thinking=False)
    held_answer(renderer, 100.0)
    screen = plain(aux.getvalue())
    assert "reading the prompt… 3 s" in screen
    assert screen.rstrip().endswith("writing the answer, shown once checked against the tool results… 9 s")
    shown(renderer)
    assert aux.getvalue().endswith("\r\x1b[2KIt holds a.txt.")  # the wait line erased, then the answer


def test_the_next_request_reads_its_prompt_again() -> None:
    out, aux = io.StringIO(), Tty()
    renderer = TextRenderer(out, aux, show_thinking=False)
    held_answer(renderer, 100.0)
    shown(renderer)
    renderer(TurnStart(step=1))
    renderer._waiting_since = 200.0
    renderer.tick(204.0)
    assert plain(aux.getvalue()).endswith("\r· the model is reading the prompt… 4 s")


def test_quiet_shows_no_wait_at_all() -> None:
    out, aux = io.StringIO(), io.StringIO()
    renderer = TextRenderer(out, aux, show_thinking=False, notices=False)
    held_answer(renderer, 100.0)
    shown(renderer)
    assert aux.getvalue() == ""


def test_text_held_as_a_possible_call_turns_the_wait_into_writing() -> None:
    out, aux = io.StringIO(), io.StringIO()
    renderer = TextRenderer(out, aux, show_thinking=False)
    renderer(TurnStart(step=1))
    renderer._waiting_since = 100.0
    renderer.tick(103.0)
    renderer(Notice(text=CALL_HELD, name="call_held"))
    assert aux.getvalue().splitlines() == [
        "· the model is reading the prompt…",
        "· the model is writing, shown once it is clear this is no tool call…",
    ]
    assert CALL_HELD not in aux.getvalue() and out.getvalue() == ""
