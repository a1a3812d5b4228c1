"""The server's state, owned by one app: the store, the sessions loaded, the runs going, per principal.

Made by ``create_app`` and opened and closed by its lifespan; nothing here lives at module level, so two
apps in one process share nothing. At start-up a session whose last run was still going when the server
stopped (killed, crashed) gets that run closed in its record: an ``agent_end`` whose error says it was
interrupted, so every watcher and every listing sees it ended, and how. The assistant message it was
streaming is closed with the text the record kept of it (the record writes streamed text at least once a
second), in the transcript as well, as an abort would have closed it.

Several servers (nodes) may share one PostgreSQL store. Each names itself (``ServerSettings.node``) in the
run state it writes, closes at start-up only the runs it left going itself, and refuses a run on a session
another node is running. A watcher on any node follows a run on any other: the store announces each
append (``AppendFeed``), and the node reads the new events from the record, after the last seq its hub
has, into the session's hub, where they join the replay exactly as local ones do. Every node on a
PostgreSQL store beats (``nodes``: a live node's name is refused to a second one), and carries out the
orders posted on other nodes for the runs it has going (``orders``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from steadyloop import (
    Agent,
    AgentBusy,
    AgentSession,
    ApprovalRequest,
    EffectClass,
    Event,
    ImagePart,
    InvalidInput,
    Tool,
    Turn,
    list_models,
)
from steadyloop.agent_settings import mcp_server_spec
from steadyloop.context import BranchMove, Entry
from steadyloop.events import AgentEnd, AgentStart, ApprovalDecided, ApprovalRequired
from steadyloop.sessions import (
    AppendFeed,
    SessionInfo,
    StateSwap,
    is_shared_store,
    open_store,
)
from steadyloop.wire import context_limit_for as window_of

from .agents import build_settings, check_floor, document_of, layer_of, session_layer
from .approvals import RemoteApprovals
from .control import Order, apply
from .cutoff import INTERRUPTED, closing, cut_off_message, last_open_run
from .errors import ApiError, Scrubber
from .hub import EventHub
from .live import RUN_STATE, Job, LiveSession, RunOutcome
from .nodes import Judge, NodeBeats
from .recording import RecordingStore
from .schemas import CreateSession, ImageIn, OutputSchema
from .settings import ServerSettings

if TYPE_CHECKING:
    from .durable import DurableRuns
    from .orders import Orders

__all__ = ["AGENT_STATE", "INTERRUPTED", "Runtime", "cut_off_message"]

log = logging.getLogger("steadyloop.server")

#: The session state holding the session's agent document.
AGENT_STATE = "server.agent"

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
#: Sessions kept loaded; past this, the least recently used idle ones without watchers are let go.
MAX_LOADED = 512


class Runtime:
    """Sessions, runs and hubs for one app."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        target = settings.store or (str(settings.store_path) if settings.store_path else None)
        self.store = open_store(target)
        self.node = settings.node or socket.gethostname()
        self.recording = RecordingStore(self.store, self._recorded)
        self.scrub = Scrubber([*settings.tokens, settings.endpoint.api_key or ""])
        self.model: str | None = settings.model
        self._models: list[str] | None = None
        self._windows: dict[str, int | None] = {}
        self._live: dict[str, LiveSession] = {}
        self._hubs: dict[str, EventHub] = {}
        self._runs: Counter[str] = Counter()
        self._owners: dict[str, str] = {}  # session -> principal, for the sessions that have a hub
        self._reading: dict[str, bool] = {}  # session -> more was announced while its read was going
        self._readers: set[asyncio.Task[None]] = set()
        self._unsubscribe: Callable[[], None] | None = None
        #: Asked to finish its runs and take no new one (``/drain``): readiness says no from then on.
        self.draining = False
        self.durable: DurableRuns | None = None
        if settings.durable:
            self.durable = _durable_runs(self, target)
        self.nodes: NodeBeats | None = None
        self.orders: Orders | None = None
        if is_shared_store(target):
            assert target is not None
            from .orders import Orders

            durable = self.durable
            self.nodes = NodeBeats(
                target,
                self.node,
                judge=None if durable is None else self._judge(durable),
                on_lost=None if durable is None else durable.lost,
            )
            self.orders = Orders(self, target)

    # -- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Close the runs a previous process of this node left going; hear other nodes' appends.

        Raises:
            NameInUse: another live node sharing the store has this node's name.
        """
        if isinstance(self.store, AppendFeed):
            self._unsubscribe = await self.store.subscribe(self._appended)
        if self.nodes is not None:
            await self.nodes.start()  # before anything is recovered: the name must be this node's alone
        if self.orders is not None:
            self.orders.start()
        if self.durable is not None:
            self.recording.gate = self.durable.gate
            self.recording.outage = self.durable.outage
            await self.durable.start()  # DBOS resumes the runs this node left going: none to close
            return
        for principal in self.settings.principals:
            for info in await self.store.list(principal):
                with contextlib.suppress(InvalidInput):
                    await self._recover(principal, info)

    async def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        for task in list(self._readers):
            task.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        for live in list(self._live.values()):
            await live.close()
        self._live.clear()
        if self.durable is not None:
            await self.durable.close()
        if self.orders is not None:
            await self.orders.close()
        if self.nodes is not None:
            await self.nodes.close()
        for hub in self._hubs.values():
            hub.close()
        await self.store.close()

    def _judge(self, durable: DurableRuns) -> Judge:
        async def judge(conn: Any, silent: str) -> None:
            if not self.draining:  # a node about to stop takes no runs over
                await durable.take_over(conn, silent)

        return judge

    @property
    def running(self) -> int:
        """Runs going on this node."""
        return sum(self._runs.values())

    def ready(self) -> tuple[bool, str]:
        """Whether a load balancer may send this node new work, and why not: ``draining``, or
        ``unavailable`` while its beat has not reached the store for a while (the database is away)."""
        if self.draining:
            return False, "draining"
        if self.nodes is not None and not self.nodes.lease.held(asyncio.get_running_loop().time()):
            return False, "unavailable"
        return True, "ready"

    async def _recover(self, principal: str, info: SessionInfo) -> None:
        state = await self.store.load_state(info.session_id, RUN_STATE, agent_id=principal)
        if state is None:
            return
        run = json.loads(state)
        if run.get("status") != "running" or run.get("node", self.node) != self.node:
            return  # not going, or going on another node sharing the store
        events = [e for _, e in await self.store.load_events(info.session_id, agent_id=principal)]
        run = last_open_run(events)
        if run is not None:
            cut = cut_off_message(run)
            message = None
            if cut is not None:
                # The text the run streamed before the stop is kept, as an abort keeps it.
                message = cut[0]
                await self.store.append_messages(info.session_id, [message], agent_id=principal)
            await self.store.append_events(
                info.session_id, closing(run, error=INTERRUPTED, message=message), agent_id=principal
            )
        status = json.dumps({"status": "interrupted"})
        await self.store.save_state(info.session_id, RUN_STATE, status, agent_id=principal)
        log.warning(
            "session %s: its run was interrupted by a server stop; closed in its record", info.session_id
        )

    # -- sessions -------------------------------------------------------------------------------------

    async def served_model(self) -> str:
        """The model sessions use when they name none, asked of the endpoint once."""
        if self.model is None:
            try:
                models = await list_models(self.settings.endpoint)
            except Exception as exc:
                raise ApiError("unavailable", f"the endpoint could not list its models: {exc}") from None
            if not models:
                raise ApiError("unavailable", "the endpoint lists no models; start the server with --model")
            self.model = models[0].id
        return self.model

    async def listed_models(self) -> list[str]:
        """The models the endpoint lists, asked once it answers; none while it does not."""
        if self._models is None:
            try:
                self._models = [m.id for m in await list_models(self.settings.endpoint)]
            except Exception as exc:
                log.info("the endpoint could not list its models: %s", exc)
                return []
        return self._models

    async def window(self, model: str) -> int | None:
        if model not in self._windows:
            self._windows[model] = await window_of(
                self.settings.endpoint, model, self.settings.context_length
            )
        return self._windows[model]

    async def create(self, principal: str, body: CreateSession) -> SessionInfo:
        layer = session_layer(body)
        check_floor(self.settings, layer)
        model = layer.model.name or await self.served_model()
        build_settings(self.settings, layer, model=model, window=None)  # refuse unknown tools now
        title = body.title
        info = await self.store.create(principal, title=title)
        await self.store.save_state(info.session_id, AGENT_STATE, document_of(layer), agent_id=principal)
        return info

    async def info(self, principal: str, session_id: str) -> SessionInfo:
        try:
            info = await self.store.get(session_id, agent_id=principal)
        except InvalidInput:
            info = None
        if info is None:
            raise ApiError("not_found", f"no session {session_id!r}")
        return info

    async def status_and_waiting(self, principal: str, session_id: str) -> tuple[str, int]:
        """The session's run status (``running`` here or on another node sharing the store, ``interrupted``
        or ``idle``), and how many of its approvals wait for a decision, from one read of its run state."""
        live = self._live.get(session_id)
        if live is not None and live.running:
            return "running", len(live.approvals.pending())
        state = await self.store.load_state(session_id, RUN_STATE, agent_id=principal)
        if self._elsewhere(state):
            return "running", len(await self._pending_in_record(principal, session_id))
        waiting = len(live.approvals.pending()) if live is not None else 0
        if state is not None and json.loads(state).get("status") == "interrupted":
            return "interrupted", waiting
        return "idle", waiting

    async def layer_model(self, principal: str, session_id: str) -> str | None:
        document = await self.store.load_state(session_id, AGENT_STATE, agent_id=principal)
        if document is None:
            return self.model
        return layer_of(document).model.name or self.model

    async def delete(self, principal: str, session_id: str) -> None:
        await self.info(principal, session_id)
        live = self._live.get(session_id)
        if live is not None and live.busy:
            raise ApiError(
                "run_in_progress",
                "the session has a run or a move to another entry going",
                hint=f"POST /sessions/{session_id}/abort first, then delete it",
            )
        if live is not None:
            await live.close()
            self._live.pop(session_id, None)
        hub = self._hubs.pop(session_id, None)
        self._owners.pop(session_id, None)
        if hub is not None:
            hub.close()
        await self.store.delete(session_id, agent_id=principal)

    def hub(self, session_id: str, last_seq: int, principal: str) -> EventHub:
        """The session's hub, made on first use with the record's last seq."""
        hub = self._hubs.get(session_id)
        if hub is None:
            hub = self._hubs[session_id] = EventHub(last_seq)
            self._owners[session_id] = principal
        return hub

    async def running_elsewhere(self, principal: str, session_id: str) -> bool:
        """Whether another node sharing the store says it is running this session."""
        return self._elsewhere(await self.store.load_state(session_id, RUN_STATE, agent_id=principal))

    async def run_elsewhere(self, principal: str, session_id: str) -> int | None:
        """The record's seq when another node sharing the store claimed the run it is running in this
        session (the run's end is the first ``agent_end`` after it), -1 if its claim does not say; ``None``
        when no other node runs it."""
        state = await self.store.load_state(session_id, RUN_STATE, agent_id=principal)
        if not self._elsewhere(state):
            return None
        assert state is not None
        return int(json.loads(state).get("after", -1))

    def _appended(self, session_id: str | None, seq: int) -> None:
        """The store says events were appended (by any node); ``None``: anything may have been."""
        for sid in list(self._hubs) if session_id is None else [session_id]:
            hub = self._hubs.get(sid)
            if hub is None or (session_id is not None and seq <= hub.last_seq):
                continue
            live = self._live.get(sid)
            if live is not None and live.running:
                continue  # this node writes that record and publishes each event as it writes it
            if sid in self._reading:
                self._reading[sid] = True
                continue
            self._reading[sid] = False
            task = asyncio.get_running_loop().create_task(self._read_appended(sid))
            self._readers.add(task)
            task.add_done_callback(self._readers.discard)

    async def _read_appended(self, session_id: str) -> None:
        """Read what another node appended into the session's hub, in seq order, once each."""
        try:
            while True:
                hub, principal = self._hubs.get(session_id), self._owners.get(session_id)
                if hub is None or principal is None:
                    return
                try:
                    batch = await self.store.load_events(
                        session_id, agent_id=principal, after_seq=hub.last_seq
                    )
                except InvalidInput:
                    return  # deleted meanwhile
                except Exception as exc:
                    log.warning("session %s: could not read another node's events: %s", session_id, exc)
                    return
                for seq, event in batch:
                    if seq <= hub.last_seq:
                        continue
                    if isinstance(event, AgentStart):
                        hub.running = True
                    elif isinstance(event, AgentEnd):
                        hub.running = False
                    self._recorded(session_id, seq, event, here=False)
                if not self._reading.get(session_id):
                    return
                self._reading[session_id] = False
        finally:
            self._reading.pop(session_id, None)

    async def live(self, principal: str, session_id: str) -> LiveSession:
        """The session loaded, its agent built (once per process)."""
        live = self._live.get(session_id)
        if live is not None:
            if live.principal != principal:
                raise ApiError("not_found", f"no session {session_id!r}")
            self._live[session_id] = self._live.pop(session_id)  # most recently used last
            if live.running or not isinstance(self.store, AppendFeed):
                return live
            info = await self.info(principal, session_id)
            if info.last_event_seq <= live.synced_seq and session_id in self._live:
                return live
            # Another node sharing the store ran the session since this one loaded it: load it again.
            # Its hub stays, with its watchers: it follows the record, whoever writes it.
            self._live.pop(session_id, None)
            await live.close(end_watchers=False)
        info = await self.info(principal, session_id)
        await self._let_go()
        document = await self.store.load_state(session_id, AGENT_STATE, agent_id=principal)
        layer = layer_of(document) if document is not None else session_layer(CreateSession())
        model = layer.model.name or await self.served_model()
        settings = build_settings(self.settings, layer, model=model, window=await self.window(model))
        approvals = RemoteApprovals()
        stack = contextlib.AsyncExitStack()
        tools: list[Tool] = []
        if settings.servers:
            try:
                from steadyloop.tools.mcp import mcp_tools
            except ImportError:
                raise ApiError(
                    "unavailable", "MCP servers need the MCP SDK: pip install 'steadyloop[mcp]'"
                ) from None
            toolset = await mcp_tools(*(mcp_server_spec(s) for s in settings.servers))
            stack.push_async_callback(toolset.aclose)
            tools = list(toolset.tools)
        session = await AgentSession.open(self.recording, agent_id=principal, session_id=session_id)
        agent = settings.agent(self.settings.endpoint, tools=tools, approvals=approvals, session=session)
        again = self._live.get(session_id)
        if again is not None:  # another request loaded it while this one waited on the store
            await stack.aclose()
            return again
        live = LiveSession(
            session_id,
            principal,
            agent,
            self.hub(session_id, info.last_event_seq, principal),
            approvals,
            stack,
        )
        live.synced_seq = info.last_event_seq
        self._live[session_id] = live
        return live

    def loaded(self, session_id: str) -> LiveSession | None:
        """The session as this process has it loaded, if it has."""
        return self._live.get(session_id)

    async def _let_go(self) -> None:
        """Unload the least recently used sessions that are idle and unwatched, past ``MAX_LOADED``."""
        idle = [sid for sid, live in self._live.items() if not live.running and not live.hub.watchers]
        for sid in idle[: max(0, len(self._live) - MAX_LOADED + 1)]:
            live = self._live.pop(sid)
            self._hubs.pop(sid, None)
            self._owners.pop(sid, None)
            await live.close()
        for sid in [sid for sid, hub in self._hubs.items() if sid not in self._live and not hub.watchers]:
            del self._hubs[sid]
            self._owners.pop(sid, None)

    def _recorded(self, session_id: str, seq: int, event: Event, *, here: bool = True) -> None:
        live = self._live.get(session_id)
        if live is not None:
            if here:
                live.synced_seq = seq
            live.recorded(seq, event)
        elif (hub := self._hubs.get(session_id)) is not None:
            hub.publish_recorded(seq, event)

    # -- runs -----------------------------------------------------------------------------------------

    async def claim_run(self, live: LiveSession) -> None:
        """Mark the session running on this node, refused if another node sharing the store runs it.

        On a store that swaps state atomically (PostgreSQL) the check and the mark are one step under the
        session's lock, so two nodes starting a run on one session at the same instant cannot both win.

        Raises:
            ApiError: ``run_in_progress`` when another node is running the session.
        """
        if not isinstance(self.store, AppendFeed):
            return  # one process owns the store: ``check_can_run`` is the whole check
        principal, sid = live.principal, live.session_id
        mark = json.dumps(
            {"status": "running", "since": time.time(), "node": self.node, "after": live.hub.last_seq}
        )
        if isinstance(self.store, StateSwap):
            claimed, _ = await self.store.swap_state(
                sid, RUN_STATE, mark, agent_id=principal, allow=lambda current: not self._elsewhere(current)
            )
        else:
            claimed = not await self.running_elsewhere(principal, sid)
        if not claimed:
            raise ApiError(
                "run_in_progress",
                "another node is running this session; a session runs one prompt at a time",
                hint=f"GET /sessions/{sid}/events to watch it, and post again when it has ended",
            )

    async def release_claim(self, live: LiveSession) -> None:
        """Take back a claim no run followed (refused on this node after all), unless a run is going."""
        if isinstance(self.store, AppendFeed) and not live.running:
            idle = json.dumps({"status": "idle", "since": time.time(), "node": self.node})
            await self.store.save_state(live.session_id, RUN_STATE, idle, agent_id=live.principal)

    async def control(self, live: LiveSession, order: Order) -> None:
        """Carry ``order`` out on the session's run: here, or, when another node sharing the store runs
        it, there (``orders``).

        Raises:
            ApiError: what ``apply`` raises, here or on the node running the run; ``unavailable`` when
                that node did not take the order in time.
        """
        orders = self.orders
        if (
            orders is not None
            and not live.busy
            and await self.running_elsewhere(live.principal, live.session_id)
        ):
            await orders.forward(live, order)
            return
        await apply(live, order)

    async def pending_approvals(self, live: LiveSession) -> list[ApprovalRequest]:
        """The session's approvals waiting for a decision, here or (from the record) on another node."""
        if live.busy or not await self.running_elsewhere(live.principal, live.session_id):
            return list(live.approvals.pending())
        return await self._pending_in_record(live.principal, live.session_id)

    async def _pending_in_record(self, principal: str, session_id: str) -> list[ApprovalRequest]:
        """The approvals the record shows asked in the session's last run and not yet decided."""
        events = [e for _, e in await self.store.load_events(session_id, agent_id=principal)]
        start = next((i for i in range(len(events) - 1, -1, -1) if isinstance(events[i], AgentStart)), 0)
        waiting: dict[str, ApprovalRequest] = {}
        for event in events[start:]:
            if isinstance(event, ApprovalRequired) and event.expires_at is not None:  # the runner sets it
                # A call asked again after its node died replaces its earlier asking.
                waiting[event.call_id] = ApprovalRequest(
                    approval_id=event.approval_id,
                    call_id=event.call_id,
                    name=event.name,
                    arguments=event.arguments,
                    effect=cast("EffectClass | None", event.effect),
                    expires_at=event.expires_at,
                )
            elif isinstance(event, ApprovalDecided):
                waiting.pop(event.call_id, None)
        return list(waiting.values())

    def _elsewhere(self, state: str | None) -> bool:
        """Whether a run state says another node is running the session."""
        if state is None:
            return False
        run = json.loads(state)
        return bool(run.get("status") == "running" and run.get("node", self.node) != self.node)

    def check_can_run(self, live: LiveSession, *, limited: bool = True) -> None:
        """Refuse a second run on a session, and (when ``limited``) a run past the principal's limit."""
        if live.running:
            sid = live.session_id
            raise ApiError(
                "run_in_progress",
                "this session already has a run going; a session runs one prompt at a time",
                hint=f"POST /sessions/{sid}/steer to redirect it, POST /sessions/{sid}/follow_up to queue a "
                f"message for when it finishes, POST /sessions/{sid}/abort to stop it, or "
                f"GET /sessions/{sid}/events to watch it",
            )
        if live.moving:
            raise ApiError(
                "run_in_progress",
                "this session is moving to another entry of its tree (its branch summary is being written)",
                hint=f"wait for POST /sessions/{live.session_id}/branch to answer, or "
                f"POST /sessions/{live.session_id}/abort to cancel the summary",
            )
        limit = self.settings.limits.max_runs_per_token
        if limited and self._runs[live.principal] >= limit:
            raise ApiError(
                "too_many_runs",
                f"this token already has {limit} runs going",
                hint="wait for one to finish, or abort one",
            )

    def start_run(
        self, live: LiveSession, text: str, images: list[ImagePart], response_format: dict[str, Any] | None
    ) -> None:
        """Start a run on a new user message (a DBOS workflow when the server's runs are durable)."""
        durable = self.durable
        job: Job | None = None
        if durable is not None:

            async def job(agent: Agent) -> Turn:
                return await durable.run(live, text, images)

        self.start_job(live, job, response_format=response_format, text=text, images=images)

    def start_job(
        self,
        live: LiveSession,
        job: Job | None,
        *,
        response_format: dict[str, Any] | None = None,
        text: str = "",
        images: list[ImagePart] | None = None,
        resumed: bool = False,
    ) -> asyncio.Task[RunOutcome]:
        """Start ``job`` as the session's run (``None``: prompt with ``text``), counted and stated.

        A ``resumed`` run (a durable run recovered from a node that stopped) is counted but never refused
        for the principal's limit: it was admitted when it started, and refusing it now would end it.
        """
        self.check_can_run(live, limited=not resumed)
        principal, sid = live.principal, live.session_id
        self._runs[principal] += 1
        if self.durable is not None and not resumed:
            self.durable.taking_up(sid)
        after = live.hub.last_seq  # the run's end is the first agent_end after this (``run_elsewhere``)

        async def save(value: str) -> None:
            state = {**json.loads(value), "node": self.node, "after": after}
            await self.recording.gate(sid)  # not for a run another node took over from this one
            await self.store.save_state(sid, RUN_STATE, json.dumps(state), agent_id=principal)

        def done() -> None:
            self._runs[principal] -= 1

        return live.start(text, images or [], response_format, save_state=save, done=done, job=job)

    # -- the tree -------------------------------------------------------------------------------------

    async def tree(self, principal: str, session_id: str) -> tuple[str | None, list[Entry]]:
        """The session's leaf and every entry of its tree, oldest first."""
        info = await self.info(principal, session_id)
        live = self._live.get(session_id)
        if live is not None and live.agent.session is not None:
            # Through the loaded session: it writes any message it could not write yet first.
            session = live.agent.session
            return await session.leaf(), await session.entries()
        return info.leaf, await self.store.load_entries(session_id, agent_id=principal)

    async def branch(
        self,
        live: LiveSession,
        entry_id: str | int | None,
        *,
        summarise: bool,
        instructions: str | None,
        reserve_tokens: int | None,
    ) -> BranchMove:
        """Continue the session from an entry, refused while a run or another move is going.

        Raises:
            ApiError: ``run_in_progress`` while something is going; ``unknown_entry`` for an id that is
                not one of the session's entries.
        """
        sid = live.session_id
        if live.running:
            raise ApiError(
                "run_in_progress",
                "this session has a run going; it moves to another entry between runs",
                hint=f"wait for the run to end (GET /sessions/{sid}/events), or POST /sessions/{sid}/abort",
            )
        if live.moving:
            raise ApiError(
                "run_in_progress",
                "this session is already moving to another entry",
                hint=f"wait for that move to answer, or POST /sessions/{sid}/abort to cancel its summary",
            )
        try:
            return await live.branch_to(
                entry_id, summarise=summarise, instructions=instructions, reserve_tokens=reserve_tokens
            )
        except AgentBusy:  # a run started on another request while this one was being read
            raise ApiError(
                "run_in_progress", "this session has a run going; it moves to another entry between runs"
            ) from None
        except InvalidInput:
            raise ApiError(
                "unknown_entry",
                f"session {sid!r} has no entry {entry_id!r}",
                hint=f"GET /sessions/{sid}/tree lists its entries",
            ) from None

    # -- request values -------------------------------------------------------------------------------

    def images(self, given: list[ImageIn]) -> list[ImagePart]:
        """The message's images, checked against the limits.

        Raises:
            ApiError: too many, too large, not an image type we take, or not base64.
        """
        limits = self.settings.limits
        if len(given) > limits.max_images:
            raise ApiError("payload_too_large", f"at most {limits.max_images} images per message")
        parts: list[ImagePart] = []
        for index, image in enumerate(given):
            data: str = image.data
            mime: str | None = image.mime_type
            if data.startswith("data:"):
                header, _, data = data.partition(",")
                declared = header[5:].split(";", 1)[0]
                if ";base64" not in header or not _:
                    raise ApiError("invalid_request", f"images[{index}]: a data URL must be base64")
                mime = mime or declared
            if mime not in _IMAGE_TYPES:
                raise ApiError(
                    "invalid_request", f"images[{index}]: the type must be one of {', '.join(_IMAGE_TYPES)}"
                )
            if len(data) * 3 // 4 > limits.max_image_bytes:
                raise ApiError(
                    "payload_too_large", f"images[{index}]: larger than {limits.max_image_bytes} bytes"
                )
            try:
                raw = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise ApiError("invalid_request", f"images[{index}]: the data is not base64") from None
            if not raw:
                raise ApiError("invalid_request", f"images[{index}]: the image is empty")
            parts.append(ImagePart.from_bytes(raw, mime))
        return parts

    def response_format(self, schema: OutputSchema | None) -> dict[str, Any] | None:
        if schema is None:
            return None
        try:
            text = json.dumps(schema.schema_, allow_nan=False)
        except (ValueError, RecursionError):  # the body's reader refuses NaN; a schema too deep to write
            raise ApiError("invalid_request", "the output schema cannot be written as JSON") from None
        if len(text.encode()) > self.settings.limits.max_schema_bytes:
            raise ApiError(
                "payload_too_large",
                f"the output schema is over {self.settings.limits.max_schema_bytes} bytes",
            )
        return {
            "type": "json_schema",
            "json_schema": {"name": schema.name, "schema": schema.schema_, "strict": schema.strict},
        }


def _durable_runs(runtime: Runtime, target: str | None) -> DurableRuns:
    """The durable half of a server whose settings ask for it: PostgreSQL and the ``durable`` extra."""
    if not is_shared_store(target):
        raise InvalidInput("durable runs need a PostgreSQL store: --store postgresql://...")
    try:
        from .durable import DurableRuns
    except ImportError as exc:
        raise InvalidInput(
            f"durable runs need their extra: pip install 'steadyloop[durable]' ({exc})"
        ) from None
    assert target is not None
    return DurableRuns(runtime, target)
