"""Sessions: a conversation kept across runs and restarts, with its event record and cumulative usage (public).

``SQLiteSessionStore`` is the default store, ``InMemorySessionStore`` the one for tests; both follow the
``SessionStore`` protocol; ``PostgresSessionStore`` (``steadyloop.sessions.postgres``, the ``postgres``
extra) is the one several machines share. ``open_store`` picks one from a URL or path. ``AgentSession`` (``store.session(...)``) is a session an ``Agent`` lives in:
history loaded, every message appended as it ends, events, usage, fold and capability snapshot kept.
``Reconnects`` paces and reports a connection kept open across outages. ``reconstruct`` turns stored messages into a transcript a server accepts, ``EventRecorder`` writes a
run's events into a session, ``follow`` replays and follows them and ``last_run`` says how the last run
ended.
"""

from .bound import AgentSession
from .history import is_balanced, reconstruct
from .memory import InMemorySessionStore
from .reconnects import ConnectFailure, Reconnects, StateChange
from .recorder import EventRecorder, follow, last_run, notify_followers
from .select import is_shared_store, open_store
from .sqlite import SQLiteSessionStore, default_session_path
from .store import (
    AppendFeed,
    SessionConfig,
    SessionInfo,
    SessionNotFound,
    SessionStore,
    SessionUsage,
    StateSwap,
    StoreUnavailable,
    check_id,
    new_session_id,
)

__all__ = [
    "AgentSession",
    "AppendFeed",
    "ConnectFailure",
    "EventRecorder",
    "InMemorySessionStore",
    "Reconnects",
    "SQLiteSessionStore",
    "SessionConfig",
    "SessionInfo",
    "SessionNotFound",
    "SessionStore",
    "SessionUsage",
    "StateChange",
    "StateSwap",
    "StoreUnavailable",
    "check_id",
    "default_session_path",
    "follow",
    "is_balanced",
    "is_shared_store",
    "last_run",
    "new_session_id",
    "notify_followers",
    "open_store",
    "reconstruct",
]
