"""Approval brokers that hang, fail or answer nonsense: the gated call is denied, the run goes on.

Through ``run_tool_calls`` and through ``run_agent_loop`` on the scripted server. A broker is never
trusted to honour a timeout, and the run's abort reaches it wherever it is stuck.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from steadyloop.context.integrity import check_transcript
from steadyloop.errors import RunCancelled
from steadyloop.events import ApprovalDecided, ApprovalRequired, Event
from steadyloop.loop import run_agent_loop
from steadyloop.messages import ToolCall, ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import text_chunks, tool_call_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.approvals import ApprovalDecision, ApprovalPolicy, ApprovalRequest, Verdict
from steadyloop.tools.definition import Tool, ToolContext
from steadyloop.tools.execution import BatchOutcome, run_tool_calls
from steadyloop.wire.endpoints import Endpoint

HANG = 10.0


class Broker:
    """A broker whose ``request`` and ``wait`` do what a test says: hang, raise, or answer ``answer``."""

    def __init__(
        self,
        *,
        request_hangs: bool = False,
        wait_hangs: bool = False,
        decide_hangs: bool = False,
        raises: bool = False,
        answer: Any = None,
    ) -> None:
        self.request_hangs = request_hangs
        self.wait_hangs = wait_hangs
        self.decide_hangs = decide_hangs
        self.raises = raises
        self.answer = answer
        self.asked = asyncio.Event()
        self.waiting = asyncio.Event()
        self.cancelled: list[str] = []

    async def _hang(self, where: str) -> None:
        try:
            await asyncio.Event().wait()  # never set: only cancellation ends it
        except asyncio.CancelledError:
            self.cancelled.append(where)
            raise

    async def request(self, request: ApprovalRequest) -> None:
        self.asked.set()
        if self.request_hangs:
            await self._hang("request")

    async def decide(
        self, approval_id: str, decision: Verdict, reason: str = "", decided_by: str = ""
    ) -> bool:
        if self.decide_hangs:
            await self._hang("decide")
        return False

    def pending(self) -> list[ApprovalRequest]:
        return []

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        self.waiting.set()
        if self.wait_hangs:
            await self._hang("wait")  # ignores its own timeout
        if self.raises:
            raise ConnectionError("the approvals service is down")
        return self.answer  # type: ignore[no-any-return]


def rm_tool(ran: list[str]) -> Tool:
    async def execute(arguments: dict[str, Any], context: ToolContext) -> str:
        ran.append(context.call_id)
        return "removed"

    return Tool("rm", "remove a file", {"type": "object"}, execute, effect="destructive")


def call(call_id: str = "a") -> ToolCall:
    return ToolCall(call_id, "rm", {"path": "x"}, json.dumps({"path": "x"}))


async def run(
    broker: Broker, *, timeout_s: float = 300.0, cancel: asyncio.Event | None = None
) -> tuple[BatchOutcome, list[Event], list[str]]:
    ran: list[str] = []
    events: list[Event] = []
    outcome = await asyncio.wait_for(
        run_tool_calls(
            [call()],
            {"rm": rm_tool(ran)},
            approvals=broker,
            approval_policy=ApprovalPolicy(timeout_s=timeout_s),
            emit=events.append,
            cancel=cancel,
        ),
        HANG,
    )
    return outcome, events, ran


def decided(events: Sequence[Event]) -> tuple[str, str]:
    found = [e for e in events if isinstance(e, ApprovalDecided)]
    assert len(found) == 1 and len([e for e in events if isinstance(e, ApprovalRequired)]) == 1
    return found[0].decision, found[0].reason


async def test_a_request_that_never_returns_is_denied_at_the_timeout() -> None:
    broker = Broker(request_hangs=True)
    outcome, events, ran = await run(broker, timeout_s=0.2)
    assert ran == [] and outcome.outcomes[0].disposition == "blocked"
    assert outcome.results[0].content == "Denied: timeout (no decision within 0.2s)"
    assert decided(events) == ("deny", "timeout") and broker.cancelled == ["request"]


async def test_a_wait_that_ignores_its_own_timeout_is_denied_at_ours() -> None:
    broker = Broker(wait_hangs=True, decide_hangs=True)
    _outcome, events, ran = await run(broker, timeout_s=0.2)
    assert ran == [] and decided(events) == ("deny", "timeout")
    # Recording the deny at a broker that hangs there too is given up after a bound.
    assert broker.cancelled == ["wait", "decide"]


@pytest.mark.parametrize("where", ["request", "wait"])
async def test_the_runs_abort_interrupts_a_broker_stuck_anywhere(where: str) -> None:
    broker = Broker(request_hangs=where == "request", wait_hangs=where == "wait")
    cancel = asyncio.Event()

    async def abort_once_stuck() -> None:
        await (broker.asked if where == "request" else broker.waiting).wait()
        cancel.set()

    aborter = asyncio.create_task(abort_once_stuck())
    outcome, events, ran = await run(broker, cancel=cancel)  # a five-minute approval timeout
    await aborter
    assert ran == [] and outcome.outcomes[0].disposition == "aborted"
    assert decided(events) == ("deny", "aborted") and broker.cancelled == [where]


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("allow", "a str"),
        (None, "a NoneType"),
        ({"decision": "allow"}, "a dict"),
        (True, "a bool"),
    ],
)
async def test_an_answer_that_is_not_a_decision_is_a_deny_the_model_reads(answer: Any, shown: str) -> None:
    outcome, events, ran = await run(Broker(answer=answer))
    assert ran == [] and outcome.outcomes[0].disposition == "blocked"
    reason = f"the approval broker answered {shown}, not a decision"
    assert decided(events) == ("deny", reason)
    assert outcome.results[0].content == f"Denied: {reason}"


async def test_a_broker_that_raises_is_a_deny_that_says_why() -> None:
    _outcome, events, ran = await run(Broker(raises=True))
    assert ran == []
    reason = "the approval broker failed (ConnectionError: the approvals service is down)"
    assert decided(events) == ("deny", reason)


async def test_a_well_formed_allow_still_runs() -> None:
    _outcome, events, ran = await run(Broker(answer=ApprovalDecision("allow", "ok", "ana")))
    assert ran == ["a"] and decided(events) == ("allow", "ok")


# -- through the loop -----------------------------------------------------------------------------------

ASKS_FOR_RM = Reply.stream(tool_call_chunks([{"id": "call_rm", "name": "rm", "arguments": {"path": "x"}}]))


async def test_the_model_reads_the_deny_and_the_run_finishes() -> None:
    ran: list[str] = []
    async with ScriptedServer(ASKS_FOR_RM, Reply.stream(text_chunks("I was not allowed."))) as server:
        result = await asyncio.wait_for(
            run_agent_loop(
                Endpoint(server.base_url),
                ModelParams(model="m"),
                messages=[UserMessage(content="remove x")],
                tools=[rm_tool(ran)],
                approvals=Broker(request_hangs=True),
                approval_policy=ApprovalPolicy(timeout_s=0.2),
            ),
            HANG,
        )
        second = server.chat_requests[1].json["messages"]
    assert ran == [] and result.turn.content == "I was not allowed."
    check_transcript(result.messages)
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == ["Denied: timeout (no decision within 0.2s)"]
    assert second[-1]["role"] == "tool" and "Denied: timeout" in second[-1]["content"]


async def test_aborting_a_run_stuck_in_a_broker_ends_it_balanced() -> None:
    ran: list[str] = []
    broker = Broker(request_hangs=True)
    cancel = asyncio.Event()

    async def abort_once_asked() -> None:
        await broker.asked.wait()
        cancel.set()

    async with ScriptedServer(ASKS_FOR_RM) as server:
        aborter = asyncio.create_task(abort_once_asked())
        with pytest.raises(RunCancelled) as caught:
            await asyncio.wait_for(
                run_agent_loop(
                    Endpoint(server.base_url),
                    ModelParams(model="m"),
                    messages=[UserMessage(content="remove x")],
                    tools=[rm_tool(ran)],
                    approvals=broker,
                    cancel=cancel,
                ),
                HANG,
            )
        await aborter
    assert ran == [] and broker.cancelled == ["request"]
    check_transcript(caught.value.messages)
