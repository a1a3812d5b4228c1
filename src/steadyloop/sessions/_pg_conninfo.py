"""Checking a PostgreSQL URL or conninfo before a pool is built on it (internal to the PostgreSQL store).

The connection pool retries every failed connection until its timeout, so an option libpq refuses
(``sslmode=bogus``, a port out of range) cost the caller the whole connect timeout and then came out as
"couldn't get a connection", the reason lost. libpq checks its options when a connection starts, before any
network I/O; here it starts one to a socket folder that cannot exist, so that step runs and nothing is sent
or looked up: an error that does not name that folder is about the options.
"""

from __future__ import annotations

import uuid

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import InvalidInput
from ._pg_reach import shown_url

__all__ = ["check_conninfo"]

_USAGE = "(postgresql://user@host:5432/dbname, with known query parameters)"


def check_conninfo(url: str) -> None:
    """Raise ``InvalidInput`` when libpq cannot connect with ``url`` as it is written, whatever the server.

    Raises:
        InvalidInput: the text is no URL or conninfo, or an option in it has a value libpq refuses. The
            message has libpq's reason with the password hidden.
    """
    shown = shown_url(url)
    try:
        params = conninfo_to_dict(url)
    except (psycopg.Error, ValueError):
        # Not libpq's words: they may quote a piece of the password.
        raise InvalidInput(f"not a PostgreSQL URL or conninfo libpq can read: {shown!r} {_USAGE}") from None
    nowhere = f"/nonexistent-steadyloop-{uuid.uuid4().hex}"
    hosts = str(params.get("host") or "").split(",")
    # As many socket folders as hosts, so a port list that does not match the hosts is still refused.
    probe = {**params, "host": ",".join(nowhere for _ in hosts)}
    try:
        conn = pq.PGconn.connect_start(make_conninfo("", **probe).encode())
    except (psycopg.Error, ValueError):  # pragma: no cover - conninfo_to_dict read it a line above
        raise InvalidInput(f"not a PostgreSQL URL or conninfo libpq can read: {shown!r} {_USAGE}") from None
    try:
        if conn.status != pq.ConnStatus.BAD:
            return  # started (over TCP to a hostaddr): the options passed
        reason = conn.error_message.decode("utf-8", "replace").strip()
    finally:
        conn.finish()
    if nowhere in reason:
        return  # it got as far as the socket: the options passed
    password = params.get("password")
    if password:
        reason = reason.replace(str(password), "***")
    raise InvalidInput(f"libpq refuses the options of {shown!r}: {reason}")
