"""Durable runs (the ``durable`` extra): each run the server starts is a DBOS workflow that outlives its node.

With ``durable_steps`` (the steps), the only modules that import ``dbos``. A run is the workflow ``steadyloop_run(session, principal, text,
images)``, owned by the node that started it (DBOS's executor id is the node's name, and the application
version is pinned, so any node may recover any other's workflows). Its first step (ID 1) is the length of
the session's history when the run began. After it, each model request and each tool execution is a DBOS
step whose output DBOS keeps (``durable_steps.Checkpoints``, the agent's ``StepRecorder``; the loop knows nothing of
DBOS): a request takes the next step ID when the loop makes it, and a batch's calls take theirs in the
order the model listed them, before any starts (``DBOS.reserve_step``), so IDs do not depend on which
parallel call starts or ends first. A tool step's name carries its call's id: DBOS refuses a step whose
name differs from the one kept at its ID, so a kept result is never given to another call.

The history keeps each answer and each batch's results as they end, so when the workflow runs again after
its node died, the run goes on from the history, and DBOS's steps answer what the history does not hold yet:

- the user message not stored yet: the prompt is run from the start;
- otherwise ``step_ids`` draws again the IDs the kept answers and their calls took (one per request, one
  per call), and the calls of the last answer that have no result are answered each at its own ID: with
  the result its step kept when it completed on the dead node (a batch's results reach the history only
  when the whole batch ends; ``kept_outputs`` reads DBOS's records, and the record is not told again of
  an execution the dead run recorded), else run again if its tool is idempotent (``Tool.idempotent``, or a
  ``read`` effect) or it was still waiting for its approval (it never ran: it asks again, and waits
  again), else closed with an "interrupted" result the model reads, which its step keeps too (a second
  recovery closes it the same way). Then the model is asked again: a request that completed on the dead
  node is given back from its step, not sent again.

A step cut off mid-way has kept nothing, and DBOS would run it again: for a tool that is what
``Tool.idempotent`` decides here. What is not a step is done again after a recovery: requests a context
fold sends on its own, and a hook's calls. Outputs are pickled by DBOS; a request's error is not kept
(the run ends with it; a replay of such a step ends the run), and an output that does not pickle is
still the run's, its step left as one cut off (DBOS keeps the pickling error there instead).

The dead run's record is closed where it was cut off: a message it had open (an answer streaming) gets
its ``message_end`` in the record only, never in the history; the resumed run's request gives the whole
answer (from its step if the dead node had it already).

Nodes beat in PostgreSQL every second (``nodes``). A node silent for ``STALE_S`` while its judge had the
database is dead: the judge asks DBOS to recover its pending workflows (DBOS re-enqueues them, and one
live node dequeues each), and a node restarting under its own name recovers its own at launch. A node
that has not had a beat taken for ``LEASE_S`` starts no step and writes nothing for its runs until its
next beat is taken (``gate``); if that beat says another node took its runs over, it gives them up
(``lost``): they are aborted here and nothing more of them is written, and a call that completed here
after all is told in the record as a ``tool_execution_late_settlement``. A run ended by a graceful stop
(or an abort) is an ended workflow and is not resumed.

A decision, steer, follow-up or abort posted to a node that is not running the run travels as an order
(``orders``), as it does between nodes without ``--durable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from dbos import DBOS, SetWorkflowID, StepReservation

from steadyloop import (
    Agent,
    ApprovalPolicy,
    AssistantMessage,
    Event,
    ImagePart,
    Message,
    RunError,
    Tool,
    ToolCall,
    ToolResultMessage,
    Turn,
)
from steadyloop.events import (
    AgentStart,
    ApprovalDecided,
    ApprovalRequired,
    LateSettlement,
    MessageEnd,
    MessageStart,
    Notice,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from steadyloop.sessions import StoreUnavailable
from steadyloop.tools import run_tool_calls

from .cutoff import closing, handover_error, last_open_run
from .durable_steps import (
    Adopted,
    Checkpoints,
    Given,
    interrupted,
    is_interrupted,
    kept_outputs,
    step_ids,
    tool_step,
)
from .live import RUN_STATE, Job
from .nodes import BEAT_S, STALE_S

if TYPE_CHECKING:
    from .live import LiveSession
    from .runtime import Runtime

__all__ = ["APP_VERSION", "STALE_S", "DurableRuns", "HandedOver", "interrupted_result", "repeatable"]


log = logging.getLogger("steadyloop.server.durable")

#: Pinned so that every node, and a node restarted on newer code, may recover the others' workflows.
APP_VERSION = "steadyloop-durable-1"
# DBOS is one per process, and so is the node whose runs its workflows are.
_current: DurableRuns | None = None

#: Calls answered with what they returned on the node that died are not asked about again.
_NO_GATES = ApprovalPolicy(require_for=frozenset())


class HandedOver(StoreUnavailable):
    """A write for a run another node took over from this one: it is not made (that node goes on with it)."""


def repeatable(tool: Tool | None) -> bool:
    """Whether a call of ``tool`` that may have run already may run again."""
    return tool is not None and (tool.idempotent or tool.effect == "read")


def interrupted_result(call: ToolCall, node: str) -> ToolResultMessage:
    """The result closing a call that was in flight on a node that died, for a tool not safe to repeat."""
    return ToolResultMessage(
        call_id=call.id,
        content=(
            f"interrupted: the server running this call ({node}) stopped before it returned; it may or may "
            "not have taken effect, and was not run again because the tool is not idempotent"
        ),
        is_error=True,
        name=call.name,
        disposition="aborted",
    )


class DurableRuns:
    """The durable half of one server process: DBOS, its takeovers of silent nodes, and the run workflows'
    bodies."""

    def __init__(self, runtime: Runtime, url: str) -> None:
        self.runtime = runtime
        self.url = url
        self.node = runtime.node
        self._fresh: dict[str, LiveSession] = {}  # workflows started here, whose run task awaits them
        self._turns: dict[str, Turn | RunError] = {}
        self._ended: dict[str, asyncio.Event] = {}  # set when a workflow started here has its turn
        self._held: dict[str, str] = {}  # session -> the instance of this node its run here started under
        self._workflows: dict[str, str] = {}  # workflow -> session, for the runs going here
        self._given_up: set[str] = set()  # sessions whose run here another node took over
        self._telling: set[asyncio.Task[None]] = set()
        self.checkpoints = Checkpoints(gate=self._step_gate, on_conflict=self._conflict)

    async def start(self) -> None:
        """Launch DBOS as this node (recovering the runs it left going)."""
        global _current
        _current = self
        DBOS(
            config={
                "name": "steadyloop",
                "system_database_url": self.url,
                "application_version": APP_VERSION,
                "executor_id": self.node,
            }
        )
        DBOS.launch()  # here, on the server's loop: DBOS runs recovered workflows on this loop

    async def close(self) -> None:
        global _current
        await asyncio.gather(*self._telling, return_exceptions=True)
        await asyncio.to_thread(DBOS.destroy, destroy_registry=False)
        _current = None

    # -- takeovers, and being taken over ------------------------------------------------------------------

    async def take_over(self, conn: psycopg.AsyncConnection[Any], dead: str) -> None:
        """Have DBOS recover a silent node's pending runs; the first judge to see it does it (``nodes``)."""
        cursor = await conn.execute(
            "DELETE FROM steadyloop.durable_nodes WHERE node = %s AND beat < now() - %s * interval '1s' "
            "RETURNING node",
            (dead, STALE_S),
        )
        if await cursor.fetchone() is None:
            return  # another live node took it over first, or it beat again
        handles = await asyncio.to_thread(DBOS._recover_pending_workflows, [dead])
        log.warning(
            "node %s: node %s is silent; %d of its runs resume here or on another node",
            self.node,
            dead,
            len(handles),
        )

    def lost(self, instance: str) -> None:
        """Another node took over the runs this node held as ``instance``: give them up."""
        for sid in [sid for sid, held in self._held.items() if held == instance]:
            self._give_up(sid)

    def _give_up(self, sid: str) -> None:
        """Write nothing more for the session's run here, and end it here (it goes on elsewhere); what
        its calls returned here that their steps did not keep is told in the record."""
        if sid in self._given_up:
            return
        self._given_up.add(sid)
        self._held.pop(sid, None)
        live = self.runtime.loaded(sid)
        if live is None:
            return
        unkept = [
            late_settlement(call, made, self.node)
            for workflow, held in self._workflows.items()
            if held == sid
            for call, made in self.checkpoints.unkept(workflow)
        ]
        if unkept:
            self._tell(live, unkept)
        if live.running:
            log.warning("node %s: session %s: another node took this run over; it ends here", self.node, sid)
            live.agent.force_abort("another node took this run over")

    def _tell(self, live: LiveSession, events: Sequence[Event]) -> None:
        """Append ``events`` to the session's record, past the gate: they are this node's word, not its run's."""
        store = self.runtime.recording.inner

        async def write() -> None:
            with contextlib.suppress(Exception):
                await store.append_events(live.session_id, events, agent_id=live.principal)

        task = asyncio.get_running_loop().create_task(write())
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    def taking_up(self, session_id: str) -> None:
        """A new run of the session starts here: what an earlier one gave up no longer holds."""
        self._given_up.discard(session_id)

    async def gate(self, session_id: str) -> None:
        """Let a write for the session go once this node holds its run; refused once it gave the run up.

        Raises:
            HandedOver: another node took the session's run over from this one.
        """
        instance, nodes = self._held.get(session_id), self.runtime.nodes
        if instance is not None and nodes is not None and not await nodes.held(instance):
            self._give_up(session_id)
        if session_id in self._given_up:
            raise HandedOver(
                f"session {session_id}: another node took its run over; this node writes no more of it"
            )

    async def outage(self, session_id: str) -> bool:
        """A write of the session failed because the database is away: for a run going here, try it again a
        beat later (through ``gate``, which holds it once this node's hold may have lapsed), so the run's
        record has no gap; any other write fails as it did."""
        if session_id not in self._held or session_id in self._given_up:
            return False
        await asyncio.sleep(BEAT_S)
        return True

    async def _step_gate(self, workflow_id: str) -> bool:
        sid = self._workflows.get(workflow_id)
        try:
            if sid is not None:
                await self.gate(sid)
        except HandedOver:
            return False
        return True

    async def _conflict(self, workflow_id: str, call: ToolCall | None, made: object) -> None:
        """DBOS refused to keep a step: another node owns the workflow now. A call that completed here is
        told in the record (it is not in the run that goes on: there it was closed, or runs again)."""
        sid = self._workflows.get(workflow_id)
        live = self.runtime.loaded(sid) if sid is not None else None
        if sid is None or live is None:
            return
        if call is not None and made is not None:
            self._tell(live, [late_settlement(call, made, self.node)])
        elif made is not None:
            notice = (
                f"{self.node} had the model's answer after another node took this run over; that node "
                "asks again"
            )
            self._tell(live, [Notice(text=notice, name="durable")])
        self._give_up(sid)

    # -- runs ---------------------------------------------------------------------------------------------

    async def run(self, live: LiveSession, text: str, images: list[ImagePart]) -> Turn:
        """A new run on a request to this node, as a workflow; returns its answer or raises its RunError."""
        workflow_id = f"{live.session_id}.{uuid.uuid4().hex[:16]}"
        self._fresh[workflow_id] = live
        ended = self._ended[workflow_id] = asyncio.Event()
        try:
            with SetWorkflowID(workflow_id):
                handle = await DBOS.start_workflow_async(
                    steadyloop_run, live.session_id, live.principal, text, images
                )
            # The body says when its run ended. A run another node took over ends here long before that
            # node's run ends and keeps the workflow's outcome: it is not waited for.
            result = asyncio.ensure_future(handle.get_result())
            told = asyncio.ensure_future(ended.wait())
            try:
                await asyncio.wait({result, told}, return_when=asyncio.FIRST_COMPLETED)
                if result.done():
                    result.result()  # the workflow's own error, if it failed
                elif live.session_id not in self._given_up:
                    await result
            finally:
                told.cancel()
                if not result.done():
                    result.cancel()
                await asyncio.gather(result, told, return_exceptions=True)
        finally:
            self._fresh.pop(workflow_id, None)
            self._ended.pop(workflow_id, None)
        turn = self._turns.pop(workflow_id, None)
        if turn is None:
            raise RunError("another node took this run over", reason="error")
        if isinstance(turn, RunError):
            raise turn
        return turn

    async def history_length(self, session_id: str, principal: str) -> int:
        return len(await self.runtime.store.load_messages(session_id, agent_id=principal))

    def _holding(self, workflow_id: str, session_id: str) -> None:
        """The session's run goes on here, under this node's current instance."""
        self._workflows[workflow_id] = session_id
        if self.runtime.nodes is not None:
            self._held[session_id] = self.runtime.nodes.instance

    def _let_go(self, workflow_id: str) -> None:
        sid = self._workflows.pop(workflow_id, None)
        if sid is not None and sid not in self._workflows.values():
            self._held.pop(sid, None)
        self.checkpoints.forget(workflow_id)

    async def body(
        self, session_id: str, principal: str, text: str, images: list[ImagePart], base: int
    ) -> str:
        """The workflow: the run, from the start or from where the history says it got to."""
        workflow_id = DBOS.workflow_id or ""
        live = self._fresh.pop(workflow_id, None)
        if live is not None:  # started here on a request: that request's run task awaits this workflow
            self._holding(workflow_id, session_id)
            live.agent.recorder = self.checkpoints
            try:
                self._turns[workflow_id] = await live.agent.prompt(text, images=images)
            except RunError as exc:
                self._turns[workflow_id] = exc
            finally:
                self._let_go(workflow_id)
                if (ended := self._ended.get(workflow_id)) is not None:
                    ended.set()
            return "ended"
        # Recovered: on this node after a restart, or taken over from a node that died.
        live = await self.runtime.live(principal, session_id)
        await live.settled()
        if live.running:
            return "ended"  # cannot happen while claims hold; never run one session twice at once
        self.taking_up(session_id)
        self._holding(workflow_id, session_id)
        try:
            raw = await self.runtime.store.load_messages(session_id, agent_id=principal)
            state = await self.runtime.store.load_state(session_id, RUN_STATE, agent_id=principal)
            dead = str(json.loads(state).get("node", "another node")) if state else "another node"
            live.agent.recorder = self.checkpoints
            job: Job
            if len(raw) > base:
                settled = await self._settle_open_calls(live, dead, raw, step_ids(raw, base))
                await self._close_dead_run(live, dead, settled.results)
                job = self._resume_job(live, dead, raw, settled)
            else:
                await self._close_dead_run(live, dead, {})

                async def job(agent: Agent) -> Turn:
                    return await agent.prompt(text, images=images)

            task = self.runtime.start_job(live, job, resumed=True)
            with contextlib.suppress(Exception):
                await task
        finally:
            self._let_go(workflow_id)
        return "ended"

    async def _close_dead_run(
        self, live: LiveSession, dead: str, results: dict[str, ToolResultMessage]
    ) -> None:
        """Close, in the record only, everything the dead node's run left open (``cutoff.closing``).

        Its open message gets its ``message_end`` with the text as far as it streamed, and a ``notice``:
        the answer was cut off, and the resumed run, which reads the history, asks the model again for a
        whole one (from its step if the dead node had it already). Each call it had started gets its
        ``tool_execution_end``: the result kept when it completed there, else ``interrupted`` (a call
        that runs again gets a new start and end in the resumed run). Then its step, then the run: its
        ``agent_end`` says another node goes on with it, and the resumed run follows.
        """
        sid, principal = live.session_id, live.principal
        run = last_open_run([e for _, e in await self.runtime.store.load_events(sid, agent_id=principal)])
        if run is None:
            return
        events = closing(run, error=handover_error(dead, self.node), results=results)
        if isinstance(events[0], MessageEnd):
            end = events[0]
            events.insert(
                1,
                Notice(
                    text=f"cut off: {dead} stopped while this message was under way; it is closed here as "
                    "far as it got, and is not part of the transcript",
                    name="durable",
                    step=end.step,
                    run_id=end.run_id,
                ),
            )
        await self.runtime.recording.append_events(sid, events, agent_id=principal)

    def _resume_job(self, live: LiveSession, dead: str, raw: list[Message], settled: Settled) -> Job:
        async def resume(agent: Agent) -> Turn:
            await self._answer_open_calls(live, agent, dead, raw, settled)
            return await agent.continue_()

        return resume

    async def _settle_open_calls(
        self, live: LiveSession, dead: str, raw: list[Message], reserved: dict[str, StepReservation]
    ) -> Settled:
        """Decide, each at its own step, how each call of the last answer without a result in the history
        is answered: with the result DBOS kept when the call completed on the dead node, else by running
        it again (an idempotent tool, or a call still waiting for its approval), else as interrupted
        (which its step keeps: a second recovery closes it the same way).
        """
        last = next((i for i in range(len(raw) - 1, -1, -1) if isinstance(raw[i], AssistantMessage)), None)
        if last is None:
            return Settled()
        answer = raw[last]
        assert isinstance(answer, AssistantMessage)
        answered = {m.call_id for m in raw[last + 1 :] if isinstance(m, ToolResultMessage)}
        open_calls = [call for call in answer.tool_calls if call.id not in answered]
        if not open_calls:
            return Settled()
        tools = {tool.name: tool for tool in live.agent.run_config().tools}
        waiting = waiting_for_approval(await self._dead_run(live))
        # Calls whose steps kept their results completed on the dead node: given back, never run again.
        kept_steps = await kept_outputs(DBOS.workflow_id or "")
        kept: dict[str, Any] = {}
        for call in open_calls:
            name, output = kept_steps.get(reserved[call.id].step_id, ("", None))
            if name == tool_step(call) and not is_interrupted(output):
                kept[call.id] = output
        again = [
            call
            for call in open_calls
            if call.id not in kept and (call.id in waiting or repeatable(tools.get(call.name)))
        ]
        # The others may not run again: closed as interrupted, which their steps keep.
        for call in open_calls:
            if call.id not in kept and call not in again:
                with contextlib.suppress(Exception):  # a step that kept an error: interrupted all the same
                    output = await reserved[call.id].run_async({"name": tool_step(call)}, interrupted)
                    if not is_interrupted(output):
                        kept[call.id] = output
        completed = [call for call in open_calls if call.id in kept]
        told: list[Event] = []
        results: dict[str, ToolResultMessage] = {}
        if completed:  # answered with what they returned, never run again (nor asked about again)
            batch = await run_tool_calls(
                completed, tools, approval_policy=_NO_GATES, emit=told.append, recorder=Given(kept)
            )
            results = {result.call_id: result for result in batch.results}
        self.checkpoints.adopt({call.id: reserved[call.id] for call in again})
        return Settled(answer, open_calls, results, again, told)

    async def _answer_open_calls(
        self, live: LiveSession, agent: Agent, dead: str, raw: list[Message], settled: Settled
    ) -> None:
        """Record the open calls' answers as ``_settle_open_calls`` decided, running those that run again.

        Read from the stored history as it is: the agent's transcript, loaded through ``reconstruct``,
        leaves out an answer whose calls are not all answered, so it is put back here with the results
        it has, and closed.
        """
        if settled.answer is None:
            return
        messages = agent.state.messages
        last = raw.index(settled.answer)
        if settled.answer not in messages[-(len(raw) - last) :]:
            messages.extend(raw[last:])
        config = agent.run_config()
        tools = {tool.name: tool for tool in config.tools}
        # The dead run's record, closed by now: what it told of these calls is not told again.
        dead_run = await self._dead_run(live)
        started = {e.call_id for e in dead_run if isinstance(e, ToolExecutionStart)}
        ended = {e.call_id for e in dead_run if isinstance(e, ToolExecutionEnd)}
        run_id = f"resume-{uuid.uuid4().hex[:12]}"
        # Recorded as they come, in order: an approval asked again must reach the watchers while it waits.
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        session = agent.session

        async def record() -> None:
            seq = 0
            while (event := await queue.get()) is not None:
                seq += 1
                stamped = dataclasses.replace(event, run_id=run_id, seq=seq)
                if isinstance(stamped, MessageEnd):
                    messages.append(stamped.message)
                if session is not None:
                    await session.observe(stamped)

        recorder = asyncio.get_running_loop().create_task(record())
        open_calls, again = settled.open_calls, settled.again
        try:
            queue.put_nowait(
                Notice(
                    text=f"resumed on {self.node}: {len(settled.results)} call(s) completed there, "
                    f"{len(again)} run again, "
                    f"{len(open_calls) - len(again) - len(settled.results)} closed as interrupted",
                    name="durable",
                )
            )
            for event in settled.told:  # a completed call the dead run's record never heard of
                told = started if isinstance(event, ToolExecutionStart) else ended
                if not isinstance(event, ToolExecutionStart | ToolExecutionEnd) or event.call_id not in told:
                    queue.put_nowait(event)
            results = dict(settled.results)
            if again:
                batch = await run_tool_calls(
                    again,
                    tools,
                    approvals=config.approvals,
                    approval_policy=config.approval_policy or ApprovalPolicy(),
                    emit=queue.put_nowait,
                    recorder=Adopted(self.checkpoints),
                )
                results.update({result.call_id: result for result in batch.results})
            for call in open_calls:
                result = results.get(call.id) or interrupted_result(call, dead)
                queue.put_nowait(MessageStart(message=result, step=0))
                queue.put_nowait(MessageEnd(message=result, step=0))
        finally:
            queue.put_nowait(None)
            await recorder

    async def _dead_run(self, live: LiveSession) -> list[Event]:
        """The record of the session's last run (the one whose node died), from its ``agent_start``."""
        events = [
            e for _, e in await self.runtime.store.load_events(live.session_id, agent_id=live.principal)
        ]
        starts = [i for i, e in enumerate(events) if isinstance(e, AgentStart)]
        start = starts[-1] if starts else 0
        return events[start:]


