"""``Reconnects`` (sans-I/O): pauses that grow, bounded and jittered, and one line per change of state
(lost, refused and why, back), never one per attempt."""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.sessions import ConnectFailure, Reconnects

LOST = ConnectFailure("server closed the connection unexpectedly", refused=False)
REFUSED = ConnectFailure('FATAL:  password authentication failed for user "app"', refused=True)


def test_a_refusal_that_lasts_is_one_line_however_many_attempts() -> None:
    reconnects = Reconnects("the listener")
    lines = [reconnects.failed(LOST, 0.0)]
    lines += [reconnects.failed(REFUSED, float(t)) for t in range(1, 200)]
    said = [line for line in lines if line is not None]
    assert [line.level for line in said] == [logging.WARNING, logging.WARNING]
    assert said[0].text.startswith("the listener lost its connection: server closed")
    assert "refuses the connection: FATAL:  password authentication failed" in said[1].text
    back = reconnects.connected(250.0)
    assert back is not None and back.level == logging.INFO
    assert back.text == "the listener is connected again after 250.0 s and 200 failed attempts"
    assert reconnects.connected(251.0) is None  # already up: nothing to say


def test_a_new_reason_or_a_refusal_that_turns_into_an_outage_is_a_new_line() -> None:
    reconnects = Reconnects("the listener")
    other = ConnectFailure('FATAL:  role "app" is not permitted to log in', refused=True)
    assert reconnects.failed(REFUSED, 0) is not None
    assert reconnects.failed(REFUSED, 1) is None
    changed = reconnects.failed(other, 2)
    assert changed is not None and "not permitted to log in" in changed.text
    down = reconnects.failed(LOST, 3)
    assert down is not None and "no longer refuses, but cannot be reached" in down.text
    # While it cannot be reached, the words may differ from one attempt to the next: no new line.
    assert reconnects.failed(ConnectFailure("Connection refused", refused=False), 4) is None


def test_the_pause_doubles_up_to_the_bound_and_starts_again_once_connected() -> None:
    reconnects = Reconnects("the listener", first_s=0.1, max_s=1.0, rng=random.Random(7))
    steps = []
    for _ in range(8):
        reconnects.failed(LOST, 0)
        steps.append(reconnects.pause())
    bounds = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert all(step / 2 <= pause <= step for pause, step in zip(steps, bounds, strict=True))
    reconnects.connected(1)
    reconnects.failed(LOST, 2)
    assert 0.05 <= reconnects.pause() <= 0.1


def test_pauses_out_of_order_are_refused() -> None:
    with pytest.raises(InvalidInput, match="first_s"):
        Reconnects("x", first_s=2.0, max_s=1.0)
    with pytest.raises(InvalidInput, match="first_s"):
        Reconnects("x", first_s=0.0)


_EVENTS = st.lists(
    st.one_of(
        st.just(None),  # connected
        st.builds(
            ConnectFailure,
            reason=st.sampled_from(["a", "b", "c"]),
            refused=st.booleans(),
            sqlstate=st.sampled_from([None, "28P01", "57P01"]),
        ),
    ),
    max_size=60,
)


@given(_EVENTS, st.floats(0.001, 10), st.floats(1, 100), st.integers(0, 2**32))
def test_lines_only_on_changes_and_pauses_within_bounds(
    events: list[ConnectFailure | None], first_s: float, span: float, seed: int
) -> None:
    max_s = first_s * span
    reconnects = Reconnects("x", first_s=first_s, max_s=max_s, rng=random.Random(seed))
    state: tuple[str, str] = ("up", "")
    for t, event in enumerate(events):
        if event is None:
            line = reconnects.connected(float(t))
            assert (line is not None) == (state[0] != "up")
            state = ("up", "")
            continue
        line = reconnects.failed(event, float(t))
        new = ("refused", event.reason) if event.refused else ("lost", "")
        changed = new != state and not (new[0] == "lost" and state[0] == "lost")
        assert (line is not None) == changed
        state = new
        assert first_s / 2 <= reconnects.pause() <= max_s
