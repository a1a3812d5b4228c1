"""Running one step's tool calls: order, concurrency, dedupe, dispositions, timeouts, abort, hooks.

Order and concurrency are proven with events and gates (asyncio.Event, asyncio.Barrier), never with sleeps:
a call that should run beside another waits at a barrier only both can pass together.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from steadyloop.events import (
    Event,
    HookDenied,
    LateSettlement,
    Notice,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from steadyloop.messages import TextPart, ToolCall
from steadyloop.tools._call import LOOP_SKIPPED
from steadyloop.tools.definition import ResourceClaim, Tool, ToolContext, ToolResult, tool
from steadyloop.tools.execution import (
    BatchOutcome,
    HookDecision,
    ToolHooks,
    ToolPolicy,
    run_tool_calls,
)
from steadyloop.tools.loop_detection import LoopVerdict

# A run that should finish at once gets this long before the test calls it hung; nothing waits for it.
HANG = 5.0

Execute = Callable[[dict[str, Any], ToolContext], Awaitable[object]]


class Events(list[Event]):
    """An ``emit`` that keeps what it got and wakes tests waiting for a kind of event."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[Callable[[Event], bool], asyncio.Event]] = []
        self.on: Callable[[Event], None] = lambda e: None

    def __call__(self, event: Event) -> None:
        self.append(event)
        self.on(event)
        for match, flag in self._waiters:
            if match(event):
                flag.set()

    async def wait_for(self, match: Callable[[Event], bool]) -> None:
        flag = asyncio.Event()
        if any(match(e) for e in self):
            return
        self._waiters.append((match, flag))
        await asyncio.wait_for(flag.wait(), HANG)

    def trace(self) -> list[str]:
        """Start and end of each call, in the order they happened: ``+id`` and ``-id``."""
        out = []
        for e in self:
            if isinstance(e, ToolExecutionStart):
                out.append(f"+{e.call_id}")
            elif isinstance(e, ToolExecutionEnd):
                out.append(f"-{e.call_id}")
        return out

    def ends(self) -> list[ToolExecutionEnd]:
        return [e for e in self if isinstance(e, ToolExecutionEnd)]


def make(name: str, execute: Execute, **options: Any) -> Tool:
    return Tool(
        name=name,
        description=name,
        parameters={"type": "object", "properties": {}},
        execute=execute,
        **options,
    )


def call(call_id: str, name: str, raw: str | None = None, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, arguments, raw if raw is not None else json.dumps(arguments))


def answering(text: str = "ok", log: list[str] | None = None) -> Execute:
    async def execute(arguments: dict[str, Any], context: ToolContext) -> object:
        if log is not None:
            log.append(context.call_id)
        return text

    return execute


async def run(calls: Sequence[ToolCall], tools: Sequence[Tool], **options: Any) -> BatchOutcome:
    return await asyncio.wait_for(run_tool_calls(calls, {t.name: t for t in tools}, **options), HANG)


def texts(outcome: BatchOutcome) -> list[str]:
    return [r.content if isinstance(r.content, str) else "" for r in outcome.results]


READ_X = [ResourceClaim("x", "read")]
WRITE_X = [ResourceClaim("x", "write")]


# -- order and concurrency ------------------------------------------------------------------------------


async def test_results_keep_call_order_while_ends_come_in_completion_order() -> None:
    gate = asyncio.Event()

    async def slow(arguments: dict[str, Any], context: ToolContext) -> str:
        await gate.wait()
        return "slow"

    async def fast(arguments: dict[str, Any], context: ToolContext) -> str:
        gate.set()
        return "fast"

    events = Events()
    outcome = await run(
        [call("a", "slow"), call("b", "fast")],
        [make("slow", slow, claims=[ResourceClaim("p")]), make("fast", fast, claims=[ResourceClaim("q")])],
        emit=events,
    )
    assert [r.call_id for r in outcome.results] == ["a", "b"]
    assert texts(outcome) == ["slow", "fast"]
    assert [e.call_id for e in events.ends()] == ["b", "a"]
    assert [o.disposition for o in outcome.outcomes] == ["completed", "completed"]