@dataclasses.dataclass
class Settled:
    """How the open calls of a resumed run's last answer are answered (``DurableRuns._settle_open_calls``).

    Attributes:
        answer: the last answer of the history, whose calls they are (``None``: no call is open).
        open_calls: its calls without a result in the history.
        results: the results of those that completed on the dead node, given back from their steps.
        again: those that run again (idempotent, or waiting for their approval).
        told: the events giving those results back, as the loop emits them.
    """

    answer: AssistantMessage | None = None
    open_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    results: dict[str, ToolResultMessage] = dataclasses.field(default_factory=dict)
    again: list[ToolCall] = dataclasses.field(default_factory=list)
    told: list[Event] = dataclasses.field(default_factory=list)


def late_settlement(call: ToolCall, made: object, node: str) -> LateSettlement:
    """A call that completed on ``node`` after another node took its run over: told for the record, as
    the run that goes on closed the call (interrupted) or runs it again without this result."""
    result = getattr(made, "result", None)
    content = getattr(result, "content", "")
    text = content if isinstance(content, str) else json.dumps([str(part) for part in content])
    return LateSettlement(
        call_id=call.id,
        name=call.name,
        outcome="failed" if getattr(result, "is_error", False) else "completed",
        text=f"completed on {node} after another node took this run over: {text}",
    )


def waiting_for_approval(dead_run: Sequence[Event]) -> set[str]:
    """The calls of the dead run that were waiting for a decision: they never ran, so they run again, and
    ask for their decision again (it is waited for on the resuming node, posted to any node)."""
    asked = {e.call_id for e in dead_run if isinstance(e, ApprovalRequired)}
    return asked - {e.call_id for e in dead_run if isinstance(e, ApprovalDecided)}


@DBOS.workflow(name="steadyloop_run")
async def steadyloop_run(session_id: str, principal: str, text: str, images: list[ImagePart]) -> str:
    """A server run as a DBOS workflow (see the module's docstring)."""
    node = _current
    if node is None:
        raise RuntimeError("a durable run was started in a process whose server is not running")
    base = await DBOS.run_step_async({"name": "history_length"}, node.history_length, session_id, principal)
    return await node.body(session_id, principal, text, images, base)
