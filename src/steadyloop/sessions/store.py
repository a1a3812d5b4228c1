"""What a session store promises and the values it hands back.

A session belongs to one agent. The owner is whatever the store's own index says, written once at
``create``: every method takes the caller's ``agent_id`` and a session owned by another agent is simply
not there, never readable or writable, whatever id the caller guessed. Ids are checked against
``^[A-Za-z0-9_-]{1,64}$`` before anything else happens.

Lifecycle is checked lazily, when a session is looked up: past its idle timeout (no append or usage since)
or its maximum age, it is deleted and reads as not found. There is no background sweep, so nothing runs
between calls and tests need no timers.

A session is a tree of entries (``steadyloop.context.branches.Entry``): each message is an entry with a
parent, ids are the decimal numbers of their positions (``"1"``, ``"2"``, ...; never reused), and the
session's leaf is the entry it continues from. Appending adds under the leaf and moves it; ``set_leaf``
moves it anywhere, so a conversation can go on from any earlier point while the branch it left stays
stored. ``load_messages`` reads the path from the root to the leaf. A session that never branched is one
straight line, as sessions written before trees existed read.
"""

from __future__ import annotations

import builtins
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..context.branches import BranchFiles, Entry
from ..errors import InvalidInput, SteadyloopError
from ..events import Event
from ..messages import Message
from ..usage import Usage

__all__ = [
    "ROOT",
    "AppendFeed",
    "SessionConfig",
    "SessionInfo",
    "SessionNotFound",
    "SessionStore",
    "SessionUsage",
    "StateSwap",
    "StoreUnavailable",
    "check_id",
    "entry_position",
    "new_session_id",
]

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class SessionNotFound(InvalidInput):
    """No session with this id belongs to the calling agent (it never existed, expired, or is another's)."""


class StoreUnavailable(SteadyloopError):
    """The session store's server could not be reached, or kept refusing a write. A write it cut short
    was, as a rule, not made; but a connection lost after the commit and before its reply hides a write
    that was made, so a caller that tries again reads first (the server's recording store does)."""


def check_id(value: object, what: str = "id") -> str:
    """``value`` if it is a valid session or agent id.

    Raises:
        InvalidInput: it is not 1 to 64 characters of letters, digits, ``_`` and ``-``.
    """
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise InvalidInput(f"{what} must be 1-64 characters of A-Z, a-z, 0-9, '_' or '-', got {value!r}")
    return value


#: The position a leaf has when a session continues from its start, before any entry (ids start at 1).
ROOT = 0


def entry_position(value: object) -> int:
    """An entry id as the position it names.

    Raises:
        InvalidInput: it is not the decimal number of a position (``"1"``, ``"2"``, ...).
    """
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(text, str)
        or not (text.isascii() and text.isdigit())
        or len(text) > 18
        or int(text) <= 0
    ):
        raise InvalidInput(f"an entry id is the number of an entry (1, 2, ...), got {value!r}")
    return int(text)


