""" "The model is reading the prompt" is said only once a request went out: connecting to nothing, and the
backoff before a retry, are no model reading anything."""

from __future__ import annotations

import io
import time

from steadyloop.cli.render import TextRenderer
from steadyloop.events import Failover, Notice, RequestSent, Retry, TurnStart

READING = "· the model is reading the prompt…"


def renderer() -> tuple[TextRenderer, io.StringIO]:
    aux = io.StringIO()
    return TextRenderer(io.StringIO(), aux, show_thinking=False), aux


def later(seconds: float) -> float:
    return time.monotonic() + seconds


def test_no_wait_line_before_a_request_went_out() -> None:
    shown, aux = renderer()
    shown(TurnStart(step=1))
    shown.tick(later(30))
    assert aux.getvalue() == ""


def test_the_wait_line_once_a_request_went_out() -> None:
    shown, aux = renderer()
    shown(TurnStart(step=1))
    shown(RequestSent(endpoint="http://127.0.0.1:8080/v1", model="m", step=1))
    shown.tick(later(1))
    assert aux.getvalue() == ""  # a short wait is not worth a line
    shown.tick(later(3))
    assert aux.getvalue().splitlines() == [READING]


def test_retries_and_hops_wait_again_for_their_own_request() -> None:
    shown, aux = renderer()
    shown(TurnStart(step=1))
    shown(Retry(attempt=1, delay_s=0.5, reason="the connection to 127.0.0.1:8080 broke", step=1))
    shown(Failover(from_endpoint="a", from_model="m", to_endpoint="b", to_model="m", cause="x", step=1))
    shown.tick(later(30))
    assert READING not in aux.getvalue()
    shown(RequestSent(endpoint="b", model="m", step=1))
    shown.tick(later(3))
    assert aux.getvalue().splitlines()[-1] == READING


def test_a_notice_leaves_the_wait_going() -> None:
    shown, aux = renderer()
    shown(TurnStart(step=1))
    shown(RequestSent(endpoint="http://127.0.0.1:8080/v1", model="m", step=1))
    shown(Notice(text="a hook said something", name="hook"))
    shown.tick(later(3))
    assert aux.getvalue().splitlines() == ["· a hook said something", READING]


def test_a_request_outside_a_step_waits_for_nothing() -> None:
    shown, aux = renderer()
    shown(RequestSent(endpoint="http://127.0.0.1:8080/v1", model="m"))  # a side task between runs
    shown.tick(later(30))
    assert aux.getvalue() == ""
