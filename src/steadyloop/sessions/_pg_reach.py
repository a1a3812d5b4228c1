"""Reaching a PostgreSQL server, and reading why it could not be reached (internal to the PostgreSQL store).

The connection pool retries every failed connection until its timeout and then says only that none came:
a wrong password cost the caller the whole connect timeout, and libpq's reason ("password authentication
failed for user ...") was dropped. Here the first connection is made by hand and its failure read. A
refusal that no retry can change (the server will give the same answer in a second or an hour) is an
``InvalidInput`` at once, with libpq's words; anything else may be a server that is not up yet, so it is
tried again until the timeout, and the ``StoreUnavailable`` at the end carries the last reason.

The kind of failure is read from its SQLSTATE where psycopg gives one, else from libpq's words. A
connection refused during start-up comes with no code (psycopg 3.3 on libpq 18: ``sqlstate`` is ``None``
for a wrong password, a missing role or database, ``pg_hba.conf``, SSL and a full server alike), so there
the words decide; a connection lost later does (57P01 when an administrator ends the backend). Only
refusals recognised below fail fast; words not recognised (a server that answers in another language, a
libpq message new to us) keep the patient path, so the worst a misreading costs is the wait there was
before.
"""

from __future__ import annotations

import asyncio
import logging
import re

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from ..errors import InvalidInput, redact_url
from .reconnects import ConnectFailure
from .store import StoreUnavailable

__all__ = ["ConnectFailure", "first_connection", "read_failure", "refusal", "shown_url"]

log = logging.getLogger("steadyloop.sessions.postgres")

#: SQLSTATEs of refusals no retry changes. 28P01 invalid_password; 28000 invalid_authorization_specification
#: (a missing role, a role without LOGIN, ``pg_hba.conf`` rules); 3D000 invalid_catalog_name (no such
#: database); 42501 insufficient_privilege (no CONNECT on the database); 55000 (a database that takes no
#: connections: read only from connecting, where nothing else gives that code). Any other code passes:
#: 53300 too_many_connections and 57P03 cannot_connect_now (starting up, shutting down, in recovery) among
#: them, and 57P01 admin_shutdown, a backend ended under a live connection.
_CANNOT_RETRY_CODES = frozenset({"28P01", "28000", "3D000", "42501", "55000"})

#: libpq and server words for refusals that come back the same however often the connection is tried.
#: Absent on purpose, because they pass by themselves: "too many clients already" and "too many
#: connections for role" (53300: others disconnect), "the database system is starting up", "... is
#: shutting down", "... is in recovery mode" (57P03), "Connection refused", timeouts and host names that
#: do not resolve yet (a server or its DNS name still coming up).
_CANNOT_RETRY = re.compile(
    "|".join(
        [
            r"authentication failed for user",  # 28P01/28000: password, peer, ident, ldap, cert, ...
            r"no password supplied",  # the server asks for a password the URL does not have
            r"\b(role|database) \".*\" does not exist",  # 28000, 3D000
            r"is not permitted to log in",  # 28000: a role without LOGIN
            r"permission denied for database",  # 42501: no CONNECT privilege
            r"no pg_hba\.conf entry",  # 28000: the server's rules refuse this host, user, database or SSL
            r"pg_hba\.conf rejects connection",
            r"database \".*\" is not currently accepting connections",  # 55000: datallowconn is off
            r"SSL was required",  # sslmode=require against a server without SSL
            r"certificate",  # a certificate that is missing or does not verify will not verify later
            r"channel binding",  # channel_binding=require where the server cannot
            r"authentication method requirement",  # require_auth refuses what the server asks for
            r"unsupported frontend protocol",
        ]
    ),
    re.IGNORECASE,
)

#: The pause before trying again after a transient failure, doubled up to the cap.
_FIRST_PAUSE = 0.05
_MAX_PAUSE = 1.0


def shown_url(url: str) -> str:
    """``url`` as it may appear in a message: the password hidden, whether written as a URL's userinfo or
    as a ``password=`` parameter of a URL or a conninfo."""
    shown = redact_url(url)
    try:
        password = conninfo_to_dict(url).get("password")
    except (psycopg.Error, ValueError):
        return shown
    if password and str(password) in shown:
        # A ``?password=`` parameter or a ``password=`` conninfo: written again with the password hidden.
        return make_conninfo("", **{**conninfo_to_dict(url), "password": "***"})
    return shown


def read_failure(exc: BaseException, url: str) -> ConnectFailure:
    """What a psycopg error from connecting to (or talking over a connection to) ``url`` says: its code
    decides when it has one; libpq's words decide when it has none."""
    reason = _reason(exc, url)
    code = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    if code:
        return ConnectFailure(reason, code in _CANNOT_RETRY_CODES, code)
    return ConnectFailure(reason, _CANNOT_RETRY.search(reason) is not None)


def _reason(exc: BaseException, url: str) -> str:
    """libpq's words on one line, without the password."""
    text = " ".join(str(exc).split())
    try:
        password = conninfo_to_dict(url).get("password")
    except (psycopg.Error, ValueError):
        password = None
    if password:
        text = text.replace(str(password), "***")
    return redact_url(text)


def refusal(url: str, failure: ConnectFailure, refused: str = "the connection") -> InvalidInput:
    """The error for a refusal no retry changes, at the first connection or any later one, or of what the
    store asks once connected (``refused`` says what: its tables, say, where the role may not use them).

    ``InvalidInput``, not ``StoreUnavailable``: what the caller passed (the URL's password, role or
    database) is what the server refuses, and a caller that retries a ``StoreUnavailable`` would wait
    forever; the fix is a new URL or a change on the server, both outside the store.
    """
    return InvalidInput(
        f"the session database at {shown_url(url)} refuses {refused} "
        f"(trying again will not help): {failure.reason}"
    )


async def first_connection(url: str, patience: float) -> AsyncConnection[DictRow]:
    """A connection to ``url`` (autocommit, rows as dicts), tried until ``patience`` seconds have passed.

    Raises:
        InvalidInput: the server refused in a way no retry changes (authentication, a missing role or
            database, SSL or ``pg_hba.conf`` rules); the message has libpq's reason, password hidden.
        StoreUnavailable: no connection within ``patience``; the message has the last reason.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    pause = _FIRST_PAUSE
    reason = "no answer from the server"
    while (left := deadline - loop.time()) > 0:
        try:
            async with asyncio.timeout(left):
                return await AsyncConnection.connect(url, autocommit=True, row_factory=dict_row)
        except TimeoutError:
            break  # the last attempt ran out of time: the reason before it says more
        except psycopg.Error as exc:
            failure = read_failure(exc, url)
            reason = failure.reason
            if failure.refused:
                raise refusal(url, failure) from None
            log.debug("the session database is not reachable yet (%s); trying again", reason)
        await asyncio.sleep(min(pause, max(deadline - loop.time(), 0.0)))
        pause = min(pause * 2, _MAX_PAUSE)
    raise StoreUnavailable(
        f"the session database at {shown_url(url)} is unavailable after {patience:g} s: {reason}"
    )
