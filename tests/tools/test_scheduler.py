"""The resource-claim scheduler: conflicts, the source-directed DAG, and handing out calls under a cap."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.tools.definition import ResourceClaim, Tool
from steadyloop.tools.scheduler import Claims, Plan, Scheduler, claims_for_call, conflicts, plan_calls


def read(*keys: str) -> Claims:
    return tuple(ResourceClaim(k, "read") for k in keys)


def write(*keys: str) -> Claims:
    return tuple(ResourceClaim(k, "write") for k in keys)


async def _noop(arguments: dict[str, Any], context: object) -> str:
    return ""


def make_tool(claims: Any = None) -> Tool:
    return Tool(name="t", description="", parameters={"type": "object"}, execute=_noop, claims=claims)


# -- conflicts ------------------------------------------------------------------------------------------


def test_reads_of_one_key_share_it() -> None:
    assert not conflicts(read("a"), read("a"))


def test_a_write_is_exclusive_on_its_key() -> None:
    assert conflicts(write("a"), read("a"))
    assert conflicts(read("a"), write("a"))
    assert conflicts(write("a"), write("a"))


def test_different_keys_do_not_conflict() -> None:
    assert not conflicts(write("a"), write("b"))
    assert not conflicts(read("a", "b"), write("c"))


def test_exclusive_conflicts_with_everything_even_no_claims() -> None:
    assert conflicts("exclusive", read("a"))
    assert conflicts(read("a"), "exclusive")
    assert conflicts("exclusive", ())
    assert conflicts("exclusive", "exclusive")


def test_empty_claims_conflict_with_nothing_but_exclusive() -> None:
    assert not conflicts((), write("a"))


# -- claims of a call -----------------------------------------------------------------------------------


def test_unknown_and_unclaimed_tools_run_alone() -> None:
    assert claims_for_call(None, {}) == "exclusive"
    assert claims_for_call(make_tool(None), {}) == "exclusive"
    assert claims_for_call(make_tool("exclusive"), {}) == "exclusive"


def test_claims_from_a_list_or_from_the_arguments() -> None:
    assert claims_for_call(make_tool([ResourceClaim("a")]), {}) == (ResourceClaim("a"),)
    by_path = make_tool(lambda args: [ResourceClaim(args["path"], "write")])
    assert claims_for_call(by_path, {"path": "x"}) == (ResourceClaim("x", "write"),)


def test_a_claims_function_that_raises_raises() -> None:
    with pytest.raises(KeyError):
        claims_for_call(make_tool(lambda args: [ResourceClaim(args["missing"])]), {})


def test_claims_that_are_not_resource_claims_are_refused() -> None:
    with pytest.raises(TypeError):
        claims_for_call(make_tool(lambda args: ["a"]), {})
    with pytest.raises(TypeError):
        claims_for_call(make_tool(lambda args: "everything"), {})


# -- the plan -------------------------------------------------------------------------------------------


def test_a_later_conflicting_call_waits_for_the_earlier_ones() -> None:
    plan = plan_calls([read("a"), read("a"), write("a"), read("b")])
    assert plan.waits_for == (frozenset(), frozenset(), frozenset({0, 1}), frozenset())
    assert plan.levels == ((0, 1, 3), (2,))


def test_an_exclusive_call_is_a_barrier() -> None:
    plan = plan_calls([read("a"), "exclusive", read("b")])
    assert plan.waits_for == (frozenset(), frozenset({0}), frozenset({1}))
    assert plan.levels == ((0,), (1,), (2,))


def test_a_read_after_a_write_waits_for_the_write() -> None:
    plan = plan_calls([write("a"), read("a"), read("a")])
    assert plan.waits_for == (frozenset(), frozenset({0}), frozenset({0}))


def test_closed_calls_neither_wait_nor_are_waited_for() -> None:
    plan = plan_calls(["exclusive", None, "exclusive"])
    assert plan.waits_for == (frozenset(), frozenset(), frozenset({0}))


def test_sequential_chains_every_call_after_all_earlier_ones() -> None:
    plan = plan_calls([read("a"), read("b"), None, read("c")], sequential=True)
    assert plan.waits_for == (frozenset(), frozenset({0}), frozenset(), frozenset({0, 1}))


def test_extra_edges_make_a_repeat_wait_for_its_original() -> None:
    plan = plan_calls([read("a"), read("a")], after={1: 0})
    assert plan.waits_for[1] == frozenset({0})
    with pytest.raises(ValueError):
        plan_calls([read("a"), read("a")], after={0: 1})


def test_an_empty_batch_has_an_empty_plan() -> None:
    plan = plan_calls([])
    assert plan.levels == ()
    assert Scheduler(plan).finished


# -- the scheduler --------------------------------------------------------------------------------------


def test_ready_calls_start_together_in_source_order() -> None:
    scheduler = Scheduler(plan_calls([read("a"), read("a"), write("a")]))
    assert scheduler.take() == [0, 1]
    assert scheduler.take() == []
    scheduler.finish(1)
    assert scheduler.take() == []
    scheduler.finish(0)
    assert scheduler.take() == [2]
    scheduler.finish(2)
    assert scheduler.finished


def test_the_cap_bounds_how_many_run() -> None:
    scheduler = Scheduler(plan_calls([read("a"), read("b"), read("c")]), max_concurrency=2)
    assert scheduler.take() == [0, 1]
    scheduler.finish(0)
    assert scheduler.take() == [2]


def test_an_uncleared_call_holds_no_slot_and_later_calls_pass_it() -> None:
    scheduler = Scheduler(plan_calls([read("a"), read("b")]), max_concurrency=1, cleared=[1])
    assert scheduler.take() == [1]
    scheduler.finish(1)
    assert scheduler.take() == []
    scheduler.clear(0)
    assert scheduler.take() == [0]


def test_closing_a_call_releases_its_dependants() -> None:
    scheduler = Scheduler(plan_calls([write("a"), read("a")]), cleared=[1])
    assert scheduler.take() == []
    scheduler.close(0)
    assert scheduler.take() == [1]
    with pytest.raises(ValueError):
        scheduler.close(1)
    with pytest.raises(ValueError):
        scheduler.finish(0)


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(ValueError):
        Scheduler(Plan(()), max_concurrency=-1)


# -- properties -----------------------------------------------------------------------------------------

_claim = st.builds(ResourceClaim, st.sampled_from("abc"), st.sampled_from(["read", "write"]))
_claims: st.SearchStrategy[Claims | None] = st.one_of(
    st.just("exclusive"), st.lists(_claim, max_size=3).map(tuple), st.none()
)


@given(
    claims=st.lists(_claims, max_size=9),
    cap=st.integers(0, 4),
    sequential=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_completion_order_keeps_conflicts_apart_and_runs_everything(
    claims: list[Claims | None], cap: int, sequential: bool, seed: int
) -> None:
    rng = random.Random(seed)
    plan = plan_calls(claims, sequential=sequential)
    scheduler = Scheduler(plan, max_concurrency=cap)
    for index, mine in enumerate(claims):
        if mine is None:
            scheduler.close(index)
    started: list[int] = []
    finished: set[int] = set()
    while not scheduler.finished:
        taken = scheduler.take()
        started.extend(taken)
        running = scheduler.running
        assert running, "the scheduler stalled"
        assert not cap or len(running) <= cap
        if sequential:
            assert len(running) == 1
        for i in running:
            for j in running:
                mine, theirs = claims[i], claims[j]
                if i < j and mine is not None and theirs is not None:
                    assert not conflicts(mine, theirs)
        # Greedy: nothing left waiting could have started too.
        if not cap or len(running) < cap:
            assert not [i for i in scheduler.waiting if plan.waits_for[i] <= finished]
        for i in taken:
            # Every earlier conflicting call finished before this one started.
            for j in range(i):
                mine, theirs = claims[i], claims[j]
                if mine is not None and theirs is not None and (sequential or conflicts(mine, theirs)):
                    assert j in finished
        done = rng.choice(sorted(running))
        scheduler.finish(done)
        finished.add(done)
    assert sorted(started) == [i for i, c in enumerate(claims) if c is not None]
