"""The event record: deltas coalesced per turn, seq continuing across runs, replay and live follow."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from steadyloop.events import (
    AgentEnd,
    AgentStart,
    Event,
    MessageUpdate,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from steadyloop.messages import AssistantMessage
from steadyloop.sessions import EventRecorder, SessionNotFound, SessionStore, SessionUsage, follow
from steadyloop.usage import Usage

A = "agent-a"


def turn(step: int, text: str, thinking: str = "") -> list[Event]:
    events: list[Event] = [TurnStart(step=step, run_id="r")]
    events += [MessageUpdate(kind="thinking", delta=c, step=step, run_id="r") for c in thinking]
    events += [MessageUpdate(kind="text", delta=c, step=step, run_id="r") for c in text]
    events.append(TurnEnd(step=step, message=AssistantMessage(content=text, reasoning=thinking), run_id="r"))
    return events


async def test_deltas_are_coalesced_into_one_event_per_kind_per_turn(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A)
    seqs = [
        await recorder.record(e) for e in [AgentStart(run_id="r"), *turn(1, "hello world", "let me think")]
    ]
    assert seqs == [1, 2] + [None] * 23 + [
        5
    ]  # deltas give no seq; the turn's end writes three events at once
    recorded = [e for _, e in await store.load_events(sid, agent_id=A)]
    assert recorded == [
        AgentStart(run_id="r"),
        TurnStart(step=1, run_id="r"),
        MessageUpdate(kind="thinking", delta="let me think", step=1, run_id="r"),
        MessageUpdate(kind="text", delta="hello world", step=1, run_id="r"),
        turn(1, "hello world", "let me think")[-1],
    ]


async def test_a_turn_without_thinking_records_only_its_text(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A)
    for event in [*turn(1, "ab"), *turn(2, "")]:
        await recorder.record(event)
    kinds = [e.type for _, e in await store.load_events(sid, agent_id=A)]
    assert kinds == ["turn_start", "message_update", "turn_end", "turn_start", "turn_end"]


async def test_deltas_held_past_the_interval_are_written_without_an_event_to_carry_them(
    store: SessionStore,
) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A, flush_after_s=0.01)
    await recorder.record(AgentStart(run_id="r"))
    await recorder.record(TurnStart(step=1, run_id="r"))
    for piece in ("ha", "lf"):  # then the stream stalls: no event comes to carry them
        assert await recorder.record(MessageUpdate(kind="text", delta=piece, step=1, run_id="r")) is None
    async with asyncio.timeout(30):  # a bound on a broken recorder, not a measurement
        async for seq, event in follow(store, sid, agent_id=A, after_seq=2):
            assert (seq, event) == (3, MessageUpdate(kind="text", delta="half", step=1, run_id="r"))
            break
    for piece in (" and", " more"):
        await recorder.record(MessageUpdate(kind="text", delta=piece, step=1, run_id="r"))
    end = TurnEnd(step=1, message=AssistantMessage(content="half and more"), run_id="r")
    assert await recorder.record(end) == 5
    recorded = [e for _, e in await store.load_events(sid, agent_id=A)]
    assert recorded[2:] == [
        MessageUpdate(kind="text", delta="half", step=1, run_id="r"),
        MessageUpdate(kind="text", delta=" and more", step=1, run_id="r"),
        end,
    ], "each piece once, in order"


async def test_a_run_cut_off_mid_turn_keeps_its_partial_text_and_usage(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A)
    for event in turn(1, "done")[:-1]:  # no TurnEnd: the endpoint failed mid-stream
        await recorder.record(event)
    await recorder.record(AgentEnd(outcome="error", error="boom", usage=Usage(prompt_tokens=40), steps=1))
    recorded = [e for _, e in await store.load_events(sid, agent_id=A)]
    assert recorded[1:] == [
        MessageUpdate(kind="text", delta="done", step=1, run_id="r"),
        AgentEnd(outcome="error", error="boom", usage=Usage(prompt_tokens=40), steps=1),
    ]
    info = await store.get(sid, agent_id=A)
    assert info is not None and info.usage == SessionUsage(prompt_tokens=40, turns=1, runs=1)


async def test_usage_is_left_to_the_host_when_asked(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    await EventRecorder(store, sid, A, record_usage=False).record(
        AgentEnd(outcome="completed", usage=Usage(9))
    )
    info = await store.get(sid, agent_id=A)
    assert info is not None and info.usage == SessionUsage()


async def test_seq_continues_across_runs_and_recorders(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    first = EventRecorder(store, sid, A)
    for event in [AgentStart(), *turn(1, "x"), AgentEnd(outcome="completed")]:
        await first.record(event)
    assert first.last_seq == 5
    second = EventRecorder(store, sid, A)
    assert await second.record(AgentStart()) == 6
    assert await second.flush() == 6  # nothing held, nothing written


async def test_a_recorder_for_another_agents_session_writes_nothing(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    with pytest.raises(SessionNotFound):
        await EventRecorder(store, sid, "intruder").record(AgentStart())
    assert await store.load_events(sid, agent_id=A) == []


async def test_follow_replays_from_a_seq_then_yields_live_events(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A)
    run1: list[Event] = [AgentStart(run_id="r1"), AgentEnd(outcome="completed", run_id="r1")]
    for event in run1:
        await recorder.record(event)

    got: list[tuple[int, Event]] = []
    caught_up = asyncio.Event()
    live = asyncio.Event()

    async def consume() -> None:
        async with contextlib.aclosing(follow(store, sid, agent_id=A, after_seq=1)) as events:
            async for seq, event in events:
                got.append((seq, event))
                if seq == 2:
                    caught_up.set()
                if seq == 5:
                    live.set()
                    return

    task = asyncio.create_task(consume())
    await caught_up.wait()
    for event in [
        AgentStart(run_id="r2"),
        *turn(1, "hi")[:1],
        ToolExecutionStart(call_id="c", name="t", arguments={}),
    ]:
        await recorder.record(event)
    await live.wait()
    await task
    assert [s for s, _ in got] == [2, 3, 4, 5]
    assert isinstance(got[-1][1], ToolExecutionStart)


async def test_follow_until_end_stops_after_the_runs_agent_end(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A)
    await recorder.record(AgentStart())

    async def consume() -> list[int]:
        return [seq async for seq, _ in follow(store, sid, agent_id=A, until_end=True)]

    task = asyncio.create_task(consume())
    for event in [*turn(1, "ok"), AgentEnd(outcome="completed"), AgentStart()]:
        await recorder.record(event)
    assert await task == [1, 2, 3, 4, 5]


async def test_a_follower_leaves_promptly_while_waiting(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    cancel = asyncio.Event()
    waiting = asyncio.Event()

    async def consume() -> list[int]:
        seqs = []
        async for seq, _ in follow(store, sid, agent_id=A, cancel=cancel):
            seqs.append(seq)
            waiting.set()
        return seqs

    task = asyncio.create_task(consume())
    await EventRecorder(store, sid, A).record(AgentStart())
    await waiting.wait()  # it has the event and is back to waiting for the next
    cancel.set()
    assert await asyncio.wait_for(task, timeout=5) == [1]


async def test_a_follower_task_can_be_cancelled_while_waiting(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    recorder = EventRecorder(store, sid, A)
    await recorder.record(AgentStart())
    got_one = asyncio.Event()

    async def consume() -> None:
        async for _ in follow(store, sid, agent_id=A):
            got_one.set()

    task = asyncio.create_task(consume())
    await got_one.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # A follower that comes later still replays, and still wakes on the next write.
    later = asyncio.create_task(_seqs_until_end(store, sid))
    await recorder.record(AgentEnd(outcome="cancelled"))
    assert await later == [1, 2]


async def _seqs_until_end(store: SessionStore, sid: str) -> list[int]:
    return [seq async for seq, _ in follow(store, sid, agent_id=A, until_end=True)]


async def test_two_followers_both_see_every_event(store: SessionStore) -> None:
    sid = (await store.create(A)).session_id
    ready = [asyncio.Event(), asyncio.Event()]

    async def consume(n: int) -> list[int]:
        seqs = []
        async for seq, _ in follow(store, sid, agent_id=A, until_end=True):
            seqs.append(seq)
            ready[n].set()
        return seqs

    tasks = [asyncio.create_task(consume(n)) for n in range(2)]
    recorder = EventRecorder(store, sid, A)
    await recorder.record(AgentStart())
    await asyncio.gather(*(r.wait() for r in ready))
    for event in [*turn(1, "a"), AgentEnd(outcome="completed")]:
        await recorder.record(event)
    assert await asyncio.gather(*tasks) == [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]
