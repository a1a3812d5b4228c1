"""Approvals: the policy, the in-memory broker, and gated calls in ``run_tool_calls``.

A gated tool never runs on silence: no decision in time, an abort, or no broker at all is a deny.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.events import ApprovalDecided, ApprovalRequired, Event, ToolExecutionEnd, ToolExecutionStart
from steadyloop.messages import ToolCall
from steadyloop.tools.approvals import (
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRequest,
    InMemoryApprovalBroker,
)
from steadyloop.tools.definition import Tool, ToolContext
from steadyloop.tools.execution import BatchOutcome, HookDecision, ToolHooks, ToolPolicy, run_tool_calls

HANG = 5.0


class Events(list[Event]):
    def __init__(self) -> None:
        super().__init__()
        self.on: Callable[[Event], None] = lambda e: None

    def __call__(self, event: Event) -> None:
        self.append(event)
        self.on(event)

    def kinds(self) -> list[str]:
        return [f"{e.type}:{getattr(e, 'call_id', '')}" for e in self]


def make(name: str, log: list[str], effect: Any = "destructive", **options: Any) -> Tool:
    async def execute(arguments: dict[str, Any], context: ToolContext) -> str:
        log.append(context.call_id)
        return "done"

    return Tool(
        name=name, description=name, parameters={"type": "object"}, execute=execute, effect=effect, **options
    )


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(call_id, name, arguments, json.dumps(arguments))


async def run(calls: Sequence[ToolCall], tools: Sequence[Tool], **options: Any) -> BatchOutcome:
    return await asyncio.wait_for(run_tool_calls(calls, {t.name: t for t in tools}, **options), HANG)


def request(approval_id: str = "ap1") -> ApprovalRequest:
    return ApprovalRequest(approval_id, "call_1", "rm", {"path": "/"}, "destructive", 0.0)


# -- the policy -----------------------------------------------------------------------------------------


def test_destructive_tools_are_gated_by_default() -> None:
    policy = ApprovalPolicy()
    assert policy.requires(make("rm", [], effect="destructive"))
    assert not policy.requires(make("cat", [], effect="read"))
    assert not policy.requires(make("mystery", [], effect=None))


def test_overrides_gate_or_free_a_tool_by_name() -> None:
    policy = ApprovalPolicy(
        require_for=frozenset({"mutate-irreversible"}), overrides={"rm": False, "cat": True}
    )
    assert not policy.requires(make("rm", [], effect="destructive"))
    assert policy.requires(make("cat", [], effect="read"))
    assert policy.requires(make("send", [], effect="mutate-irreversible"))


def test_a_policy_with_unknown_classes_or_no_time_is_refused() -> None:
    with pytest.raises(InvalidInput):
        ApprovalPolicy(require_for=frozenset({"dangerous"}))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        ApprovalPolicy(timeout_s=0)


# -- the in-memory broker -------------------------------------------------------------------------------


async def test_the_broker_keeps_pending_requests_until_decided() -> None:
    broker = InMemoryApprovalBroker()
    await broker.request(request("ap1"))
    await broker.request(request("ap2"))
    assert [r.approval_id for r in broker.pending()] == ["ap1", "ap2"]
    assert await broker.decide("ap1", "allow", "fine", "ana")
    assert not await broker.decide("ap1", "deny")
    assert not await broker.decide("unknown", "deny")
    assert [r.approval_id for r in broker.pending()] == ["ap2"]
    assert await broker.wait("ap1", HANG) == ApprovalDecision("allow", "fine", "ana")


async def test_the_broker_denies_when_no_decision_comes_in_time() -> None:
    broker = InMemoryApprovalBroker()
    await broker.request(request())
    decision = await broker.wait("ap1", 0.01)
    assert (decision.decision, decision.reason) == ("deny", "timeout")
    assert broker.pending() == []
    assert not await broker.decide("ap1", "allow")


async def test_the_broker_refuses_repeated_ids_and_bad_decisions() -> None:
    broker = InMemoryApprovalBroker()
    await broker.request(request())
    with pytest.raises(InvalidInput):
        await broker.request(request())
    with pytest.raises(InvalidInput):
        await broker.decide("ap1", "maybe")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await broker.wait("nope", 1)


# -- gated calls ----------------------------------------------------------------------------------------


def decide_on_request(
    broker: InMemoryApprovalBroker, events: Events, decision: str, reason: str = ""
) -> None:
    """Answer every approval request as it is announced, like a person at a prompt would."""
    tasks: set[asyncio.Task[bool]] = set()

    def on(event: Event) -> None:
        if isinstance(event, ApprovalRequired):
            task = asyncio.get_running_loop().create_task(
                broker.decide(event.approval_id, decision, reason, "ana")  # type: ignore[arg-type]
            )
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    events.on = on


async def test_an_allowed_call_runs_after_the_decision() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    decide_on_request(broker, events, "allow")
    outcome = await run([call("a", "rm", path="x")], [make("rm", ran)], approvals=broker, emit=events)
    assert ran == ["a"]
    assert outcome.outcomes[0].disposition == "completed"
    assert events.kinds() == [
        "approval_required:a",
        "approval_decided:a",
        "tool_execution_start:a",
        "tool_execution_end:a",
    ]
    required = next(e for e in events if isinstance(e, ApprovalRequired))
    assert (required.name, required.arguments, required.effect) == ("rm", {"path": "x"}, "destructive")
    decided = next(e for e in events if isinstance(e, ApprovalDecided))
    assert (decided.decision, decided.decided_by) == ("allow", "ana")


async def test_a_denied_call_never_runs() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    decide_on_request(broker, events, "deny", "not on prod")
    outcome = await run([call("a", "rm")], [make("rm", ran)], approvals=broker, emit=events)
    assert ran == []
    (only,) = outcome.outcomes
    assert (only.disposition, only.result.content, only.result.is_error) == (
        "blocked",
        "Denied: not on prod",
        True,
    )
    assert not [e for e in events if isinstance(e, ToolExecutionStart)]
    assert [e.disposition for e in events if isinstance(e, ToolExecutionEnd)] == ["blocked"]


async def test_silence_is_a_deny() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    outcome = await run(
        [call("a", "rm")],
        [make("rm", ran)],
        approvals=broker,
        approval_policy=ApprovalPolicy(timeout_s=0.01),
        emit=events,
    )
    assert ran == []
    assert outcome.outcomes[0].disposition == "blocked"
    assert outcome.results[0].content == "Denied: timeout (no decision within 0.01s)"
    decided = next(e for e in events if isinstance(e, ApprovalDecided))
    assert (decided.decision, decided.reason) == ("deny", "timeout")
    assert broker.pending() == []


async def test_an_abort_while_waiting_is_a_deny_and_the_call_is_aborted() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    cancel = asyncio.Event()
    events = Events()
    events.on = lambda e: cancel.set() if isinstance(e, ApprovalRequired) else None
    outcome = await run([call("a", "rm")], [make("rm", ran)], approvals=broker, emit=events, cancel=cancel)
    assert ran == []
    assert [(o.disposition, o.result.content) for o in outcome.outcomes] == [
        ("aborted", "Not run: the run stopped first.")
    ]
    decided = next(e for e in events if isinstance(e, ApprovalDecided))
    assert (decided.decision, decided.reason) == ("deny", "aborted")
    assert broker.pending() == []


async def test_without_a_broker_a_gated_call_is_denied_at_once() -> None:
    ran: list[str] = []
    events = Events()
    outcome = await run(
        [call("a", "rm"), call("b", "cat")], [make("rm", ran), make("cat", ran, effect="read")], emit=events
    )
    assert ran == ["b"]
    assert outcome.outcomes[0].disposition == "blocked"
    assert str(outcome.results[0].content).startswith("Denied: no approval surface")
    decided = next(e for e in events if isinstance(e, ApprovalDecided))
    assert (decided.decision, decided.reason) == ("deny", "no approval surface")


async def test_a_parallel_batch_asks_together_and_decides_each_call_on_its_own() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    both_asked = asyncio.Event()
    events.on = lambda e: both_asked.set() if len(broker.pending()) == 2 else None

    async def person() -> None:
        await both_asked.wait()  # both requests are pending at once before anyone decides
        first, second = broker.pending()
        await broker.decide(second.approval_id, "allow", decided_by="ana")
        await broker.decide(first.approval_id, "deny", "too risky", "ana")

    decider = asyncio.create_task(person())
    # Unclaimed destructive tools run alone, one after another, yet their approvals are asked together.
    outcome = await run(
        [call("a", "rm", path="a"), call("b", "rm", path="b")],
        [make("rm", ran)],
        approvals=broker,
        emit=events,
    )
    await decider
    assert ran == ["b"]
    assert [(o.disposition, o.result.content) for o in outcome.outcomes] == [
        ("blocked", "Denied: too risky"),
        ("completed", "done"),
    ]
    kinds = events.kinds()
    assert kinds[:2] == ["approval_required:a", "approval_required:b"]


async def test_an_ungated_call_runs_while_another_waits_for_its_approval() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    read_done = asyncio.Event()
    events.on = lambda e: read_done.set() if isinstance(e, ToolExecutionEnd) and e.call_id == "b" else None

    async def person() -> None:
        await read_done.wait()
        (pending,) = broker.pending()
        await broker.decide(pending.approval_id, "allow")

    decider = asyncio.create_task(person())
    await run(
        [call("a", "rm"), call("b", "cat")],
        [make("rm", ran, claims=[]), make("cat", ran, effect="read", claims=[])],
        approvals=broker,
        emit=events,
    )
    await decider
    assert ran == ["b", "a"]


async def test_a_sequential_batch_asks_one_call_at_a_time() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    decide_on_request(broker, events, "allow")
    await run(
        [call("a", "rm", n=1), call("b", "rm", n=2)],
        [make("rm", ran)],
        approvals=broker,
        emit=events,
        policy=ToolPolicy(parallel=False),
    )
    assert ran == ["a", "b"]
    assert [k for k in events.kinds() if not k.startswith("tool_execution_start")] == [
        "approval_required:a",
        "approval_decided:a",
        "tool_execution_end:a",
        "approval_required:b",
        "approval_decided:b",
        "tool_execution_end:b",
    ]


async def test_a_blocking_hook_is_asked_before_the_approval() -> None:
    ran: list[str] = []
    events = Events()
    hooks = ToolHooks(before_tool_call=lambda c, args: HookDecision.block("read-only session"))
    outcome = await run(
        [call("a", "rm")], [make("rm", ran)], hooks=hooks, approvals=InMemoryApprovalBroker(), emit=events
    )
    assert outcome.results[0].content == "Blocked: read-only session"
    assert not [e for e in events if isinstance(e, ApprovalRequired)]


async def test_steering_closes_a_pending_approval() -> None:
    ran: list[str] = []
    broker = InMemoryApprovalBroker()
    events = Events()
    asked = False

    def on(event: Event) -> None:
        nonlocal asked
        asked = asked or isinstance(event, ApprovalRequired)

    events.on = on

    # The read finishes while the approval waits; steering arrives by then, so the gated call is skipped.
    outcome = await run(
        [call("a", "rm"), call("b", "cat")],
        [make("rm", ran, claims=[]), make("cat", ran, effect="read", claims=[])],
        approvals=broker,
        emit=events,
        interrupt=lambda: asked and "b" in ran,
    )
    assert [o.disposition for o in outcome.outcomes] == ["skipped", "completed"]
    assert broker.pending() == []
    decided = next(e for e in events if isinstance(e, ApprovalDecided))
    assert (decided.decision, decided.reason) == ("deny", "cancelled")
