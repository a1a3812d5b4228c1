"""Reaching a PostgreSQL server for the first time (internal to the PostgreSQL store).

The connection pool retries every failed connection until its timeout and then says only that none came:
a wrong password cost the caller the whole connect timeout, and libpq's reason ("password authentication
failed for user ...") was dropped. Here the first connection is made by hand and its failure read. A
refusal that no retry can change (the server will give the same answer in a second or an hour) is an
``InvalidInput`` at once, with libpq's words; anything else may be a server that is not up yet, so it is
tried again until the timeout, and the ``StoreUnavailable`` at the end carries the last reason.

libpq gives no SQLSTATE for a connection that never started, so the kind of failure is read from its
words. Only refusals recognised below fail fast; words not recognised (a server that answers in another
language, a libpq message new to us) keep the patient path, so the worst a misreading costs is the wait
there was before.
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
from .store import StoreUnavailable

__all__ = ["first_connection", "shown_url"]

log = logging.getLogger("steadyloop.sessions.postgres")

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
            return await asyncio.wait_for(
                AsyncConnection.connect(url, autocommit=True, row_factory=dict_row), left
            )
        except TimeoutError:
            break  # the last attempt ran out of time: the reason before it says more
        except psycopg.Error as exc:
            reason = _reason(exc, url)
            if _CANNOT_RETRY.search(reason):
                raise InvalidInput(
                    f"the session database at {shown_url(url)} refuses the connection "
                    f"(trying again will not help): {reason}"
                ) from None
            log.debug("the session database is not reachable yet (%s); trying again", reason)
        await asyncio.sleep(min(pause, max(deadline - loop.time(), 0.0)))
        pause = min(pause * 2, _MAX_PAUSE)
    raise StoreUnavailable(
        f"the session database at {shown_url(url)} is unavailable after {patience:g} s: {reason}"
    )
