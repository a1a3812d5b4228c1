"""Which requests the server takes: the Host they name, the page they come from, whether a proxy sent
them, and the type of the body they carry.

A server on loopback is reachable by every web page its user opens. Two things keep those pages out,
with or without tokens: the ``Host`` a request names must be a loopback name or one the operator
allowed (a hostile domain that a rebinding DNS points at 127.0.0.1 arrives with its own name), and a
request that changes something must come from no page at all or from the server's own (a page elsewhere
may send a "simple" cross-site POST without asking first; the browser still says where it came from).
JSON routes take ``application/json`` only, which no page can send elsewhere without that same asking.

The decisions are functions over header values; ``HostAndOrigin`` applies the first two to every request
before any route runs. ``docs/server.md`` says what each refusal looks like.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Collection, Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from steadyloop import InvalidInput

from .errors import CODES, error_body

__all__ = [
    "ANY_HOST",
    "STATE_CHANGING",
    "HostAndOrigin",
    "allowed_host_entry",
    "foreign_origin",
    "forwarded_by",
    "host_allowed",
    "is_json",
    "split_host",
]

log = logging.getLogger("steadyloop.server")

#: The ``allowed_hosts`` entry that takes any Host (the DNS-rebinding check off, for a proxy that checks).
ANY_HOST = "*"

#: Methods that change something: these must come from no page, or from the server's own.
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# A Host header (RFC 9110): a registered name, an IPv4 address or a bracketed IPv6 one, then a port.
_HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9._~-]{1,253})(?::(?P<port>[0-9]{1,5}))?")
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Headers a proxy (or a client pretending to be one) adds; any of them means the peer is not the client.
_FORWARDING = frozenset(
    {"forwarded", "x-real-ip", "via", "x-client-ip", "true-client-ip", "cf-connecting-ip"}
)


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's name (lowercased, one trailing dot dropped, an IPv6 literal in its brackets) and
    port; ``None`` when it is no host."""
    match = _HOST.fullmatch(value)
    if match is None:
        return None
    name = match["name"].lower()
    if name.endswith(".") and not name.startswith("["):
        name = name[:-1]
    if not name or name.startswith("."):
        return None
    if name.startswith("["):
        try:
            ipaddress.IPv6Address(name[1:-1])
        except ValueError:
            return None
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and not 0 < port < 65536:
        return None
    return name, port


def _is_loopback_name(name: str) -> bool:
    # *.localhost names are loopback by RFC 6761, and browsers resolve them so without asking DNS.
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(value: str | None, allowed: Collection[str] = ()) -> bool:
    """Whether a request naming ``Host: value`` is for this server: a loopback name (``localhost``,
    ``*.localhost``, 127.0.0.0/8, ``[::1]``) or a name in ``allowed`` (entries as ``allowed_host_entry``
    gives them; ``"*"`` takes any), whatever the port."""
    if value is None:
        return False
    parsed = split_host(value)
    if parsed is None:
        return False
    name = parsed[0]
    return ANY_HOST in allowed or _is_loopback_name(name) or name in allowed


def allowed_host_entry(entry: str) -> str:
    """An operator's allowed host as ``host_allowed`` compares it: a name or address, lowercased.

    Raises:
        InvalidInput: the entry is no host name or address (a URL, a path, a port, a wildcard pattern).
    """
    if entry == ANY_HOST:
        return entry
    parsed = split_host(entry) if isinstance(entry, str) else None
    if parsed is None or parsed[1] is not None:
        raise InvalidInput(
            f"an allowed host is a name or an address without scheme, port or path "
            f"(agents.example.com, 10.0.0.5, [fd00::5]) or '*' for any, not {str(entry)[:80]!r}"
        )
    return parsed[0]


def _origin_key(source: str) -> tuple[str, str, int | None] | None:
    """An Origin (or a Referer's origin) as scheme, host and port, the scheme's default port left out."""
    try:
        parts = urlsplit(source)
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or "@" in parts.netloc:
        return None
    parsed = split_host(parts.netloc)
    if parsed is None:
        return None
    name, port = parsed
    return parts.scheme, name, None if port == _DEFAULT_PORTS[parts.scheme] else port


def foreign_origin(method: str, host: str | None, origin: str | None, referer: str | None) -> str | None:
    """The page a state-changing request came from when that is not this server's own; ``None`` when the
    request may go on.

    The page is the ``Origin`` header, else the origin of the ``Referer``; a request with neither comes
    from no page (curl, an SDK) and goes on. The server's own origin has the host and port the request
    names in ``Host`` (which ``host_allowed`` checked).
    """
    if method.upper() not in STATE_CHANGING:
        return None
    source = origin if origin is not None else referer
    if source is None:
        return None
    key = _origin_key(source)
    own = split_host(host) if host is not None else None
    if key is None or own is None:
        return source or "(empty)"
    scheme, name, port = key
    own_port = None if own[1] == _DEFAULT_PORTS[scheme] else own[1]
    return None if (name, port) == (own[0], own_port) else source


def forwarded_by(headers: Iterable[tuple[str, str]]) -> str | None:
    """The header that says a request came through a proxy (``Forwarded``, ``X-Forwarded-*``,
    ``X-Real-IP``, ``Via``, ...), or ``None``: only then is the peer's address the client's."""
    for name, _ in headers:
        lowered = name.lower()
        if lowered in _FORWARDING or lowered.startswith("x-forwarded-"):
            return name
    return None


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` is ``application/json`` (its parameters, such as a charset, aside)."""
    if content_type is None:
        return False
    return content_type.partition(";")[0].strip().lower() == "application/json"


def _shown(value: str) -> str:
    return repr(value[:80])


class HostAndOrigin:
    """ASGI middleware: every HTTP request names an allowed Host, and a state-changing one comes from no
    page or this server's own; anything else is answered 403 with the API's error body.

    Args:
        app: the app behind it.
        allowed_hosts: names beyond the loopback ones (``allowed_host_entry`` form; ``"*"``: any).
    """

    def __init__(self, app: ASGIApp, allowed_hosts: Collection[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope["method"], Headers(scope=scope))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        code, message, hint = refusal
        log.info("refused %s %s: %s", scope["method"], scope.get("path", ""), message)
        response = JSONResponse(error_body(code, message, hint), status_code=CODES[code])
        await response(scope, receive, send)

    def refusal(self, method: str, headers: Headers) -> tuple[str, str, str] | None:
        """The error code, message and hint a request is refused with, or ``None`` when it may go on."""
        host = headers.get("host")
        if not host_allowed(host, self.allowed):
            return (
                "host_not_allowed",
                f"this server does not answer for the host {_shown(host or '')}",
                "address it as localhost or 127.0.0.1, or start it with --allow-host NAME for a name "
                "that reaches it (a web page on another name cannot use it)",
            )
        source = foreign_origin(method, host, headers.get("origin"), headers.get("referer"))
        if source is not None:
            return (
                "origin_not_allowed",
                f"a request from the page at {_shown(source)} may not change anything here",
                "only this server's own page, or a client that is no web page, may post to it",
            )
        return None