def new_session_id() -> str:
    """A fresh random session id."""
    return f"ses_{secrets.token_hex(8)}"


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Lifecycle limits a store enforces; ``None`` means no limit.

    Attributes:
        idle_timeout_s: seconds without an append or usage record after which a session expires.
        max_age_s: seconds after creation after which a session expires, however active.
        max_history_entries: messages kept per session; older ones are deleted as new ones arrive.
    """

    idle_timeout_s: float | None = None
    max_age_s: float | None = None
    max_history_entries: int | None = None

    def __post_init__(self) -> None:
        for name in ("idle_timeout_s", "max_age_s", "max_history_entries"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise InvalidInput(f"SessionConfig.{name} must be positive or None, got {value!r}")

    def expired(self, created_at: float, updated_at: float, now: float) -> bool:
        """Whether a session with these timestamps has expired at ``now``."""
        if self.idle_timeout_s is not None and now - updated_at > self.idle_timeout_s:
            return True
        return self.max_age_s is not None and now - created_at > self.max_age_s


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """Tokens a session spent over its whole life, every run added in, failed and aborted ones too."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    turns: int = 0
    runs: int = 0

    def add(self, usage: Usage, *, turns: int = 0, runs: int = 1) -> SessionUsage:
        """This total with one run's usage added."""
        return SessionUsage(
            prompt_tokens=self.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self.completion_tokens + usage.completion_tokens,
            cached_tokens=self.cached_tokens + usage.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + (usage.reasoning_tokens or 0),
            turns=self.turns + turns,
            runs=self.runs + runs,
        )


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a store knows about a session besides its messages and events.

    Attributes:
        session_id: the session's id.
        agent_id: the agent that owns it, from the store's index.
        title: a label for listings.
        created_at: when it was created, seconds since the epoch.
        updated_at: when something was last appended or recorded.
        usage: cumulative token spend.
        message_count: entries kept, every branch counted (after the history cap).
        last_event_seq: the seq of the last recorded event, 0 when none.
        leaf: the entry the session continues from; ``None`` before any (or after a move to the start).
    """

    session_id: str
    agent_id: str
    title: str | None
    created_at: float
    updated_at: float
    usage: SessionUsage = field(default_factory=SessionUsage)
    message_count: int = 0
    last_event_seq: int = 0
    leaf: str | None = None


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live: messages as they were, the event record, cumulative usage, and named state
    (what an ``Agent`` keeps between runs: its fold, its capability snapshot).

    A session another agent owns raises ``SessionNotFound`` (``get`` returns ``None``); an id that is not
    an id raises ``InvalidInput``.
    """

    async def create(
        self, agent_id: str, *, title: str | None = None, session_id: str | None = None
    ) -> SessionInfo:
        """A new session for ``agent_id``; ``InvalidInput`` when ``session_id`` is already in use."""
        ...

    async def get(self, session_id: str, *, agent_id: str) -> SessionInfo | None:
        """The session, or ``None`` when the agent has no such session (expired ones are deleted here)."""
        ...

    async def list(self, agent_id: str) -> builtins.list[SessionInfo]:
        """The agent's sessions, most recently active first."""
        ...

    async def latest(self, agent_id: str) -> SessionInfo | None:
        """The agent's most recently active session, if any."""
        ...

    async def set_title(self, session_id: str, title: str | None, *, agent_id: str) -> None:
        """Give the session a new title (``None``: none); its activity time stays as it was."""
        ...

    async def append_messages(self, session_id: str, messages: Sequence[Message], *, agent_id: str) -> None:
        """Append messages in one write, each under the one before and the first under the leaf, which
        moves to the last; then trim to the history cap."""
        ...

    async def load_messages(
        self, session_id: str, *, agent_id: str, limit: int | None = None
    ) -> builtins.list[Message]:
        """The messages from the root to the leaf exactly as appended, oldest first; the last ``limit``
        when given."""
        ...

    async def append_entry(
        self,
        session_id: str,
        message: Message,
        *,
        agent_id: str,
        parent: str | None,
        files: BranchFiles | None = None,
    ) -> str:
        """Add one entry under ``parent`` (``None``: a new root) and make it the leaf; returns its id.

        Raises:
            InvalidInput: ``parent`` is not an entry of the session.
        """
        ...

    async def load_entries(self, session_id: str, *, agent_id: str) -> builtins.list[Entry]:
        """Every kept entry of every branch, oldest first."""
        ...

    async def set_leaf(self, session_id: str, entry_id: str | None, *, agent_id: str) -> None:
        """Continue the session from ``entry_id`` (``None``: from the start, before any entry).

        Raises:
            InvalidInput: it is not an entry of the session.
        """
        ...

    async def append_events(self, session_id: str, events: Sequence[Event], *, agent_id: str) -> int:
        """Append events in one write, numbered after the record's last seq; returns the last seq."""
        ...

    async def load_events(
        self, session_id: str, *, agent_id: str, after_seq: int = 0
    ) -> builtins.list[tuple[int, Event]]:
        """The recorded events with a seq above ``after_seq``, in order."""
        ...

    async def record_usage(
        self, session_id: str, usage: Usage, *, agent_id: str, turns: int = 0
    ) -> SessionUsage:
        """Add one run's usage (and its turns) to the session's total; returns the new total."""
        ...

    async def save_state(self, session_id: str, name: str, value: str, *, agent_id: str) -> None:
        """Keep one named piece of the session's state (a fold, a capability snapshot), replacing the last."""
        ...

    async def load_state(self, session_id: str, name: str, *, agent_id: str) -> str | None:
        """The named piece of state last saved, or ``None``."""
        ...

    async def delete(self, session_id: str, *, agent_id: str) -> bool:
        """Delete the session with its messages, events and state; ``False`` when there was none."""
        ...

    async def export_jsonl(self, session_id: str, *, agent_id: str) -> str:
        """The whole session as JSONL: a header line, then its entries (every branch), then its events."""
        ...

    async def import_jsonl(self, text: str, *, agent_id: str, session_id: str | None = None) -> SessionInfo:
        """A session from ``export_jsonl``'s output, owned by ``agent_id``; its exported id by default.

        The copy keeps the exported timestamps, so lifecycle limits apply to it as to the original.
        """
        ...

    async def close(self) -> None:
        """Release what the store holds open."""
        ...


@runtime_checkable
class AppendFeed(Protocol):
    """A store whose events other processes also append, and which can say when they do.

    ``follow`` (and the server's attach) subscribe to it before reading the record, so an event another
    process appends reaches a follower here too.
    """

    async def subscribe(self, on_appended: Callable[[str | None, int], None]) -> Callable[[], None]:
        """Call ``on_appended(session_id, last_seq)`` after each committed append of events; ``(None, 0)``
        when some may have gone unannounced. Returns the function that stops it."""
        ...


@runtime_checkable
class StateSwap(Protocol):
    """A store that can replace a session state only if the value there allows it, as one step that no
    other process's write can come between (a compare-and-set across every process sharing the store)."""

    async def swap_state(
        self,
        session_id: str,
        name: str,
        value: str,
        *,
        agent_id: str,
        allow: Callable[[str | None], bool],
    ) -> tuple[bool, str | None]:
        """Write ``value`` if ``allow(current)`` says so; returns whether it wrote, and the value it found
        (``None``: there was none). ``allow`` runs while the session is locked: keep it quick, no I/O."""
        ...
