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

Nodes beat in PostgreSQL every second. A node whose beat is older than ``STALE_S`` is dead: the live nodes
ask DBOS to recover its pending workflows (DBOS re-enqueues them, and one live node dequeues each), and a
node restarting under its own name recovers its own at launch. A run ended by a graceful stop (or an
abort) is an ended workflow and is not resumed.

A decision, steer, follow-up or abort posted to a node that is not running the run is an order: a row of
``steadyloop.durable_orders`` announced on ``ORDERS_CHANNEL``; the node running the run takes it, applies
it (``control.apply``) and writes its answer, which the posting node returns (``DurableRuns.forward``).
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
    AgentEnd,
    AgentStart,
    ApprovalDecided,
    ApprovalRequired,
    MessageEnd,
    MessageStart,
    Notice,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from steadyloop.sessions import Reconnects, StateChange
from steadyloop.sessions.postgres import read_failure
from steadyloop.tools import run_tool_calls

from .control import Order, apply
from .cut_off import cut_off_message
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
from .errors import ApiError
from .live import RUN_STATE, Job

if TYPE_CHECKING:
    from .live import LiveSession
    from .runtime import Runtime

__all__ = ["APP_VERSION", "STALE_S", "DurableRuns", "interrupted_result", "repeatable"]


log = logging.getLogger("steadyloop.server.durable")

#: Pinned so that every node, and a node restarted on newer code, may recover the others' workflows.
APP_VERSION = "steadyloop-durable-1"
#: Seconds between a node's beats.
BEAT_S = 1.0
#: A node silent this long is taken for dead and its runs are recovered elsewhere.
STALE_S = 5.0

#: Seconds a node forwarding an order waits for the node running the run to take it.
ORDER_WAIT_S = 10.0
#: The longest pause between the order listener's attempts to connect again (from 0.1 s, doubling).
LISTEN_MAX_PAUSE_S = 5.0
#: Where nodes announce orders (``order ID SESSION``) and their answers (``done ID``).
ORDERS_CHANNEL = "steadyloop_durable_orders"

_TABLES = """
CREATE SCHEMA IF NOT EXISTS steadyloop;
CREATE TABLE IF NOT EXISTS steadyloop.durable_nodes (
    node text PRIMARY KEY,
    beat timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS steadyloop.durable_orders (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL,
    principal text NOT NULL,
    body text NOT NULL,
    answer text,
    made timestamptz NOT NULL DEFAULT now()
)
"""

# DBOS is one per process, and so is the node whose runs its workflows are.
_current: DurableRuns | None = None

#: Calls answered with what they returned on the node that died are not asked about again.
_NO_GATES = ApprovalPolicy(require_for=frozenset())


def _say(change: StateChange | None) -> None:
    if change is not None:
        log.log(change.level, "%s", change.text)


