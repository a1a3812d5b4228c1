"""The hub joins a replay of the record to the live feed: property-tested over generated runs, attach
points and replay reads that land anywhere after the subscription."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import AgentEnd, Event, MessageUpdate, Notice
from steadyloop.server.hub import EventHub, Item, attach

Op = tuple[str, str]
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("delta"), st.sampled_from("abcxyz")), st.tuples(st.just("event"), st.just(""))
    ),
    max_size=40,
)


async def simulate(
    ops: list[Op], attach_at: int, read_after: int, after_choice: float
) -> tuple[list[Item], list[tuple[int, Event]], int]:
    hub = EventHub()
    record: list[tuple[int, Event]] = []
    pending: list[str] = []
    watched: list[Item] = []
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    after = 0

    def write(event: Event) -> None:  # the store's write, then the recording store's callback
        seq = len(record) + 1
        record.append((seq, event))
        hub.publish_recorded(seq, event)

    def recorded(event: Event) -> None:
        if pending:
            write(MessageUpdate(kind="text", delta="".join(pending)))
            pending.clear()
        write(event)

    async def replay(after_seq: int) -> list[tuple[int, Event]]:
        await gate  # the read happens some steps after the subscription
        return [(s, e) for s, e in record if s > after_seq]

    async def watch(after: int) -> None:
        watcher = hub.watch()
        hub.running = True
        async for item in attach(
            hub, watcher, replay, after=after, until_end_after=watcher.base, follow=False
        ):
            assert item is not None
            watched.append(item)

    task: asyncio.Task[None] | None = None
    for index, (kind, text) in enumerate([*ops, ("end", "")]):
        if index == attach_at:
            after = int(after_choice * hub.last_seq)
            task = asyncio.create_task(watch(after))
            await asyncio.sleep(0)
        if index == attach_at + read_after and not gate.done():
            gate.set_result(None)
        if kind == "delta":
            pending.append(text)
            hub.publish_live(MessageUpdate(kind="text", delta=text))
        elif kind == "event":
            recorded(Notice(text="x"))
        else:
            recorded(AgentEnd(outcome="completed"))
        await asyncio.sleep(0)
    if not gate.done():
        gate.set_result(None)
    if task is not None:
        await task
    return watched, record, after


@given(
    ops=ops_strategy,
    attach_at=st.integers(0, 45),
    read_after=st.integers(0, 10),
    after_choice=st.floats(0, 1),
)
def test_a_watcher_gets_each_recorded_event_once_in_order_and_every_delta_once(
    ops: list[Op], attach_at: int, read_after: int, after_choice: float
) -> None:
    attach_at = min(attach_at, len(ops))
    watched, record, after = asyncio.run(simulate(ops, attach_at, read_after, after_choice))
    seqs = [item.seq for item in watched if item.seq is not None]
    assert seqs == [s for s, _ in record if s > after], "the record after `after`, each seq once, in order"
    preview = ""
    for item in watched:
        event: Any = item.event
        if item.seq is None:
            preview += event.delta
        elif isinstance(event, MessageUpdate):
            assert preview in ("", event.delta), "deltas shown are exactly the update they preview"
            preview = ""
        else:
            assert preview == "", "no delta is left unresolved before the next recorded event"
    assert isinstance(watched[-1].event, AgentEnd)
