"""A piped run says the model is still reading the prompt at least every eight seconds, with the seconds."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.render import TextRenderer
from steadyloop.events import TurnStart


def _waiting(aux: io.StringIO, since: float) -> TextRenderer:
    renderer = TextRenderer(io.StringIO(), aux, show_thinking=False)
    renderer(TurnStart(step=1))
    renderer._waiting_since = since  # the request went out at this monotonic time
    return renderer


def test_a_long_prompt_read_is_said_again_with_its_seconds() -> None:
    aux = io.StringIO()
    renderer = _waiting(aux, 100.0)
    for at in (101.0, 102.5, 105.0, 109.5, 110.0, 117.0):
        renderer.tick(at)
    assert aux.getvalue().splitlines() == [
        "· the model is reading the prompt…",
        "· the model is reading the prompt… 10 s",
        "· the model is reading the prompt… 17 s",
    ]


@given(st.lists(st.floats(0.2, 1.2), min_size=1, max_size=200))
def test_ticks_about_once_a_second_never_leave_eight_seconds_without_a_line(gaps: list[float]) -> None:
    aux = io.StringIO()
    renderer = _waiting(aux, 0.0)
    at, last_line, lines = 0.0, 0.0, 0
    for gap in gaps:
        at += gap
        renderer.tick(at)
        now_lines = len(aux.getvalue().splitlines())
        if now_lines > lines:
            lines, last_line = now_lines, at
        assert at - last_line <= 8.2  # the repeat interval plus one tick