async def test_two_reads_of_one_key_run_together() -> None:
    barrier = asyncio.Barrier(2)

    async def reader(arguments: dict[str, Any], context: ToolContext) -> str:
        await barrier.wait()  # only passes when both reads are running at once
        return "read"

    outcome = await run(
        [call("a", "read", n=1), call("b", "read", n=2)],
        [make("read", reader, claims=READ_X)],
    )
    assert texts(outcome) == ["read", "read"]


async def test_a_write_waits_for_the_read_before_it() -> None:
    gate = asyncio.Event()
    seen: dict[str, bool] = {}
    read_done = False

    async def reader(arguments: dict[str, Any], context: ToolContext) -> str:
        nonlocal read_done
        await gate.wait()
        read_done = True
        return "read"

    async def writer(arguments: dict[str, Any], context: ToolContext) -> str:
        seen["read_done"] = read_done
        return "written"

    async def opener(arguments: dict[str, Any], context: ToolContext) -> str:
        gate.set()  # a call on another key, running beside the read, lets it finish
        return "opened"

    events = Events()
    outcome = await run(
        [call("r", "read"), call("w", "write"), call("o", "open")],
        [
            make("read", reader, claims=READ_X),
            make("write", writer, claims=WRITE_X),
            make("open", opener, claims=[ResourceClaim("y", "write")]),
        ],
        emit=events,
    )
    assert texts(outcome) == ["read", "written", "opened"]
    assert seen == {"read_done": True}
    trace = events.trace()
    assert trace.index("-r") < trace.index("+w")
    assert trace.index("+o") < trace.index("-r")


async def test_an_unclaimed_tool_runs_alone() -> None:
    events = Events()
    await run(
        [call("a", "read"), call("b", "plain"), call("c", "read2")],
        [
            make("read", answering(), claims=READ_X),
            make("plain", answering()),
            make("read2", answering(), claims=[ResourceClaim("y")]),
        ],
        emit=events,
    )
    assert events.trace() == ["+a", "-a", "+b", "-b", "+c", "-c"]


async def test_unconflicting_calls_overlap() -> None:
    events = Events()
    tools = [make(n, answering(), claims=[ResourceClaim(n, "write")]) for n in "abc"]
    await run([call(n, n) for n in "abc"], tools, emit=events, policy=ToolPolicy(max_concurrency=0))
    assert events.trace()[:3] == ["+a", "+b", "+c"]


async def test_the_concurrency_cap_is_kept() -> None:
    events = Events()
    tools = [make(n, answering(), claims=[ResourceClaim(n, "write")]) for n in "abcd"]
    await run([call(n, n) for n in "abcd"], tools, emit=events, policy=ToolPolicy(max_concurrency=2))
    in_flight = peak = 0
    for mark in events.trace():
        in_flight += 1 if mark.startswith("+") else -1
        peak = max(peak, in_flight)
    assert peak == 2


async def test_one_sequential_tool_makes_the_whole_batch_sequential() -> None:
    events = Events()
    await run(
        [call("a", "read", n=1), call("b", "read", n=2), call("c", "seq")],
        [make("read", answering(), claims=READ_X), make("seq", answering(), claims=[], sequential=True)],
        emit=events,
    )
    assert events.trace() == ["+a", "-a", "+b", "-b", "+c", "-c"]


async def test_a_sequential_policy_runs_one_at_a_time() -> None:
    events = Events()
    await run(
        [call("a", "read", n=1), call("b", "read", n=2)],
        [make("read", answering(), claims=READ_X)],
        emit=events,
        policy=ToolPolicy(parallel=False),
    )
    assert events.trace() == ["+a", "-a", "+b", "-b"]


async def test_a_claims_function_that_raises_closes_only_that_call() -> None:
    barrier = asyncio.Barrier(2)

    async def reader(arguments: dict[str, Any], context: ToolContext) -> str:
        await barrier.wait()
        return "read"

    def claims(arguments: Any) -> list[ResourceClaim]:
        return [ResourceClaim(arguments["path"])]

    outcome = await run(
        [call("a", "read", n=1), call("b", "picky"), call("c", "read", n=2)],
        [make("read", reader, claims=READ_X), make("picky", answering(), claims=claims)],
    )
    assert [o.disposition for o in outcome.outcomes] == ["completed", "failed", "completed"]
    assert texts(outcome)[1] == "This call could not be planned: KeyError: 'path'"


