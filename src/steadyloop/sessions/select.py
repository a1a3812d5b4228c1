"""Which session store a place names: a SQLite file by default, PostgreSQL for a ``postgresql://`` URL."""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInput
from .sqlite import SQLiteSessionStore
from .store import SessionConfig, SessionStore

__all__ = ["is_shared_store", "open_store"]

_POSTGRES = ("postgresql://", "postgres://")


def is_shared_store(target: str | None) -> bool:
    """Whether ``target`` names a store other processes on other machines may share (PostgreSQL)."""
    return bool(target) and str(target).startswith(_POSTGRES)


def open_store(target: str | None = None, *, config: SessionConfig | None = None) -> SessionStore:
    """The session store ``target`` names, not yet connected (nothing is touched until its first call).

    Args:
        target: ``postgresql://user:password@host:5432/db`` (or ``postgres://``) for a
            ``PostgresSessionStore``, which needs ``pip install 'steadyloop[postgres]'``; ``sqlite:///path``
            or a plain path for a SQLite file; ``None`` or ``""`` for the default SQLite file
            (``default_session_path()``).
        config: lifecycle limits.

    Raises:
        InvalidInput: a URL of a kind no store reads, or the PostgreSQL extra is not installed.
    """
    if not target:
        return SQLiteSessionStore(config=config)
    if target.startswith(_POSTGRES):
        try:
            from .postgres import PostgresSessionStore
        except ImportError:
            raise InvalidInput(
                "a postgresql:// store needs psycopg: pip install 'steadyloop[postgres]'"
            ) from None
        return PostgresSessionStore(target, config=config)
    if "\x00" in target:
        raise InvalidInput("a session store path cannot hold a NUL character")
    if target.startswith("sqlite://"):
        path = target.removeprefix("sqlite://")
        if not path:
            raise InvalidInput("a sqlite:// store needs a path: sqlite:///path/to/sessions.db")
        return SQLiteSessionStore(Path(path), config=config)
    if "://" in target:
        raise InvalidInput(
            f"no session store reads {target.split('://', 1)[0]}:// URLs; "
            "use postgresql://..., sqlite:///path or a file path"
        )
    try:
        found = Path(target).expanduser()
    except RuntimeError:  # ~name of no user, or no home directory to expand ~ to
        raise InvalidInput(f"no home directory to expand in the session store path {target!r}") from None
    return SQLiteSessionStore(found, config=config)
