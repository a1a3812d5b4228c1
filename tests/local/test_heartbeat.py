"""The heartbeat: the last step said again, with its running time, whenever nothing was said for a while."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.local.heartbeat import Heartbeat, Said, reminder

Event = tuple[str, int | None, int | None]


def test_nothing_is_repeated_before_its_time_or_before_anything_was_said() -> None:
    assert reminder(None, 100.0, 5.0) is None
    said = Said("loading model", None, None, since=10.0, at=12.0)
    assert reminder(said, 16.9, 5.0) is None
    assert reminder(said, 17.0, 5.0) == ("loading model (7 s so far)", None, None)
    counted = Said("download a.whl", 3_000_000, 8_000_000, since=0.0, at=1.0)
    assert reminder(counted, 9.0, 5.0) == ("download a.whl (9 s so far)", 3_000_000, 8_000_000)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# A run of the heartbeat: each step either passes an event on (0..2 names a step) or lets the repeating
# thread look, after some seconds have gone by.
Steps = list[tuple[float, int | None]]


@given(st.lists(st.tuples(st.floats(0, 20), st.one_of(st.none(), st.integers(0, 2))), max_size=40))
def test_at_every_look_something_was_said_within_the_interval(steps: Steps) -> None:
    clock, said = _Clock(), []
    heart = Heartbeat(lambda e, d, t: said.append((clock.now, e)), every=5.0, clock=clock)
    real: list[str] = []
    for elapsed, step in steps:
        clock.now += elapsed
        if step is None:
            heart.beat()
            if said:
                assert clock.now - said[-1][0] < 5.0  # never silent for the interval at a look
        else:
            real.append(f"step {step}")
            heart(f"step {step}", None, None)
    for _, event in said:  # nothing invented: each line is a real step, or the last one with its time
        assert event in real or event.split(" (")[0] in real


def test_the_running_time_counts_from_when_the_step_began() -> None:
    clock, said = _Clock(), []
    heart = Heartbeat(lambda e, d, t: said.append(e), every=5.0, clock=clock)
    heart("download a.whl", 0, 10)
    clock.now = 3.0
    heart("download a.whl", 4, 10)  # the same step, further on
    clock.now = 8.0
    heart.beat()
    assert said[-1] == "download a.whl (8 s so far)"
    heart("assemble m.gguf", 0, 10)  # a new step starts its own count
    clock.now = 14.0
    heart.beat()
    assert said[-1] == "assemble m.gguf (6 s so far)"


def test_the_thread_repeats_until_the_work_is_done() -> None:
    said: list[Event] = []
    twice = threading.Event()

    def progress(event: str, done: int | None, total: int | None) -> None:
        said.append((event, done, total))
        if len(said) >= 3:
            twice.set()

    with Heartbeat(progress, every=0.02) as heart:
        heart("loading model", None, None)
        assert twice.wait(10)
    count = len(said)
    assert said[0] == ("loading model", None, None)
    assert all(e.startswith("loading model (") for e, _, _ in said[1:])
    assert len(said) == count  # stopped with the context


def test_a_progress_callback_that_fails_in_the_thread_ends_the_repeating_quietly() -> None:
    failed = threading.Event()
    calls = 0

    def progress(event: str, done: int | None, total: int | None) -> None:
        nonlocal calls
        calls += 1
        if calls > 1:  # the first call is the caller's own; the repeats come from the thread
            failed.set()
            raise BrokenPipeError("stderr went away")

    with Heartbeat(progress, every=0.02) as heart:
        heart("loading model", None, None)
        assert failed.wait(10)
