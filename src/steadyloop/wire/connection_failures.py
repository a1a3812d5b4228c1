"""How a request that got no answer failed, read from what the HTTP library raised, without I/O.

Each library wraps the socket's error in its own, and not always in the right one: the SDK's aiohttp
transport reports a refused connection as a connect timeout, and the SDK then says "Request timed out.".
So the chain of causes is walked down to the socket's own error (a refused connect, a failed name lookup, a
certificate check), which says what happened; the library's class names only break a tie (which phase a
timeout was in).

Nothing listening, a name that does not resolve and a certificate that is not trusted meet the same wall
when sent again at once: those are ``lasting``, and are not retried. A temporary lookup failure, a timeout
and a dropped connection are not.
"""

from __future__ import annotations

import errno
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import Connection, EndpointUnreachable, redact_url

__all__ = ["ConnectionFailure", "read_connection_failure", "unreachable"]

# The deepest a chain of causes is walked; real ones are four or five long.
_MAX_CHAIN = 32

# What the HTTP libraries call their timeouts, by phase (aiohttp's, httpx2's and the SDKs').
_CONNECT_TIMEOUTS = frozenset({"ConnectTimeout", "ConnectionTimeoutError", "PoolTimeout"})
_TIMEOUTS = _CONNECT_TIMEOUTS | frozenset(
    {
        "ReadTimeout",
        "WriteTimeout",
        "SocketTimeoutError",
        "ServerTimeoutError",
        "TimeoutException",
        "APITimeoutError",
    }
)
_DROPS = frozenset(
    {
        "ServerDisconnectedError",
        "ClientConnectionResetError",
        "ClientPayloadError",
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
    }
)
_DNS_NAMES = frozenset({"ClientConnectorDNSError"})
_TLS_NAMES = frozenset({"ClientConnectorCertificateError", "ClientConnectorSSLError", "ClientSSLError"})


@dataclass(frozen=True, slots=True)
class ConnectionFailure:
    """What happened to a request that got no answer.

    Attributes:
        connection: how it failed (see ``EndpointUnreachable.connection``).
        host: the host connected to (a proxy's, when the failure was the proxy's).
        port: its port.
        detail: the socket's or the TLS library's own words, when they add something.
        lasting: sending again at once would meet the same failure.
        timeout_s: for a timeout, the allowance that ran out, when known.
        connect_phase: for a timeout, whether it ran out before a connection was made.
    """

    connection: Connection
    host: str | None
    port: int | None
    detail: str = ""
    lasting: bool = False
    timeout_s: float | None = None
    connect_phase: bool = False

    @property
    def where(self) -> str:
        """``host:port`` as far as it is known."""
        if self.host is None:
            return "the endpoint"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def problem(self) -> str:
        """What happened, in a few words."""
        where = self.where
        if self.connection == "refused":
            return f"nothing listens on {where}"
        if self.connection == "dns":
            host = self.host or where
            return f"cannot resolve host {host}" + ("" if self.lasting else f" for now ({self.detail})")
        if self.connection == "tls":
            if "CERTIFICATE_VERIFY_FAILED" in self.detail or "certificate" in self.detail:
                return f"TLS: certificate verify failed for {where} ({_verify_words(self.detail)})"
            if _no_tls(self.detail):
                return f"TLS handshake with {where} failed: what answers there does not speak TLS"
            return f"TLS handshake with {where} failed ({self.detail})"
        if self.connection == "timeout":
            within = f"within {self.timeout_s:g} s" if self.timeout_s else "in time"
            if self.connect_phase:
                return f"no connection to {where} {within}"
            return f"no answer from {where} {within}"
        if self.connection == "dropped":
            return f"the connection to {where} broke" + (f" ({self.detail})" if self.detail else "")
        return f"could not talk to {where}" + (f": {self.detail}" if self.detail else "")

    @property
    def fix(self) -> str:
        """What to do about it, or ``""`` when waiting is the fix (it is retried)."""
        if self.connection == "refused":
            return "start the server, or check the base URL"
        if self.connection == "dns":
            return "check the host name in the base URL" if self.lasting else "check the network"
        if self.connection == "tls":
            if _no_tls(self.detail):
                return "check the base URL's scheme (http:// or https://) and port"
            return (
                "if its certificate comes from your own authority, point SSL_CERT_FILE at that "
                "authority's certificate; else check the base URL"
            )
        if self.connection == "timeout" and self.connect_phase:
            return "check the host and port, and that no firewall or proxy drops the connection"
        return ""

    def message(self) -> str:
        """The error's message: the problem, then the fix."""
        fix = self.fix
        return f"{self.problem}: {fix}" if fix else self.problem


