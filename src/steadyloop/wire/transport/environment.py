"""What the process environment tells every HTTP client, checked before one is built.

Both transports read the proxy (``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY``, in either case) and the
certificates to trust (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) from the environment. A setting they cannot use
made each fail its own way, at a different moment: a raw ``ValueError`` from aiohttp's URL parser when the
client was built, an ``InvalidURL`` from httpx2, an ``ExceptionGroup`` around an ``OverflowError`` on the
first request for a port out of range, a ``FileNotFoundError`` for a certificate file that is not there.
Checked here, the same setting gives the same ``InvalidInput`` on either transport, before anything is
opened, with the variable named and any credential in it hidden.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit
from urllib.request import getproxies

from ...errors import InvalidInput

__all__ = ["check_environment"]

# Proxy schemes one of the transports can speak (the SOCKS ones with httpx2's socks extra).
_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def check_environment(url: str) -> None:
    """Raise ``InvalidInput`` when the environment names a proxy or certificates no client could use for
    requests to ``url``.

    Raises:
        InvalidInput: a proxy variable holds no usable proxy URL, or a certificate variable names a file
            or folder that is not there.
    """
    scheme = urlsplit(url).scheme
    proxies = getproxies()
    for name in (scheme, "all"):
        proxy = proxies.get(name)
        if proxy:
            _check_proxy(f"{name}_proxy", proxy)
    cert_file = os.environ.get("SSL_CERT_FILE")
    if cert_file and not os.path.isfile(cert_file):
        raise InvalidInput(f"SSL_CERT_FILE names {cert_file!r}, which is not a file")
    cert_dir = os.environ.get("SSL_CERT_DIR")
    if cert_dir and not os.path.isdir(cert_dir):
        raise InvalidInput(f"SSL_CERT_DIR names {cert_dir!r}, which is not a folder")


def _check_proxy(variable: str, proxy: str) -> None:
    # httpx2 reads a proxy without a scheme as an http:// one; aiohttp is given it the same way.
    full = proxy if "://" in proxy else f"http://{proxy}"
    problem = f"{variable.upper()} (or {variable}) holds {full!r}, which is not a proxy URL"
    if not full.isprintable() or any(c.isspace() for c in full):
        raise InvalidInput(f"{problem}: it has a space or a control character")
    try:
        parts = urlsplit(full)
        host = parts.hostname or ""
        host.encode("idna")
        _ = parts.port  # a port that is no number in range raises ValueError
    except (ValueError, UnicodeError):
        raise InvalidInput(f"{problem} with a host and a valid port") from None
    if not host:
        raise InvalidInput(f"{problem} with a host and a valid port")
    if parts.scheme.lower() not in _PROXY_SCHEMES:
        raise InvalidInput(f"{problem}: its scheme must be one of {', '.join(_PROXY_SCHEMES)}")
