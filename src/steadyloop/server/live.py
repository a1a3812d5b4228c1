"""A session loaded in this process: its agent, its hub, its approvals, the run it has going.

The agent lives in its stored session (every message appended as it ends, every event recorded), so a
run never depends on anyone watching it: a watcher that leaves, or a page that reloads, leaves the run
going; ``abort`` is the only way to stop it from outside.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from steadyloop import Agent, Event, ImagePart, RunError, Turn
from steadyloop.context import BranchMove
from steadyloop.events import AgentEnd, MessageUpdate, event_to_json
from steadyloop.messages import message_to_json

from .approvals import RemoteApprovals
from .hub import EventHub

__all__ = ["RUN_STATE", "Job", "LiveSession", "RunOutcome"]

#: What runs a session's run on its agent, returning the answer.
Job = Callable[[Agent], Awaitable[Turn]]

#: The session state that says whether a run was going, so a restart can tell one that was cut off.
RUN_STATE = "server.run"


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended, for the JSON answer."""

    outcome: str
    answer: str
    structured: Any
    error: str | None
    usage: dict[str, Any]
    messages: list[dict[str, Any]]


class LiveSession:
    """One session as this process runs it.

    Args:
        session_id: the session.
        principal: the token's principal that owns it.
        agent: the agent, bound to the session (``session=``) and to ``approvals``.
        hub: the session's live events.
        approvals: where its gated calls wait.
        stack: closes what the agent holds open (MCP servers).
    """

    def __init__(
        self,
        session_id: str,
        principal: str,
        agent: Agent,
        hub: EventHub,
        approvals: RemoteApprovals,
        stack: contextlib.AsyncExitStack,
    ) -> None:
        self.session_id = session_id
        self.principal = principal
        self.agent = agent
        self.hub = hub
        self.approvals = approvals
        self.stack = stack
        self.task: asyncio.Task[RunOutcome] | None = None
        self.last_recorded: Event | None = None
        self.last_end: AgentEnd | None = None
        # The run's end was heard (or its job returned): steers and follow-ups can no longer reach it.
        self.run_over = False
        # A move to another entry of the tree is under way (its summary may take as long as a run).
        self.moving = False
        self.synced_seq = 0
        """The record's last seq this session's agent knows of (loaded with, or written by it)."""
        agent.subscribe(self._heard)

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    @property
    def taking_messages(self) -> bool:
        """A run is going that can still read a steer or a follow-up: started here, its end not yet heard."""
        return self.running and not self.run_over

    @property
    def busy(self) -> bool:
        """A run or a move is under way: nothing else may start."""
        return self.running or self.moving

    async def branch_to(
        self,
        entry_id: str | int | None,
        *,
        summarise: bool,
        instructions: str | None,
        reserve_tokens: int | None,
    ) -> BranchMove:
        """Continue the session from ``entry_id``; the caller checked that nothing is under way."""
        self.moving = True
        try:
            if reserve_tokens is None:
                return await self.agent.branch_to(entry_id, summarise=summarise, instructions=instructions)
            return await self.agent.branch_to(
                entry_id, summarise=summarise, instructions=instructions, reserve_tokens=reserve_tokens
            )
        finally:
            self.moving = False

    async def settled(self) -> None:
        """Wait out a run whose end the watchers already have (its last writes are finishing)."""
        task = self.task
        if task is not None and not task.done() and not self.hub.running:
            await asyncio.wait({task})

    def recorded(self, seq: int, event: Event) -> None:
        """The store recorded ``event`` at ``seq`` (told by the recording store, before the listeners)."""
        self.last_recorded = event
        if isinstance(event, AgentEnd):
            self.hub.running = False
        self.hub.publish_recorded(seq, event)

    def _heard(self, event: Event) -> None:
        if isinstance(event, AgentEnd):
            self.last_end = event
            self.run_over = True
        if isinstance(event, MessageUpdate):
            self.hub.publish_live(event)
        elif event is not self.last_recorded:
            # The store could not record it; watchers still hear it, without a seq to resume from.
            if isinstance(event, AgentEnd):
                self.hub.running = False
            self.hub.publish_live(event)

    def start(
        self,
        text: str,
        images: list[ImagePart],
        response_format: dict[str, Any] | None,
        *,
        save_state: Callable[[str], Any],
        done: Callable[[], None],
        job: Job | None = None,
    ) -> asyncio.Task[RunOutcome]:
        """Start a run on a new user message; the caller checked that none is going.

        ``job`` runs it (default: ``agent.prompt(text, images=images)``); a durable run's job runs it as a
        workflow, or resumes one.
        """
        self.hub.running = True
        self.last_end = None
        self.run_over = False
        if job is None:

            async def job(agent: Agent) -> Turn:
                return await agent.prompt(text, images=images)

        self.task = asyncio.create_task(self._run(job, response_format, save_state, done))
        return self.task

    async def _run(
        self,
        job: Job,
        response_format: dict[str, Any] | None,
        save_state: Callable[[str], Any],
        done: Callable[[], None],
    ) -> RunOutcome:
        agent = self.agent
        before = len(agent.state.messages)
        params = agent.state.params
        error: str | None = None
        structured: Any = None
        answer = ""
        try:
            await save_state(json.dumps({"status": "running", "since": time.time()}))
            if response_format is not None:
                agent.state.params = replace(params, response_format=response_format)
            try:
                turn = await job(agent)
                answer = turn.content
                structured = agent.last_result.output if agent.last_result is not None else None
            except RunError as exc:
                error = str(exc)
        finally:
            self.run_over = True  # also when no AgentEnd was heard (a run forced out)
            agent.state.params = params
            if self.hub.running:  # the run ended without an AgentEnd reaching the hub: let watchers go
                self.hub.running = False
                self.hub.close()
            done()
            with contextlib.suppress(Exception):
                await save_state(json.dumps({"status": "idle", "since": time.time()}))
        end = self.last_end
        return RunOutcome(
            outcome=end.outcome if end is not None else ("completed" if error is None else "error"),
            answer=answer,
            structured=structured,
            error=error if error is not None else (end.error if end is not None else None),
            usage=json.loads(event_to_json(end))["usage"] if end is not None else {},
            messages=[json.loads(message_to_json(m)) for m in agent.state.messages[before:]],
        )

    async def close(self, *, end_watchers: bool = True) -> None:
        """Stop the run (if any), wait for it, and release what the agent holds; ``end_watchers``: end the
        hub's watchers too (not when the session is loaded again with the same hub)."""
        if self.moving:
            self.agent.abort()  # the branch summary: the move is cancelled and nothing moves
        if self.task is not None and not self.task.done():
            self.agent.abort()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                async with asyncio.timeout(10.0):
                    await asyncio.shield(self.task)
            if not self.task.done():
                self.agent.force_abort("the server is stopping")
        if end_watchers:
            self.hub.close()
        await self.stack.aclose()