# -- dispositions ---------------------------------------------------------------------------------------


async def test_an_unknown_tool_is_told_which_tools_exist() -> None:
    events = Events()
    outcome = await run(
        [call("a", "nope")], [make("zeta", answering()), make("alpha", answering())], emit=events
    )
    (only,) = outcome.outcomes
    assert only.disposition == "failed"
    assert only.result.is_error
    assert only.result.content == "Unknown tool 'nope'. Available tools: alpha, zeta."
    assert events.trace() == ["-a"]


async def test_a_tool_taken_away_while_the_batch_runs_is_unknown_and_never_runs() -> None:
    ran: list[str] = []
    tools: dict[str, Tool] = {}

    async def revoke(arguments: dict[str, Any], context: ToolContext) -> str:
        del tools["write"]  # the host takes the tool away while the batch runs
        return "revoked"

    tools.update(revoke=make("revoke", revoke), write=make("write", answering(log=ran)))
    outcome = await asyncio.wait_for(
        run_tool_calls([call("a", "revoke"), call("b", "write")], tools, policy=ToolPolicy(parallel=False)),
        HANG,
    )
    assert ran == []
    assert [o.disposition for o in outcome.outcomes] == ["completed", "failed"]
    assert texts(outcome)[1] == "Unknown tool 'write'. Available tools: revoke."


async def test_a_tool_put_in_another_s_place_runs_only_after_its_own_preflight() -> None:
    ran: list[str] = []
    asked: list[str] = []
    replacement = make("look", answering("new", log=ran))
    tools: dict[str, Tool] = {"look": make("look", answering("old", log=ran))}

    def before(tool_call: ToolCall, arguments: dict[str, Any]) -> None:
        asked.append(tool_call.id)
        tools["look"] = replacement  # replaced while its call was being checked

    outcome = await asyncio.wait_for(
        run_tool_calls([call("a", "look")], tools, hooks=ToolHooks(before_tool_call=before)), HANG
    )
    assert texts(outcome) == ["new"] and ran == ["a"]
    assert asked == ["a", "a"]  # checked again for the tool now in force


async def test_a_tool_that_raises_becomes_a_failed_result() -> None:
    async def broken(arguments: dict[str, Any], context: ToolContext) -> str:
        raise FileNotFoundError("no such file: a.txt")

    outcome = await run([call("a", "broken")], [make("broken", broken)])
    (only,) = outcome.outcomes
    assert (only.disposition, only.result.is_error) == ("failed", True)
    assert only.result.content == "FileNotFoundError: no such file: a.txt"


