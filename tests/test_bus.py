"""The event bus: seq, replay then live, leaving early, the backlog cap and its gap notice, sweep, blocks_of."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

import steadyloop.bus as bus
from steadyloop.bus import (
    Block,
    EventSettings,
    Watcher,
    blocks_of,
    configure_events,
    emit,
    end_run,
    history,
    reset_events,
    sweep,
    watch,
    watcher_count,
)
from steadyloop.events import (
    AgentEnd,
    AgentStart,
    Event,
    MessageUpdate,
    Notice,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnStart,
    UsageReport,
)
from steadyloop.messages import ToolResultMessage
from steadyloop.usage import Usage

# Generous: a watcher that leaves promptly does so within a few loop iterations, far below this.
PROMPT_S = 1.0


@pytest.fixture(autouse=True)
def _fresh_bus() -> Iterator[None]:
    reset_events()
    yield
    reset_events()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(bus, "_clock", fake)
    return fake


def token(text: str, step: int = 1, kind: str = "text") -> MessageUpdate:
    return MessageUpdate(kind="thinking" if kind == "thinking" else "text", delta=text, step=step)


async def collect(run_id: str, cancel: asyncio.Event | None = None) -> list[Event]:
    return [event async for event in watch(run_id, cancel)]


class Follower:
    """A consumer on its own task; once ``first`` is set it is waiting for the next event.

    It appends and signals, then goes straight back into the watcher before the task awaiting ``first``
    resumes, so "waiting" is known without sleeping.
    """

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.got: list[Event] = []
        self.first = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> list[Event]:
        async for event in self.watcher:
            self.got.append(event)
            self.first.set()
        return self.got


# -- seq and history -------------------------------------------------------------------------------


def test_seq_counts_from_one_per_run_and_stamps_the_run() -> None:
    a1 = emit("a", AgentStart())
    b1 = emit("b", AgentStart())
    a2 = emit("a", token("x"))
    assert (a1.seq, a1.run_id, b1.seq, b1.run_id, a2.seq, a2.run_id) == (1, "a", 1, "b", 2, "a")
    assert [e.seq for e in history("a")] == [1, 2]
    assert history("a")[1] == a2
    assert history("unknown") == []


def test_history_is_a_copy() -> None:
    emit("r", AgentStart())
    history("r").clear()
    assert len(history("r")) == 1


def test_emit_leaves_the_original_event_unstamped() -> None:
    original = token("x")
    emit("r", original)
    assert (original.seq, original.run_id) == (0, "")


# -- replay then live ------------------------------------------------------------------------------


async def test_replay_then_live_until_agent_end() -> None:
    emit("r", AgentStart())
    emit("r", token("a"))
    got: list[Event] = []
    replayed = asyncio.Event()

    async def consume() -> None:
        async for event in watch("r"):
            got.append(event)
            if len(got) == 2:
                replayed.set()

    task = asyncio.create_task(consume())
    await replayed.wait()
    emit("r", token("b"))
    emit("r", AgentEnd(outcome="completed"))
    await asyncio.wait_for(task, PROMPT_S)
    assert [e.seq for e in got] == [1, 2, 3, 4]
    assert isinstance(got[-1], AgentEnd)
    assert watcher_count("r") == 0


async def test_a_watcher_of_a_finished_run_replays_it_and_finishes() -> None:
    emit("r", AgentStart())
    emit("r", AgentEnd(outcome="error", error="boom"))
    got = await asyncio.wait_for(collect("r"), PROMPT_S)
    assert [e.type for e in got] == ["agent_start", "agent_end"]


async def test_a_watcher_may_start_before_the_first_event() -> None:
    follower = Follower(watch("later"))
    assert watcher_count("later") == 1
    emit("later", AgentStart())
    await follower.first.wait()
    emit("later", AgentEnd(outcome="completed"))
    got = await asyncio.wait_for(follower.task, PROMPT_S)
    assert [e.seq for e in got] == [1, 2]


async def test_end_run_finishes_watchers_after_their_backlog() -> None:
    emit("r", AgentStart())
    watcher = watch("r")
    emit("r", token("a"))
    end_run("r")
    emit("r", token("late"))  # kept in the history, seen by no watcher
    got = [event async for event in watcher]
    assert [e.seq for e in got] == [1, 2]
    assert [e.seq for e in history("r")] == [1, 2, 3]


async def test_end_run_wakes_a_waiting_watcher() -> None:
    emit("r", AgentStart())
    follower = Follower(watch("r"))
    await follower.first.wait()
    end_run("r")
    got = await asyncio.wait_for(follower.task, PROMPT_S)
    assert [e.seq for e in got] == [1]


# -- leaving early ---------------------------------------------------------------------------------


async def test_cancel_while_waiting_for_the_next_event_returns_promptly() -> None:
    emit("r", AgentStart())
    cancel = asyncio.Event()
    follower = Follower(watch("r", cancel))
    await follower.first.wait()
    assert watcher_count("r") == 1
    cancel.set()
    got = await asyncio.wait_for(follower.task, PROMPT_S)
    assert [e.seq for e in got] == [1]
    assert watcher_count("r") == 0


async def test_cancel_already_set_yields_nothing() -> None:
    emit("r", AgentStart())
    cancel = asyncio.Event()
    cancel.set()
    assert await collect("r", cancel) == []
    assert watcher_count("r") == 0


async def test_cancel_stops_before_a_queued_backlog_is_read() -> None:
    cancel = asyncio.Event()
    watcher = watch("r", cancel)
    for i in range(5):
        emit("r", token(str(i)))
    assert (await anext(watcher)).seq == 1
    cancel.set()
    assert [e async for e in watcher] == []


async def test_breaking_out_of_async_for_releases_the_watcher() -> None:
    for i in range(3):
        emit("r", token(str(i)))
    async for _event in watch("r", asyncio.Event()):
        break
    assert watcher_count("r") == 0


async def test_breaking_out_after_waiting_releases_the_watcher_and_its_cancel_relay() -> None:
    emit("r", AgentStart())
    cancel = asyncio.Event()
    waited = asyncio.Event()

    async def consume() -> None:
        async for event in watch("r", cancel):
            if event.seq == 1:
                waited.set()
            else:
                break

    task = asyncio.create_task(consume())
    await waited.wait()
    emit("r", token("a"))
    await asyncio.wait_for(task, PROMPT_S)
    assert watcher_count("r") == 0


async def test_aclose_from_another_task_ends_a_waiting_watcher() -> None:
    emit("r", AgentStart())
    follower = Follower(watch("r"))
    await follower.first.wait()
    await follower.watcher.aclose()
    assert [e.seq for e in await asyncio.wait_for(follower.task, PROMPT_S)] == [1]
    assert watcher_count("r") == 0


async def test_a_timed_out_wait_loses_nothing() -> None:
    # A server sending keep-alives waits on each step with a timeout; the watcher must survive that.
    emit("r", AgentStart())
    watcher = watch("r")
    assert (await anext(watcher)).seq == 1
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(watcher), 0.01)
    emit("r", token("a"))
    assert (await asyncio.wait_for(anext(watcher), PROMPT_S)).seq == 2
    assert watcher_count("r") == 1
    await watcher.aclose()


# -- the backlog cap -------------------------------------------------------------------------------


async def test_a_slow_watcher_keeps_the_newest_events_and_one_gap_notice() -> None:
    configure_events(max_events=10, slack=0.5)  # cut back to 10 once past 15
    watcher = watch("r")
    for i in range(40):
        emit("r", token(str(i)))
    emit("r", AgentEnd(outcome="completed"))
    got = [event async for event in watcher]
    notices = [e for e in got if isinstance(e, Notice)]
    assert len(notices) == 1
    gap = notices[0]
    following = got[got.index(gap) + 1]
    # The rule: the notice carries the seq just before the event that follows it, a dropped event's number.
    assert gap.name == "gap"
    assert gap.seq == gap.after_seq == following.seq - 1
    assert gap.run_id == "r"
    assert gap.seq not in {e.seq for e in history("r")[following.seq - 1 :]}
    assert f"{following.seq - 1} events were dropped" in gap.text
    seqs = [e.seq for e in got]
    assert len(seqs) == len(set(seqs))
    assert seqs == sorted(seqs)
    assert got[-1].type == "agent_end"
    assert len(got) - 1 <= 15


def test_trimming_waits_for_the_slack_then_cuts_back_to_the_cap() -> None:
    configure_events(max_events=10, slack=0.5)
    watcher = watch("r")
    listener = next(iter(bus._runs["r"].listeners))
    for i in range(15):
        emit("r", token(str(i)))
    assert (len(listener.queue), listener.dropped) == (15, 0)
    emit("r", token("16"))
    assert (len(listener.queue), listener.dropped) == (10, 6)
    assert listener.queue[0].seq == 7
    del watcher


async def test_each_separate_gap_gets_its_own_notice_and_seqs_stay_unique() -> None:
    configure_events(max_events=4, slack=0.5)  # cut back to 4 once past 6
    watcher = watch("r")
    got: list[Event] = []
    for _round in range(3):
        for i in range(9):
            emit("r", token(str(i)))
        for _ in range(5):
            got.append(await anext(watcher))
    notices = [e for e in got if isinstance(e, Notice)]
    assert len(notices) == 3
    seqs = [e.seq for e in got]
    assert len(seqs) == len(set(seqs))
    for notice in notices:
        assert got[got.index(notice) + 1].seq == notice.seq + 1
    await watcher.aclose()


async def test_the_event_after_a_gap_is_held_even_if_more_is_dropped_meanwhile() -> None:
    configure_events(max_events=2, slack=0.5)  # cut back to 2 once past 3
    watcher = watch("r")
    for i in range(6):
        emit("r", token(str(i)))
    gap = await anext(watcher)
    assert isinstance(gap, Notice)
    for i in range(6):
        emit("r", token(str(i)))
    assert (await anext(watcher)).seq == gap.seq + 1
    await watcher.aclose()


async def test_replay_is_not_capped_only_the_live_backlog_is() -> None:
    configure_events(max_events=3, slack=0.5)
    for i in range(20):
        emit("r", token(str(i)))
    emit("r", AgentEnd(outcome="completed"))
    got = await collect("r")
    assert [e.seq for e in got] == list(range(1, 22))


def test_a_closed_watcher_releases_its_backlog_at_once() -> None:
    watcher = watch("r")
    listener = next(iter(bus._runs["r"].listeners))
    for i in range(5):
        emit("r", token(str(i)))
    del watcher  # no collection needed: the last reference going is enough
    assert not listener.queue
    assert watcher_count("r") == 0


# -- settings and sweep ----------------------------------------------------------------------------


def test_configure_events_returns_all_settings_and_ignores_what_is_not_a_positive_number() -> None:
    assert configure_events() == EventSettings()
    moved = configure_events(max_events=200, retain_unended_s=300)
    assert moved == EventSettings(max_events=200, retain_unended_s=300.0)
    for bad in (0, -1, float("nan"), True, "5", None):
        assert (
            configure_events(
                max_events=bad,  # type: ignore[arg-type]
                slack=bad,  # type: ignore[arg-type]
                retain_ended_s=bad,  # type: ignore[arg-type]
                retain_unended_s=bad,  # type: ignore[arg-type]
            )
            == moved
        )
    assert configure_events(max_events=2.5).max_events == 200  # type: ignore[arg-type]
    assert configure_events(slack=float("inf")).slack == moved.slack
    assert configure_events(retain_ended_s=float("inf")).retain_ended_s == float("inf")


def test_reset_events_restores_defaults_and_drops_runs() -> None:
    configure_events(max_events=5)
    emit("r", AgentStart())
    reset_events()
    assert configure_events() == EventSettings()
    assert history("r") == []


async def test_reset_events_finishes_watchers() -> None:
    emit("r", AgentStart())
    follower = Follower(watch("r"))
    await follower.first.wait()
    reset_events()
    assert [e.seq for e in await asyncio.wait_for(follower.task, PROMPT_S)] == [1]


def test_sweep_reaps_ended_and_abandoned_runs_but_not_one_with_a_watcher(clock: FakeClock) -> None:
    configure_events(retain_ended_s=60, retain_unended_s=600)
    emit("ended", AgentStart())
    emit("ended", AgentEnd(outcome="completed"))
    emit("abandoned", AgentStart())
    emit("watched", AgentStart())
    watcher = watch("watched")
    clock.now += 59
    assert sweep() == 0
    clock.now += 1
    assert sweep() == 1
    assert history("ended") == []
    assert history("abandoned") != []
    clock.now += 600
    assert sweep() == 1
    assert history("abandoned") == []
    assert history("watched") != []
    del watcher
    assert sweep() == 1
    assert history("watched") == []


def test_an_event_keeps_an_unended_run_alive(clock: FakeClock) -> None:
    configure_events(retain_unended_s=600)
    emit("r", AgentStart())
    clock.now += 500
    emit("r", TurnStart(step=1))
    clock.now += 500
    assert sweep() == 0


def test_emit_sweeps_lazily_at_most_every_few_seconds(clock: FakeClock) -> None:
    configure_events(retain_ended_s=1)
    emit("old", AgentEnd(outcome="completed"))
    clock.now += 2
    emit("other", AgentStart())  # within the interval of the first sweep: nothing reaped yet
    assert history("old") != []
    clock.now += bus._SWEEP_EVERY_S
    emit("other", TurnStart(step=1))
    assert history("old") == []


# -- many watchers ---------------------------------------------------------------------------------


async def test_a_thousand_concurrent_watchers_each_see_every_event() -> None:
    emit("r", AgentStart())
    cancel = asyncio.Event()
    followers = [Follower(watch("r", cancel)) for _ in range(1000)]
    assert watcher_count("r") == 1000
    for follower in followers:
        await follower.first.wait()
    for i in range(50):
        emit("r", token(str(i)))
    emit("r", AgentEnd(outcome="completed"))
    results = await asyncio.wait_for(asyncio.gather(*(f.task for f in followers)), 10)
    assert all([e.seq for e in got] == list(range(1, 53)) for got in results)
    assert watcher_count("r") == 0


async def test_a_thousand_waiting_watchers_leave_together_on_cancel() -> None:
    cancel = asyncio.Event()
    followers = [Follower(watch(f"run-{i}", cancel)) for i in range(1000)]
    for i, follower in enumerate(followers):
        emit(f"run-{i}", AgentStart())
        await follower.first.wait()
    cancel.set()
    results = await asyncio.wait_for(asyncio.gather(*(f.task for f in followers)), 10)
    assert all(len(got) == 1 for got in results)
    assert sum(watcher_count(f"run-{i}") for i in range(1000)) == 0


# -- blocks_of---------------------------------------------------------------------------------------


def result(text: str, *, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(call_id="c", content=text, is_error=is_error)


def stamp(events: list[Event]) -> list[Event]:
    return [emit("fold", event) for event in events]


def test_fold_merges_deltas_of_one_kind_in_one_step() -> None:
    blocks = blocks_of(
        stamp(
            [
                AgentStart(),
                TurnStart(step=1),
                token("thi", kind="thinking"),
                token("nk", kind="thinking"),
                token("Hel"),
                UsageReport(turn=Usage(), totals=Usage(), step=1),  # not shown, splits nothing
                token("lo"),
            ]
        )
    )
    assert [(b.kind, b.step, b.text, b.seq) for b in blocks] == [
        ("thinking", 1, "think", 3),
        ("text", 1, "Hello", 5),
    ]


def test_fold_never_merges_across_steps() -> None:
    blocks = blocks_of(stamp([token("a", step=1), token("b", step=2), token("c", step=2)]))
    assert [(b.step, b.text) for b in blocks] == [(1, "a"), (2, "bc")]


def test_fold_merges_a_tool_call_and_keeps_calls_of_different_steps_apart() -> None:
    events: list[Event] = []
    for step in (1, 2):
        events += [
            token(f"step {step}", step=step),
            ToolExecutionStart(call_id="call_0", name="read", arguments={"path": "a"}, step=step),
            ToolExecutionUpdate(call_id="call_0", name="read", text="half", step=step),
            ToolExecutionEnd(
                call_id="call_0",
                name="read",
                result=result("done", is_error=step == 2),
                disposition="completed",
                step=step,
            ),
            token(" after", step=step),
        ]
    blocks = blocks_of(stamp(events))
    tools = [b for b in blocks if b.kind == "tool"]
    assert [(b.step, b.call_id, b.text, b.status, b.is_error, b.arguments) for b in tools] == [
        (1, "call_0", "done", "completed", False, {"path": "a"}),
        (2, "call_0", "done", "completed", True, {"path": "a"}),
    ]
    assert [b.kind for b in blocks] == ["text", "tool", "text"] * 2


def test_fold_shows_a_running_tool_its_progress_and_an_end_without_start() -> None:
    blocks = blocks_of(
        stamp(
            [
                ToolExecutionStart(call_id="a", name="slow", arguments={}, step=1),
                ToolExecutionUpdate(call_id="a", name="slow", text="1/2", step=1),
                ToolExecutionUpdate(call_id="a", name="slow", text="2/2", step=1),
                ToolExecutionEnd(
                    call_id="b", name="gated", result=result("no"), disposition="blocked", step=1
                ),
            ]
        )
    )
    assert blocks[0] == Block(
        kind="tool", step=1, text="1/2\n2/2", seq=1, call_id="a", name="slow", arguments={}, status="running"
    )
    assert (blocks[1].call_id, blocks[1].status, blocks[1].is_error, blocks[1].arguments) == (
        "b",
        "blocked",
        True,
        None,
    )


def test_fold_turns_notices_into_blocks_that_split_text() -> None:
    blocks = blocks_of(stamp([token("a"), Notice(text="gap", name="gap", step=1), token("b")]))
    assert [(b.kind, b.text, b.name) for b in blocks] == [
        ("text", "a", None),
        ("notice", "gap", "gap"),
        ("text", "b", None),
    ]


@given(
    st.lists(
        st.tuples(st.integers(1, 3), st.sampled_from(["text", "thinking"]), st.text(max_size=5)), max_size=30
    )
)
def test_fold_keeps_every_character_and_no_block_spans_steps(pieces: list[tuple[int, str, str]]) -> None:
    pieces.sort(key=lambda p: p[0])
    blocks = blocks_of([token(text, step=step, kind=kind) for step, kind, text in pieces])
    assert "".join(b.text for b in blocks) == "".join(text for _, _, text in pieces)
    for a, b in itertools.pairwise(blocks):
        assert (a.kind, a.step) != (b.kind, b.step)