def read_connection_failure(
    exc: BaseException, url: str, *, timeout_s: float | None = None, timed_out: bool = False
) -> ConnectionFailure:
    """What a request to ``url`` that raised ``exc`` before any answer (or mid-body) ran into.

    Args:
        exc: what the HTTP library, the SDK or the socket raised.
        url: where the request went; the host and port come from it unless the error names the one it
            tried (a proxy's).
        timeout_s: the allowance in force, for a timeout's message.
        timed_out: the caller knows the request timed out (its own clock ran out).
    """
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    host, port = _target(chain, url)
    found = _lasting_failure(chain, names)
    if found is not None:
        connection, detail, lasting = found
        return ConnectionFailure(connection, host, port, detail, lasting)
    if timed_out or names & _TIMEOUTS or any(isinstance(e, TimeoutError) for e in chain):
        connect = bool(names & _CONNECT_TIMEOUTS)
        return ConnectionFailure("timeout", host, port, timeout_s=timeout_s, connect_phase=connect)
    # The innermost drop says it best ("Server disconnected without sending a response").
    drop = next((e for e in reversed(chain) if _dropped(e) or type(e).__name__ in _DROPS), None)
    if drop is not None:
        return ConnectionFailure("dropped", host, port, _words(drop))
    return ConnectionFailure("other", host, port, _other_words(exc))


def unreachable(
    exc: BaseException,
    *,
    endpoint: str | None,
    model: str | None,
    timeout_s: float | None = None,
    timed_out: bool = False,
) -> EndpointUnreachable:
    """The typed error for a request to ``endpoint`` that raised ``exc`` before its answer ended."""
    failure = read_connection_failure(exc, endpoint or "", timeout_s=timeout_s, timed_out=timed_out)
    return EndpointUnreachable(
        failure.message(),
        connection=failure.connection,
        host=failure.host,
        port=failure.port,
        problem=failure.problem,
        timeout_s=failure.timeout_s,
        endpoint=endpoint,
        model=model,
        kind="unreachable" if failure.lasting else "transient",
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it was raised from or during, groups opened, each once, outermost first."""
    seen: set[int] = set()
    out: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo and len(out) < _MAX_CHAIN:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        out.append(current)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return out


def _lasting_failure(chain: list[BaseException], names: set[str]) -> tuple[Connection, str, bool] | None:
    """A TLS, name-lookup or refused-connect failure anywhere in the chain, the most telling first; the
    innermost error of a kind is the socket's own (a library's wrapper may subclass it without its
    fields)."""
    inner = chain[::-1]
    for exc in inner:
        if isinstance(exc, ssl.SSLCertVerificationError):
            said = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or exc
            return "tls", f"CERTIFICATE_VERIFY_FAILED: {said}", True
    for exc in inner:
        if isinstance(exc, ssl.SSLError) and not isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError):
            return "tls", str(getattr(exc, "reason", None) or exc), True
    for exc in inner:
        if isinstance(exc, socket.gaierror):
            return "dns", exc.strerror or str(exc), exc.errno != socket.EAI_AGAIN
    if names & _DNS_NAMES:
        return "dns", "", True
    if names & _TLS_NAMES:
        return "tls", "", True
    for exc in inner:
        if isinstance(exc, ConnectionRefusedError) or (
            isinstance(exc, OSError)
            and not isinstance(exc, socket.gaierror)
            and exc.errno == errno.ECONNREFUSED
        ):
            return "refused", "", True
    return None


def _dropped(exc: BaseException) -> bool:
    return isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError | ssl.SSLEOFError)


def _target(chain: list[BaseException], url: str) -> tuple[str | None, int | None]:
    """The host and port connected to: as the error names them (aiohttp does, a proxy's included), else
    the URL's."""
    for exc in chain:
        host, port = getattr(exc, "host", None), getattr(exc, "port", None)
        if isinstance(host, str) and host and isinstance(port, int) and not isinstance(port, bool):
            return host, port
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    host = parts.hostname
    if host is None:
        return None, None
    if port is None:
        port = 443 if parts.scheme == "https" else 80 if parts.scheme == "http" else None
    return host, port


def _no_tls(detail: str) -> bool:
    """Whether the handshake's words say the other side sent something that is not TLS (plain HTTP)."""
    return any(word in detail for word in ("WRONG_VERSION_NUMBER", "RECORD_LAYER", "HTTP_REQUEST"))


def _verify_words(detail: str) -> str:
    return detail.removeprefix("CERTIFICATE_VERIFY_FAILED: ").strip() or "not trusted"


def _words(exc: BaseException) -> str:
    return redact_url(str(exc).strip() or type(exc).__name__)


def _other_words(exc: BaseException) -> str:
    # The old wording, kept for what no rule reads: the outer words, then the cause's.
    reason = _words(exc)
    cause = exc.__cause__
    if cause is not None and str(cause):
        reason = f"{reason} ({redact_url(str(cause))})"
    return reason