async def test_an_error_result_is_completed_and_stays_an_error() -> None:
    async def refuses(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult("not allowed here", details={"code": 7}, is_error=True)

    outcome = await run([call("a", "refuses")], [make("refuses", refuses)])
    (only,) = outcome.outcomes
    assert (only.disposition, only.result.is_error, dict(only.details)) == ("completed", True, {"code": 7})


async def test_truncated_arguments_are_not_healed_and_the_tool_does_not_run() -> None:
    ran: list[str] = []
    outcome = await run(
        [call("a", "write", raw='{"path": "a.txt", "content": "hel')],
        [make("write", answering(log=ran))],
        truncated=True,
    )
    (only,) = outcome.outcomes
    assert only.disposition == "failed"
    assert "cut off" in str(only.result.content)
    assert ran == []


async def test_almost_json_is_repaired_and_the_tool_gets_a_dict() -> None:
    got: list[dict[str, Any]] = []

    async def echo(arguments: dict[str, Any], context: ToolContext) -> str:
        got.append(arguments)
        return "ok"

    await run([call("a", "echo", raw="{'path': 'a.txt', 'all': True,}")], [make("echo", echo)])
    assert got == [{"path": "a.txt", "all": True}]


async def test_the_arguments_transform_is_what_the_tool_and_events_see() -> None:
    got: list[dict[str, Any]] = []

    async def echo(arguments: dict[str, Any], context: ToolContext) -> str:
        got.append(arguments)
        return "ok"

    events = Events()
    hooks = ToolHooks(transform_arguments=lambda args, name: {**args, "root": "/srv"})
    await run([call("a", "echo", path="x")], [make("echo", echo)], hooks=hooks, emit=events)
    assert got == [{"path": "x", "root": "/srv"}]
    (start,) = [e for e in events if isinstance(e, ToolExecutionStart)]
    assert start.arguments == {"path": "x", "root": "/srv"}


async def test_a_transform_that_raises_fails_the_call() -> None:
    def transform(args: dict[str, Any], name: str) -> dict[str, Any]:
        raise ValueError("bad path")

    outcome = await run(
        [call("a", "echo")], [make("echo", answering())], hooks=ToolHooks(transform_arguments=transform)
    )
    assert outcome.outcomes[0].disposition == "failed"
    assert texts(outcome) == ["The arguments could not be prepared: ValueError: bad path"]


async def test_events_carry_effect_and_duration() -> None:
    events = Events()
    await run([call("a", "look"), call("b", "nope")], [make("look", answering(), effect="read")], emit=events)
    ran, unknown = sorted(events.ends(), key=lambda e: e.call_id)
    assert ran.effect == "read" and ran.duration_ms is not None and ran.duration_ms >= 0
    assert unknown.effect is None and unknown.duration_ms is None


async def test_progress_becomes_update_events_also_from_a_worker_thread() -> None:
    @tool
    def count(context: ToolContext) -> str:
        """Count in a worker thread."""
        context.progress("half way")
        return "done"

    async def counting(arguments: dict[str, Any], context: ToolContext) -> str:
        context.progress("step 1")
        return "done"

    events = Events()
    await run([call("a", "count"), call("b", "counting")], [count, make("counting", counting)], emit=events)
    await events.wait_for(lambda e: isinstance(e, ToolExecutionUpdate) and e.call_id == "a")
    updates = {e.call_id: e.text for e in events if isinstance(e, ToolExecutionUpdate)}
    assert updates == {"a": "half way", "b": "step 1"}
    kinds = [e.type for e in events if getattr(e, "call_id", None) == "b"]
    assert kinds == ["tool_execution_start", "tool_execution_update", "tool_execution_end"]


async def test_an_empty_batch_answers_nothing_and_does_not_terminate() -> None:
    outcome = await run([], [])
    assert outcome.outcomes == () and outcome.results == [] and not outcome.terminate


# -- dedupe ---------------------------------------------------------------------------------------------


async def test_identical_calls_run_once_and_share_the_answer() -> None:
    ran: list[str] = []
    events = Events()
    outcome = await run(
        [call("a", "look", raw="{'path': 'x', 'n': 1}"), call("b", "look", raw='{"n": 1, "path": "x"}')],
        [make("look", answering("contents", log=ran))],
        policy=ToolPolicy(parallel=False),
        emit=events,
    )
    assert ran == ["a"]
    assert [r.call_id for r in outcome.results] == ["a", "b"]
    assert texts(outcome) == ["contents", "contents"]
    assert [o.shared_from for o in outcome.outcomes] == [None, "a"]
    assert [e.call_id for e in events.ends()] == ["a", "b"]
    assert events.trace() == ["+a", "-a", "-b"]


async def test_an_identical_call_in_flight_waits_for_the_first_answer() -> None:
    gate = asyncio.Event()
    ran: list[str] = []

    async def reader(arguments: dict[str, Any], context: ToolContext) -> str:
        ran.append(context.call_id)
        await gate.wait()
        return "contents"

    async def opener(arguments: dict[str, Any], context: ToolContext) -> str:
        gate.set()
        return "opened"

    events = Events()
    outcome = await run(
        [call("a", "read", path="x"), call("b", "read", path="x"), call("c", "open")],
        [make("read", reader, claims=READ_X), make("open", opener, claims=[ResourceClaim("y")])],
        emit=events,
    )
    assert ran == ["a"]
    assert texts(outcome) == ["contents", "contents", "opened"]
    assert events.trace().index("+c") < events.trace().index("-a")


async def test_a_call_that_threw_is_not_shared_so_its_repeat_runs_for_real() -> None:
    attempts: list[str] = []

    async def flaky(arguments: dict[str, Any], context: ToolContext) -> str:
        attempts.append(context.call_id)
        if len(attempts) == 1:
            raise ConnectionError("reset by peer")
        return "fetched"

    for policy in (ToolPolicy(parallel=False), ToolPolicy()):
        attempts.clear()
        outcome = await run(
            [call("a", "fetch", url="u"), call("b", "fetch", url="u"), call("c", "fetch", url="u")],
            [make("fetch", flaky, claims=READ_X)],
            policy=policy,
        )
        assert attempts == ["a", "b"]
        assert [o.disposition for o in outcome.outcomes] == ["failed", "completed", "completed"]
        assert [o.shared_from for o in outcome.outcomes] == [None, None, "b"]


@pytest.mark.parametrize(
    ("policy", "tool_dedupe"),
    [
        (ToolPolicy(dedupe=False), True),
        (ToolPolicy(dedupe=lambda c: c.name != "send_email"), True),
        (ToolPolicy(), False),
    ],
    ids=["policy", "predicate", "tool"],
)
async def test_dedupe_can_be_turned_off(policy: ToolPolicy, tool_dedupe: bool) -> None:
    sent: list[str] = []
    await run(
        [call("a", "send_email", to="x"), call("b", "send_email", to="x")],
        [make("send_email", answering("sent", log=sent), dedupe=tool_dedupe)],
        policy=policy,
    )
    assert sent == ["a", "b"]


# -- timeouts and late settlement -----------------------------------------------------------------------


def test_the_effective_timeout_is_the_tools_then_per_name_then_the_fallback() -> None:
    policy = ToolPolicy(timeout=30, timeouts={"slow": 300, "free": 0})
    assert policy.timeout_for(make("slow", answering(), timeout=5)) == 5
    assert policy.timeout_for(make("slow", answering())) == 300
    assert policy.timeout_for(make("other", answering())) == 30
    assert policy.timeout_for(make("free", answering())) is None
    assert policy.timeout_for(make("slow", answering(), timeout=0)) is None
    assert ToolPolicy().timeout_for(make("other", answering())) is None


async def test_a_timeout_closes_the_call_and_cancels_the_tool() -> None:
    seen: dict[str, bool] = {}

    async def hangs(arguments: dict[str, Any], context: ToolContext) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["cancelled_flag"] = context.cancelled.is_set()
            raise
        return "never"

    events = Events()
    outcome = await run(
        [call("a", "hangs")], [make("hangs", hangs)], policy=ToolPolicy(timeout=0.01), emit=events
    )
    (only,) = outcome.outcomes
    assert (only.disposition, only.result.content, only.result.is_error) == (
        "timeout",
        "Timed out after 0.01s.",
        True,
    )
    assert seen == {"cancelled_flag": True}
    assert not [e for e in events if isinstance(e, LateSettlement)]


def stubborn(release: asyncio.Event, answer: str = "late answer") -> Execute:
    """A tool that ignores its cancellation and finishes when released."""

    async def execute(arguments: dict[str, Any], context: ToolContext) -> str:
        inner = asyncio.ensure_future(release.wait())
        while True:
            try:
                await asyncio.shield(inner)
            except asyncio.CancelledError:
                continue
            return answer

    return execute


async def test_a_tool_that_ignores_its_timeout_settles_late_without_touching_the_transcript() -> None:
    release = asyncio.Event()
    events = Events()
    outcome = await run(
        [call("a", "stubborn")], [make("stubborn", stubborn(release), timeout=0.01)], emit=events
    )
    assert outcome.outcomes[0].disposition == "timeout"
    release.set()
    await events.wait_for(lambda e: isinstance(e, LateSettlement))
    (late,) = [e for e in events if isinstance(e, LateSettlement)]
    assert (late.call_id, late.name, late.outcome, late.text) == ("a", "stubborn", "completed", "late answer")
    assert outcome.results[0].content == "Timed out after 0.01s."
    assert len(events.ends()) == 1


async def test_a_sync_tool_in_a_thread_settles_late() -> None:
    release = threading.Event()

    def blocking() -> str:
        release.wait(HANG)
        return "thread answer"

    async def in_thread(arguments: dict[str, Any], context: ToolContext) -> str:
        work = asyncio.ensure_future(asyncio.to_thread(blocking))
        while True:
            try:
                return await asyncio.shield(work)
            except asyncio.CancelledError:
                continue  # like a thread, it cannot be stopped from outside

    events = Events()
    outcome = await run(
        [call("a", "blocking")], [make("blocking", in_thread)], policy=ToolPolicy(timeout=0.01), emit=events
    )
    assert outcome.outcomes[0].disposition == "timeout"
    release.set()
    await events.wait_for(lambda e: isinstance(e, LateSettlement))
    (late,) = [e for e in events if isinstance(e, LateSettlement)]
    assert (late.outcome, late.text) == ("completed", "thread answer")


async def test_late_settlement_can_be_ignored() -> None:
    release = asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []

    async def remembers(arguments: dict[str, Any], context: ToolContext) -> object:
        current = asyncio.current_task()
        assert current is not None
        tasks.append(current)
        return await stubborn(release)(arguments, context)

    events = Events()
    await run(
        [call("a", "stubborn")],
        [make("stubborn", remembers, timeout=0.01)],
        policy=ToolPolicy(late_settlement="ignore"),
        emit=events,
    )
    release.set()
    # The runner's done-callback was added first, so it has run by the time this wait returns.
    await asyncio.wait(tasks)
    assert not tasks[0].cancelled()
    assert not [e for e in events if isinstance(e, LateSettlement)]


# -- abort, steering and cancellation -------------------------------------------------------------------


async def test_an_abort_stops_running_calls_and_does_not_run_the_rest() -> None:
    cancel = asyncio.Event()
    flags: list[bool] = []
    stopped = asyncio.Event()

    async def hangs(arguments: dict[str, Any], context: ToolContext) -> str:
        try:
            await asyncio.Event().wait()
        finally:
            flags.append(context.cancelled.is_set())
            stopped.set()
        return "never"

    events = Events()
    events.on = lambda e: cancel.set() if isinstance(e, ToolExecutionStart) else None
    outcome = await run(
        [call("a", "hangs"), call("b", "hangs", n=2)], [make("hangs", hangs)], emit=events, cancel=cancel
    )
    assert [(o.disposition, o.result.content) for o in outcome.outcomes] == [
        ("aborted", "Stopped before this call finished."),
        ("aborted", "Not run: the run stopped first."),
    ]
    assert sorted(events.trace()) == ["+a", "-a", "-b"]
    await asyncio.wait_for(stopped.wait(), HANG)
    assert flags == [True]


async def test_an_abort_before_the_batch_runs_nothing() -> None:
    cancel = asyncio.Event()
    cancel.set()
    ran: list[str] = []
    events = Events()
    outcome = await run(
        [call("a", "look"), call("b", "look", n=2)],
        [make("look", answering(log=ran))],
        cancel=cancel,
        emit=events,
    )
    assert ran == []
    assert {o.disposition for o in outcome.outcomes} == {"aborted"}
    assert events.trace() == ["-a", "-b"]


async def test_steering_skips_the_calls_not_yet_started() -> None:
    ran: list[str] = []
    queued = False

    def interrupt() -> bool:
        return queued

    async def first(arguments: dict[str, Any], context: ToolContext) -> str:
        nonlocal queued
        ran.append(context.call_id)
        queued = True  # a user message arrives while the first call runs
        return "done"

    outcome = await run(
        [call("a", "first"), call("b", "look"), call("c", "look", n=2)],
        [make("first", first), make("look", answering(log=ran))],
        interrupt=interrupt,
    )
    assert ran == ["a"]
    assert [o.disposition for o in outcome.outcomes] == ["completed", "skipped", "skipped"]
    assert texts(outcome)[1:] == ["Skipped due to queued user message."] * 2


async def test_steering_before_the_batch_skips_everything() -> None:
    outcome = await run(
        [call("a", "look"), call("b", "look", n=2)],
        [make("look", answering(), claims=READ_X)],
        interrupt=lambda: True,
    )
    assert [o.disposition for o in outcome.outcomes] == ["skipped", "skipped"]


async def test_cancelling_the_task_cancels_every_running_tool() -> None:
    tasks: list[asyncio.Task[Any]] = []
    both_running = asyncio.Event()

    async def hangs(arguments: dict[str, Any], context: ToolContext) -> str:
        current = asyncio.current_task()
        assert current is not None
        tasks.append(current)
        if len(tasks) == 2:
            both_running.set()
        await asyncio.Event().wait()
        return "never"

    batch = asyncio.create_task(
        run_tool_calls(
            [call("a", "hangs", n=1), call("b", "hangs", n=2)], {"hangs": make("hangs", hangs, claims=READ_X)}
        )
    )
    await asyncio.wait_for(both_running.wait(), HANG)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert all(t.cancelled() for t in tasks)
    assert asyncio.all_tasks() == {asyncio.current_task()}


# -- hooks ----------------------------------------------------------------------------------------------


async def test_a_before_hook_blocks_with_a_reason_the_model_reads() -> None:
    ran: list[str] = []
    events = Events()
    hooks = ToolHooks(
        before_tool_call=lambda c, args: (
            HookDecision.block("shell is disabled") if c.name == "shell" else None
        )
    )
    outcome = await run(
        [call("a", "shell"), call("b", "look")],
        [make("shell", answering(log=ran)), make("look", answering(log=ran))],
        hooks=hooks,
        emit=events,
    )
    assert ran == ["b"]
    assert [(o.disposition, o.result.content) for o in outcome.outcomes] == [
        ("blocked", "Blocked: shell is disabled"),
        ("completed", "ok"),
    ]
    (denied,) = [e for e in events if isinstance(e, HookDenied)]
    assert (denied.hook, denied.reason, denied.call_id) == ("before_tool_call", "shell is disabled", "a")
    assert "+a" not in events.trace() and "-a" in events.trace()


async def test_a_before_hook_may_await_a_decision() -> None:
    decision: asyncio.Future[HookDecision] = asyncio.get_running_loop().create_future()
    asked = asyncio.Event()

    async def before(c: ToolCall, args: dict[str, Any]) -> HookDecision:
        asked.set()
        return await decision

    async def decide() -> None:
        await asked.wait()
        decision.set_result(HookDecision.allow())

    decider = asyncio.create_task(decide())
    outcome = await run(
        [call("a", "look")], [make("look", answering())], hooks=ToolHooks(before_tool_call=before)
    )
    await decider
    assert outcome.outcomes[0].disposition == "completed"


async def test_an_abort_ends_a_before_hook_that_waits() -> None:
    cancel = asyncio.Event()
    cancelled: list[bool] = []

    async def before(c: ToolCall, args: dict[str, Any]) -> None:
        cancel.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    ran: list[str] = []
    outcome = await run(
        [call("a", "look")],
        [make("look", answering(log=ran))],
        hooks=ToolHooks(before_tool_call=before),
        cancel=cancel,
    )
    assert ran == [] and cancelled == [True]
    assert [(o.disposition, o.result.content) for o in outcome.outcomes] == [
        ("aborted", "Not run: the run stopped first.")
    ]


async def test_a_before_hook_that_raises_blocks_the_call() -> None:
    def before(c: ToolCall, args: dict[str, Any]) -> None:
        raise RuntimeError("policy store down")

    outcome = await run(
        [call("a", "look")], [make("look", answering())], hooks=ToolHooks(before_tool_call=before)
    )
    assert outcome.outcomes[0].disposition == "blocked"
    assert texts(outcome) == ["Blocked: the before_tool_call hook failed (RuntimeError: policy store down)"]


async def test_an_after_hook_replaces_the_result() -> None:
    async def after(c: ToolCall, result: ToolResult) -> ToolResult:
        return ToolResult(f"[audited] {result.content}", details={"audited": True})

    outcome = await run(
        [call("a", "look")], [make("look", answering("raw"))], hooks=ToolHooks(after_tool_call=after)
    )
    assert texts(outcome) == ["[audited] raw"]
    assert outcome.outcomes[0].details == {"audited": True}


async def test_an_after_hook_that_raises_keeps_the_result_and_says_so() -> None:
    def after(c: ToolCall, result: ToolResult) -> None:
        raise ValueError("oops")

    events = Events()
    outcome = await run(
        [call("a", "look")],
        [make("look", answering("raw"))],
        hooks=ToolHooks(after_tool_call=after),
        emit=events,
    )
    assert texts(outcome) == ["raw"]
    assert [e.name for e in events if isinstance(e, Notice)] == ["after_tool_call"]


async def test_terminate_only_when_every_result_asks() -> None:
    def after(c: ToolCall, result: ToolResult) -> ToolResult | None:
        return ToolResult(result.content, terminate=True) if c.name == "done" else None

    hooks = ToolHooks(after_tool_call=after)
    tools = [make("done", answering()), make("look", answering())]
    mixed = await run([call("a", "done"), call("b", "look")], tools, hooks=hooks)
    assert [o.terminate for o in mixed.outcomes] == [True, False]
    assert not mixed.terminate
    both = await run([call("a", "done"), call("b", "done", n=2)], tools, hooks=hooks)
    assert both.terminate

    async def finishing(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult("bye", terminate=True)

    by_tool = await run([call("a", "finish")], [make("finish", finishing)])
    assert by_tool.terminate


# -- the loop guard -------------------------------------------------------------------------------------


class FakeGuard:
    def __init__(self, stop_at_call: int | None = None, stop_at_result: int | None = None) -> None:
        self.calls: list[str] = []
        self.results: list[tuple[str, str]] = []
        self.stop: LoopVerdict | None = None
        self._stop_at_call = stop_at_call
        self._stop_at_result = stop_at_result

    def record_call(self, call: ToolCall) -> str | None:
        self.calls.append(call.id)
        if len(self.calls) == self._stop_at_call:
            self.stop = LoopVerdict("identical_repeat", call.name, "looping")
            return "looping"
        return "you repeat yourself" if len(self.calls) == 2 else None

    def record_result(self, name: str, text: str) -> str | None:
        self.results.append((name, text))
        if len(self.results) == self._stop_at_result:
            self.stop = LoopVerdict("no_progress", name, "no progress")
            return "no progress"
        return "same result again"


async def test_loop_notes_are_added_to_the_results() -> None:
    async def seen(arguments: dict[str, Any], context: ToolContext) -> str:
        return f"seen {arguments['n']}"

    guard = FakeGuard()
    outcome = await run(
        [call("a", "look", n=1), call("b", "look", n=2)], [make("look", seen)], loop_detector=guard
    )
    assert guard.calls == ["a", "b"]
    assert texts(outcome) == [
        "seen 1\n\nsame result again",
        "seen 2\n\nyou repeat yourself\n\nsame result again",
    ]
    assert outcome.loop is None


async def test_one_tools_same_result_is_told_to_the_guard_once_a_batch() -> None:
    # six lookups in one step that all answer the same are one decision, not six tries without progress
    guard = FakeGuard(stop_at_result=2)
    outcome = await run(
        [call(f"c{n}", "look", n=n) for n in range(6)],
        [make("look", answering("not found"))],
        loop_detector=guard,
    )
    assert guard.results == [("look", "not found")]
    assert outcome.loop is None
    assert [o.disposition for o in outcome.outcomes] == ["completed"] * 6


async def test_notes_on_parts_become_another_text_part() -> None:
    async def parts(arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult((TextPart("a"),))

    outcome = await run([call("a", "parts")], [make("parts", parts)], loop_detector=FakeGuard())
    assert outcome.results[0].content == (TextPart("a"), TextPart("same result again"))


async def test_a_loop_verdict_while_planning_starts_nothing() -> None:
    ran: list[str] = []
    guard = FakeGuard(stop_at_call=2)
    outcome = await run(
        [call("a", "look", n=1), call("b", "look", n=2), call("c", "look", n=3)],
        [make("look", answering(log=ran))],
        loop_detector=guard,
    )
    assert ran == []
    assert guard.calls == ["a", "b"]
    assert [o.disposition for o in outcome.outcomes] == ["skipped"] * 3
    assert texts(outcome)[1] == f"{LOOP_SKIPPED}\n\nlooping"
    assert outcome.loop == LoopVerdict("identical_repeat", "look", "looping")


async def test_a_loop_verdict_on_a_result_skips_the_calls_not_yet_started() -> None:
    ran: list[str] = []
    guard = FakeGuard(stop_at_result=1)
    outcome = await run(
        [call("a", "look", n=1), call("b", "look", n=2), call("c", "look", n=3)],
        [make("look", answering(log=ran))],
        loop_detector=guard,
        policy=ToolPolicy(parallel=False),
    )
    assert ran == ["a"]
    assert [o.disposition for o in outcome.outcomes] == ["completed", "skipped", "skipped"]
    assert texts(outcome)[0] == "ok\n\nno progress"
    assert outcome.loop is not None and outcome.loop.kind == "no_progress"