def listener_name(node: str) -> str:
    """The ``application_name`` of the node's connection that hears orders (``pg_stat_activity`` shows it)."""
    return f"steadyloop-orders {node}"[:63]


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
    """The durable half of one server process: DBOS, the node's beat, and the run workflows' bodies."""

    def __init__(self, runtime: Runtime, url: str) -> None:
        self.runtime = runtime
        self.url = url
        self.node = runtime.node
        self._fresh: dict[str, LiveSession] = {}  # workflows started here, whose run task awaits them
        self._turns: dict[str, Turn | RunError] = {}
        self._beating: asyncio.Task[None] | None = None
        self._recovering: set[asyncio.Task[None]] = set()
        self._listening: asyncio.Task[None] | None = None
        self._taking: set[asyncio.Task[None]] = set()
        self._answered: dict[int, asyncio.Event] = {}  # orders this node forwarded, set when answered
        self.checkpoints = Checkpoints()

    async def start(self) -> None:
        """Launch DBOS as this node (recovering the runs it left going) and start beating."""
        global _current
        _current = self
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(_TABLES)
            await self._beat(conn)
        DBOS(
            config={
                "name": "steadyloop",
                "system_database_url": self.url,
                "application_version": APP_VERSION,
                "executor_id": self.node,
            }
        )
        DBOS.launch()  # here, on the server's loop: DBOS runs recovered workflows on this loop
        loop = asyncio.get_running_loop()
        self._beating = loop.create_task(self._keep_beating())
        self._listening = loop.create_task(self._listen())

    async def close(self) -> None:
        global _current
        for running in (self._beating, self._listening):
            if running is not None:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        for task in [*self._recovering, *self._taking]:
            task.cancel()
        await asyncio.gather(*self._recovering, *self._taking, return_exceptions=True)
        await asyncio.to_thread(DBOS.destroy, destroy_registry=False)
        _current = None

    # -- beats and takeovers ----------------------------------------------------------------------------

    async def _beat(self, conn: psycopg.AsyncConnection[Any]) -> list[str]:
        """Say this node is alive; returns the nodes that have gone silent."""
        await conn.execute(
            "INSERT INTO steadyloop.durable_nodes (node) VALUES (%s) "
            "ON CONFLICT (node) DO UPDATE SET beat = now()",
            (self.node,),
        )
        cursor = await conn.execute(
            "SELECT node FROM steadyloop.durable_nodes WHERE node <> %s AND beat < now() - %s * interval '1s'",
            (self.node, STALE_S),
        )
        return [str(row[0]) for row in await cursor.fetchall()]

    async def _keep_beating(self) -> None:
        loop = asyncio.get_running_loop()
        # Never slower than a beat, so a node whose database comes back beats again within one.
        reconnects = Reconnects(f"node {self.node}: the beat", first_s=BEAT_S, max_s=BEAT_S)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    while True:
                        for dead in await self._beat(conn):
                            await self._take_over(conn, dead)
                        _say(reconnects.connected(loop.time()))
                        await asyncio.sleep(BEAT_S)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away for a while: beat again when it is back
                _say(reconnects.failed(read_failure(exc, self.url), loop.time()))
                await asyncio.sleep(reconnects.pause())

    async def _take_over(self, conn: psycopg.AsyncConnection[Any], dead: str) -> None:
        """Have DBOS recover a silent node's pending runs; the first live node to see it does it."""
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

    # -- orders to runs on other nodes ---------------------------------------------------------------------

    async def forward(self, live: LiveSession, order: Order) -> None:
        """Have the node running the session's run carry ``order`` out, and answer as it answers.

        The order is a row of ``steadyloop.durable_orders``, announced on ``ORDERS_CHANNEL``; the node
        whose run it is takes it (one update: no two nodes take one order), applies it, writes its answer
        and announces that. An order nobody took within ``ORDER_WAIT_S`` is withdrawn.

        Raises:
            ApiError: the error the running node answered; ``unavailable`` when no node took the order.
        """
        sid = live.session_id
        answered = asyncio.Event()
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cursor = await conn.execute(
                "INSERT INTO steadyloop.durable_orders (session_id, principal, body) VALUES (%s, %s, %s) "
                "RETURNING id",
                (sid, live.principal, order.to_json()),
            )
            row = await cursor.fetchone()
            assert row is not None
            order_id = int(row[0])
            self._answered[order_id] = answered
            try:
                await conn.execute("SELECT pg_notify(%s, %s)", (ORDERS_CHANNEL, f"order {order_id} {sid}"))
                answer = await self._answer(conn, order_id, answered)
            finally:
                self._answered.pop(order_id, None)
                await conn.execute("DELETE FROM steadyloop.durable_orders WHERE id = %s", (order_id,))
        if answer is None:
            raise ApiError(
                "unavailable",
                "the node running this session's run did not take the request in time",
                hint="post it again; a run whose node stopped resumes on another node within "
                f"{STALE_S + BEAT_S:.0f} s",
            )
        error = json.loads(answer).get("error")
        if error is not None:
            raise ApiError(error["code"], error["message"], hint=error.get("hint"))

    async def _answer(
        self, conn: psycopg.AsyncConnection[Any], order_id: int, answered: asyncio.Event
    ) -> str | None:
        """The order's answer, once written; ``None`` if no node took it in time (it is withdrawn)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ORDER_WAIT_S
        while True:
            # Looked at on each announcement, and at least each beat in case one was missed.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(answered.wait(), min(BEAT_S, max(0.0, deadline - loop.time())))
            answered.clear()
            cursor = await conn.execute(
                "SELECT answer FROM steadyloop.durable_orders WHERE id = %s", (order_id,)
            )
            row = await cursor.fetchone()
            answer = row[0] if row is not None else None
            if answer:
                return str(answer)
            if loop.time() >= deadline:
                cursor = await conn.execute(
                    "DELETE FROM steadyloop.durable_orders WHERE id = %s AND answer IS NULL RETURNING id",
                    (order_id,),
                )
                if await cursor.fetchone() is not None:
                    return None  # withdrawn before any node took it
                deadline = loop.time() + ORDER_WAIT_S  # taken: its answer is on its way

    async def _listen(self) -> None:
        """Hear orders for the runs going here, and answers to the orders this node forwarded."""
        loop = asyncio.get_running_loop()
        what = f"node {self.node}: the order listener"
        reconnects = Reconnects(what, first_s=0.1, max_s=LISTEN_MAX_PAUSE_S)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, application_name=listener_name(self.node)
                ) as conn:
                    await conn.execute(f"LISTEN {ORDERS_CHANNEL}")
                    _say(reconnects.connected(loop.time()))
                    log.debug("%s is listening", what)
                    for answered in self._answered.values():
                        answered.set()  # an answer may have come while this node was not listening
                    cursor = await conn.execute(
                        "SELECT id, session_id FROM steadyloop.durable_orders WHERE answer IS NULL ORDER BY id"
                    )
                    for order_id, sid in await cursor.fetchall():  # and orders: take those for runs here
                        self._order(int(order_id), str(sid))
                    async for notice in conn.notifies():
                        what, _, rest = notice.payload.partition(" ")
                        if what == "done":
                            done = self._answered.get(int(rest))
                            if done is not None:
                                done.set()
                        elif what == "order":
                            order_id, _, sid = rest.partition(" ")
                            self._order(int(order_id), sid)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database went away for a while: listen again when it is back
                # One line when the state changes (lost, refused and why, back), not one per attempt.
                _say(reconnects.failed(read_failure(exc, self.url), loop.time()))
                pause = reconnects.pause()
                log.debug("%s tries again in %.2f s", what, pause)
                await asyncio.sleep(pause)

    def _order(self, order_id: int, session_id: str) -> None:
        """An order was posted for a session: take it if its run is going here."""
        live = self.runtime.loaded(session_id)
        if live is not None and live.busy:
            task = asyncio.get_running_loop().create_task(self._take(order_id))
            self._taking.add(task)
            task.add_done_callback(self._taking.discard)

    async def _take(self, order_id: int) -> None:
        """Take an order for a run going here, carry it out, and answer it."""
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            cursor = await conn.execute(
                "UPDATE steadyloop.durable_orders SET answer = '' WHERE id = %s AND answer IS NULL "
                "RETURNING session_id, principal, body",
                (order_id,),
            )
            row = await cursor.fetchone()
            if row is None:
                return  # withdrawn, or taken already
            sid, principal, body = str(row[0]), str(row[1]), str(row[2])
            live = self.runtime.loaded(sid)
            answer: dict[str, Any] = {}
            try:
                if live is None or live.principal != principal:
                    raise ApiError("no_run_in_progress", "nothing is running in this session")
                await apply(live, Order.from_json(body))
            except ApiError as exc:
                answer = {"error": {"code": exc.code, "message": exc.message, "hint": exc.hint}}
            await conn.execute(
                "UPDATE steadyloop.durable_orders SET answer = %s WHERE id = %s",
                (json.dumps(answer), order_id),
            )
            await conn.execute("SELECT pg_notify(%s, %s)", (ORDERS_CHANNEL, f"done {order_id}"))

    # -- runs ---------------------------------------------------------------------------------------------

    async def run(self, live: LiveSession, text: str, images: list[ImagePart]) -> Turn:
        """A new run on a request to this node, as a workflow; returns its answer or raises its RunError."""
        workflow_id = f"{live.session_id}.{uuid.uuid4().hex[:16]}"
        self._fresh[workflow_id] = live
        try:
            with SetWorkflowID(workflow_id):
                handle = await DBOS.start_workflow_async(
                    steadyloop_run, live.session_id, live.principal, text, images
                )
            await handle.get_result()
        finally:
            self._fresh.pop(workflow_id, None)
        ended = self._turns.pop(workflow_id)
        if isinstance(ended, RunError):
            raise ended
        return ended

    async def history_length(self, session_id: str, principal: str) -> int:
        return len(await self.runtime.store.load_messages(session_id, agent_id=principal))

    async def body(
        self, session_id: str, principal: str, text: str, images: list[ImagePart], base: int
    ) -> str:
        """The workflow: the run, from the start or from where the history says it got to."""
        workflow_id = DBOS.workflow_id or ""
        live = self._fresh.pop(workflow_id, None)
        if live is not None:  # started here on a request: that request's run task awaits this workflow
            live.agent.recorder = self.checkpoints
            try:
                self._turns[workflow_id] = await live.agent.prompt(text, images=images)
            except RunError as exc:
                self._turns[workflow_id] = exc
            finally:
                self.checkpoints.forget(workflow_id)
            return "ended"
        # Recovered: on this node after a restart, or taken over from a node that died.
        live = await self.runtime.live(principal, session_id)
        await live.settled()
        if live.running:
            return "ended"  # cannot happen while claims hold; never run one session twice at once
        raw = await self.runtime.store.load_messages(session_id, agent_id=principal)
        state = await self.runtime.store.load_state(session_id, RUN_STATE, agent_id=principal)
        dead = str(json.loads(state).get("node", "another node")) if state else "another node"
        await self._close_cut_off_message(live, dead)
        live.agent.recorder = self.checkpoints
        job: Job
        if len(raw) > base:
            job = self._resume_job(live, dead, raw, step_ids(raw, base))
        else:

            async def job(agent: Agent) -> Turn:
                return await agent.prompt(text, images=images)

        task = self.runtime.start_job(live, job, resumed=True)
        try:
            with contextlib.suppress(Exception):
                await task
        finally:
            self.checkpoints.forget(workflow_id)
        return "ended"

    async def _close_cut_off_message(self, live: LiveSession, dead: str) -> None:
        """End, in the record only, the message the dead node's run had open, so every stream closes what
        it opens.

        The dead run's ``message_start`` (and the ``message_update`` the record kept of what streamed) get
        their ``message_end``, with the text as far as it streamed, stamped with that run. It goes to the
        record and the watchers, never to the history: the answer was cut off, and the resumed run, which
        reads the history, asks the model again for a whole one.
        """
        sid, principal = live.session_id, live.principal
        events = [e for _, e in await self.runtime.store.load_events(sid, agent_id=principal)]
        opened = next((i for i in range(len(events) - 1, -1, -1) if isinstance(events[i], AgentStart)), None)
        if opened is None or any(isinstance(e, AgentEnd) for e in events[opened:]):
            return
        run = events[opened:]
        start: MessageStart | None = None
        for event in run:
            if isinstance(event, MessageStart):
                start = event
            elif isinstance(event, MessageEnd):
                start = None
        if start is None:
            return
        message = start.message
        if isinstance(message, AssistantMessage):
            cut = cut_off_message(run)
            message = cut[0] if cut is not None else AssistantMessage()
        closing: list[Event] = [
            MessageEnd(message=message, step=start.step, run_id=start.run_id),
            Notice(
                text=f"cut off: {dead} stopped while this message was under way; it is closed here as far "
                "as it got, and is not part of the transcript",
                name="durable",
                step=start.step,
                run_id=start.run_id,
            ),
        ]
        await self.runtime.recording.append_events(sid, closing, agent_id=principal)

    def _resume_job(
        self, live: LiveSession, dead: str, raw: list[Message], reserved: dict[str, StepReservation]
    ) -> Job:
        async def resume(agent: Agent) -> Turn:
            await self._close_open_calls(live, agent, dead, raw, reserved)
            return await agent.continue_()

        return resume

    async def _close_open_calls(
        self,
        live: LiveSession,
        agent: Agent,
        dead: str,
        raw: list[Message],
        reserved: dict[str, StepReservation],
    ) -> None:
        """Answer the calls of the last answer that have no result in the history, each at its own step:
        with the result DBOS kept when the call completed on the dead node, else by running it again (an
        idempotent tool, or a call still waiting for its approval), else as interrupted.

        Read from the stored history as it is: the agent's transcript, loaded through ``reconstruct``,
        leaves out an answer whose calls are not all answered, so it is put back here with the results
        it has, and closed.
        """
        last = next((i for i in range(len(raw) - 1, -1, -1) if isinstance(raw[i], AssistantMessage)), None)
        if last is None:
            return
        answer = raw[last]
        assert isinstance(answer, AssistantMessage)
        answered = {m.call_id for m in raw[last + 1 :] if isinstance(m, ToolResultMessage)}
        open_calls = [call for call in answer.tool_calls if call.id not in answered]
        if not open_calls:
            return
        messages = agent.state.messages
        if answer not in messages[-(len(raw) - last) :]:
            messages.extend(raw[last:])
        config = agent.run_config()
        tools = {tool.name: tool for tool in config.tools}
        dead_run = await self._dead_run(live)
        waiting = waiting_for_approval(dead_run)
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
        # The dead run recorded these calls' executions as far as it got: what it recorded is not told again.
        started = {e.call_id for e in dead_run if isinstance(e, ToolExecutionStart)}
        ended = {e.call_id for e in dead_run if isinstance(e, ToolExecutionEnd)}
        self.checkpoints.adopt({call.id: reserved[call.id] for call in again})
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
        try:
            queue.put_nowait(
                Notice(
                    text=f"resumed on {self.node}: {len(completed)} call(s) completed there, "
                    f"{len(again)} run again, "
                    f"{len(open_calls) - len(again) - len(completed)} closed as interrupted",
                    name="durable",
                )
            )
            results: dict[str, ToolResultMessage] = {}
            if completed:  # answered with what they returned, never run again (nor asked about again)

                def given_back(event: Event) -> None:
                    told = started if isinstance(event, ToolExecutionStart) else ended
                    if (
                        not isinstance(event, ToolExecutionStart | ToolExecutionEnd)
                        or event.call_id not in told
                    ):
                        queue.put_nowait(event)

                batch = await run_tool_calls(
                    completed, tools, approval_policy=_NO_GATES, emit=given_back, recorder=Given(kept)
                )
                results.update({result.call_id: result for result in batch.results})
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
        start = next((i for i in range(len(events) - 1, -1, -1) if isinstance(events[i], AgentStart)), 0)
        return events[start:]


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
