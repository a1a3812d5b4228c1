"""``AgentSession``: a session an ``Agent`` lives in, kept as the agent goes.

Opened, it loads the session's history (the last ``history_limit`` messages, turned back into a transcript
a server accepts), the fold the conversation had, and the capability snapshot of the endpoint. Bound to an
agent (``Agent(..., session=...)``), it appends every message to the store as the message ends, so a kill
mid-prompt loses nothing the listeners saw; records the run's events and usage; and saves the fold when it
changes and the capability snapshot when a run ends.

Storage never reaches the run: a write that fails is logged (``steadyloop.sessions``), told to
``on_failure``, and the messages it could not write are kept and written with the next one that succeeds.
A new session is created in the store at its first write, titled from its first user message.

The session is a tree (see ``steadyloop.sessions.store``); ``branch_to`` moves it to another entry,
summarising the branch it leaves into an entry of its own, and takes up the history of the new position.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..context.branches import (
    BranchMove,
    BranchSummary,
    Entry,
    branch_summary_message,
    collect_branch,
    prepare_branch,
    summarise_branch,
)
from ..context.folding import Summarise
from ..context.keeper import ContextState
from ..errors import InvalidInput, SteadyloopError
from ..events import AgentEnd, ContextCompacted, Event, MessageEnd, TurnEnd
from ..messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, UserMessage, text_of
from ..sizing.tokens import CHARS_PER_TOKEN
from ..turn.capabilities import export_capabilities, import_capabilities
from ..wire.endpoints import Endpoint, endpoint_id
from .history import reconstruct
from .recorder import EventRecorder
from .store import SessionNotFound, SessionStore, check_id, entry_position, new_session_id

__all__ = ["DEFAULT_HISTORY_LIMIT", "AgentSession"]

log = logging.getLogger("steadyloop.sessions")

#: Messages loaded when a session is opened, unless told otherwise.
DEFAULT_HISTORY_LIMIT = 200

_MESSAGES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)
_TITLE_CHARS = 60
_CONTEXT = "context"
_CAPABILITIES = "capabilities"


class AgentSession:
    """A session an ``Agent`` keeps itself in; open it with ``AgentSession.open`` (or a store's ``session``).

    Args:
        store: where the session lives.
        agent_id: the agent the session belongs to.
        session_id: the session; ``None`` starts a new one (created in the store at its first write).
        title: the new session's title (default: the first line of its first user message).
        history_limit: how many of the latest messages to load (``None``: all).
        on_failure: told, in words, each time the store could not be written (besides the log).

    Attributes:
        messages: the history loaded when it was opened, ready to send.
        context: the conversation's fold and pruning, as stored.
        failures: what went wrong with the store, in words, oldest first.
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        agent_id: str,
        session_id: str | None = None,
        title: str | None = None,
        history_limit: int | None = DEFAULT_HISTORY_LIMIT,
        on_failure: Callable[[str], object] | None = None,
    ) -> None:
        if history_limit is not None and history_limit <= 0:
            raise InvalidInput(f"history_limit must be positive or None, got {history_limit}")
        self.store = store
        self.agent_id = check_id(agent_id, "agent_id")
        self.created = session_id is not None
        self.session_id = check_id(session_id, "session_id") if session_id is not None else new_session_id()
        self.title = title
        self.history_limit = history_limit
        self.on_failure = on_failure
        self.messages: list[Message] = []
        self.context = ContextState()
        self.failures: list[str] = []
        self._recorder: EventRecorder | None = None
        self._unsaved: list[Message] = []
        self._held: list[Event] = []
        self._kept: list[Message] = []  # every message of the conversation this process has seen
        self._saved_context = -1
        self._saved_capabilities: str | None = None

    @classmethod
    async def open(
        cls,
        store: SessionStore,
        *,
        agent_id: str,
        session_id: str | None = None,
        title: str | None = None,
        history_limit: int | None = DEFAULT_HISTORY_LIMIT,
        on_failure: Callable[[str], object] | None = None,
    ) -> AgentSession:
        """The session, its history, fold and capability snapshot loaded (a new one when ``session_id`` is
        ``None``).

        Raises:
            SessionNotFound: the agent has no session ``session_id``.
        """
        session = cls(
            store,
            agent_id=agent_id,
            session_id=session_id,
            title=title,
            history_limit=history_limit,
            on_failure=on_failure,
        )
        if session_id is not None:
            await session._load()
        return session

    async def _load(self) -> None:
        store, sid, agent = self.store, self.session_id, self.agent_id
        if await store.get(sid, agent_id=agent) is None:
            raise SessionNotFound(f"no session {sid!r} for agent {agent!r}")
        raw = await store.load_messages(sid, agent_id=agent, limit=self.history_limit)
        self.messages = reconstruct(raw)
        self._kept = list(self.messages)
        capped = self.history_limit is not None and len(raw) >= self.history_limit
        stored = await store.load_state(sid, _CONTEXT, agent_id=agent)
        if stored is not None:
            try:
                if not self.context.restore(stored, self.messages, capped=capped):
                    log.info("session %s: its fold no longer matches the history; it is dropped", sid)
            except InvalidInput as exc:
                self._failed(f"the stored fold could not be read: {exc}")
        self._saved_context = self.context.version
        snapshot = await store.load_state(sid, _CAPABILITIES, agent_id=agent)
        if snapshot is not None:
            try:
                import_capabilities(json.loads(snapshot))
            except Exception as exc:  # a snapshot is an optimisation: a bad one costs a relearned refusal
                self._failed(f"the stored capability snapshot could not be read: {exc}")
            self._saved_capabilities = snapshot

    # -- what the Agent tells it ---------------------------------------------------------------------

    def adopt(self, messages: Sequence[object]) -> None:
        """Messages an agent starts with beyond the loaded history: written to the store with the next write."""
        kept = [m for m in messages if isinstance(m, _MESSAGES)]
        self._kept.extend(kept)
        self._unsaved.extend(kept)

    async def observe(self, event: Event, endpoint: Endpoint | None = None) -> None:
        """Keep what an event says: a message as it ends, the record, usage, the fold, the snapshot.

        Never raises: a failed write is logged and told to ``on_failure``.
        """
        try:
            if isinstance(event, MessageEnd) and isinstance(event.message, _MESSAGES):
                self._kept.append(event.message)
                self._unsaved.append(event.message)
                await self._write_messages()
            await self._record(event)
            if isinstance(event, ContextCompacted | AgentEnd):
                await self._save_context()
            if isinstance(event, AgentEnd) and endpoint is not None:
                await self._save_capabilities(endpoint)
        except Exception as exc:
            self._failed(f"the session could not be saved: {exc}")

    async def _ensure(self) -> None:
        if self.created:
            return
        title = self.title or _title_from(self._kept)
        await self.store.create(self.agent_id, title=title, session_id=self.session_id)
        self.created = True

    async def _write_messages(self) -> None:
        if not self._unsaved:
            return
        await self._ensure()
        batch = list(self._unsaved)
        await self.store.append_messages(self.session_id, batch, agent_id=self.agent_id)
        del self._unsaved[: len(batch)]

    async def _record(self, event: Event) -> None:
        if not self.created and not isinstance(event, AgentEnd) and not self._unsaved and not self._kept:
            # A new session is created with its first message, which names it; until then its events wait.
            self._held.append(event)
            return
        await self._ensure()
        if self._recorder is None:
            self._recorder = EventRecorder(self.store, self.session_id, self.agent_id)
        held, self._held = self._held, []
        for earlier in held:
            await self._recorder.record(earlier)
        await self._recorder.record(event)

    async def _save_context(self) -> None:
        if self.context.version == self._saved_context:
            return
        version = self.context.version
        await self.store.save_state(
            self.session_id, _CONTEXT, self.context.to_json(self._kept), agent_id=self.agent_id
        )
        self._saved_context = version

    async def _save_capabilities(self, endpoint: Endpoint) -> None:
        snapshot = export_capabilities()
        mine = snapshot.get("endpoints", {}).get(endpoint_id(endpoint))
        if mine is None:
            return
        text = json.dumps({**snapshot, "endpoints": {endpoint_id(endpoint): mine}}, sort_keys=True)
        if _without_time(text) == _without_time(self._saved_capabilities):
            return
        await self.store.save_state(self.session_id, _CAPABILITIES, text, agent_id=self.agent_id)
        self._saved_capabilities = text

    # -- the tree --------------------------------------------------------------------------------------

    async def entries(self) -> list[Entry]:
        """Every entry of the session's tree, every branch, oldest first (none before its first write).

        Messages this process could not write yet are written first.
        """
        if not self.created:
            return []
        await self._write_messages()
        return await self.store.load_entries(self.session_id, agent_id=self.agent_id)

    async def leaf(self) -> str | None:
        """The entry the session continues from; ``None`` before any."""
        if not self.created:
            return None
        info = await self.store.get(self.session_id, agent_id=self.agent_id)
        return info.leaf if info is not None else None

    async def branch_to(
        self,
        target: str | int | None,
        *,
        summarise: Summarise | None = None,
        budget: int = 0,
        chars_per_token: float = CHARS_PER_TOKEN,
        instructions: str | None = None,
        cancel: asyncio.Event | None = None,
    ) -> BranchMove:
        """Continue the session from ``target`` (``None``: from the start), the branch it leaves summarised.

        With ``summarise``, the entries left behind (``collect_branch``) are summarised under ``budget``
        tokens (``prepare_branch``, ``summarise_branch`` with ``instructions``) and the summary becomes an
        entry under ``target``, carrying the files the branch read and changed; it is the new leaf. A
        summary that was aborted (``cancel``) or failed leaves the session where it was
        (``moved`` is ``False``; the summary says why). Afterwards ``messages`` is the new position's
        history and the fold is cleared (it belonged to the old one).

        Raises:
            InvalidInput: ``target`` is not an entry of the session.
            SteadyloopError: the store could not be read or written (nothing moved).
        """
        target_id = str(entry_position(target)) if target is not None else None
        tree = {entry.id: entry for entry in await self.entries()}
        if target_id is not None and target_id not in tree:
            raise InvalidInput(f"session {self.session_id!r} has no entry {target_id}")
        old = await self.leaf()
        left = _left_behind(tree, old, target_id)
        summary: BranchSummary | None = None
        if summarise is not None and left:
            cut_off = await self._cut_off(left)
            prepared = prepare_branch(left, budget, chars_per_token, cut_off=cut_off)
            summary = await summarise_branch(prepared, summarise, instructions=instructions, cancel=cancel)
            if summary.aborted or summary.error is not None:
                return BranchMove(moved=False, target=target_id, leaf=old, left=len(left), summary=summary)
        if not self.created:  # nothing stored yet: only "from the start" got here
            return BranchMove(moved=True, target=None, leaf=None)
        if summary is not None:
            leaf: str | None = await self.store.append_entry(
                self.session_id,
                branch_summary_message(summary),
                agent_id=self.agent_id,
                parent=target_id,
                files=summary.files,
            )
        else:
            await self.store.set_leaf(self.session_id, target_id, agent_id=self.agent_id)
            leaf = target_id
        await self._take_up_leaf()
        return BranchMove(moved=True, target=target_id, leaf=leaf, left=len(left), summary=summary)

    async def _cut_off(self, left: Sequence[Entry]) -> set[str]:
        """Ids of the entries left behind that hold an answer a stop cut off, as the session's record says
        (a step that ended with an error closed the answer it was streaming, with no calls in it)."""
        answers = [e for e in left if isinstance(e.message, AssistantMessage) and not e.message.tool_calls]
        if not answers:
            return set()
        try:
            recorded = await self.store.load_events(self.session_id, agent_id=self.agent_id)
        except SteadyloopError as exc:  # the marks only help the summary: without them it is still written
            self._failed(f"the session's record could not be read: {exc}")
            return set()
        cut = [
            event.message
            for _, event in recorded
            if isinstance(event, TurnEnd) and event.error is not None and event.message is not None
        ]
        return {entry.id for entry in answers if entry.message in cut}

    async def _take_up_leaf(self) -> None:
        raw = await self.store.load_messages(
            self.session_id, agent_id=self.agent_id, limit=self.history_limit
        )
        self.messages = reconstruct(raw)
        self._kept = list(self.messages)
        self.context.clear()
        await self.store.save_state(
            self.session_id, _CONTEXT, self.context.to_json(self._kept), agent_id=self.agent_id
        )
        self._saved_context = self.context.version

    def _failed(self, text: str) -> None:
        self.failures.append(text)
        log.warning("session %s: %s", self.session_id, text)
        if self.on_failure is not None:
            try:
                self.on_failure(text)
            except Exception:
                log.exception("session %s: on_failure raised", self.session_id)


def _title_from(messages: Sequence[Message]) -> str | None:
    first = next((m for m in messages if isinstance(m, UserMessage)), None)
    if first is None:
        return None
    text = text_of(first.content).strip()
    return text.splitlines()[0][:_TITLE_CHARS] if text else None


def _without_time(text: str | None) -> Any:
    if text is None:
        return None
    data = json.loads(text)
    if isinstance(data, dict):
        data.pop("saved_at", None)
    return data


def _left_behind(tree: Mapping[str, Entry], old: str | None, target: str | None) -> list[Entry]:
    """The entries a move from ``old`` to ``target`` leaves (to the start: the whole old path)."""
    if old is None or old not in tree:
        return []
    if target is None:
        path: list[Entry] = []
        at: str | None = old
        while at is not None and at in tree and len(path) <= len(tree):
            path.append(tree[at])
            at = tree[at].parent_id
        return path[::-1]
    return list(collect_branch(tree, old, target).entries)
