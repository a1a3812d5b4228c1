"""``serve``: the app on uvicorn, after refusing a bind that would open it to the network unguarded.

A node without a name is named after its host and the port it listens on (``host:8765``); with ``port=0``
the system picks the port, so the socket is bound first and the name taken from it, and said on stderr.
On a PostgreSQL store the name is checked before anything starts: a name another live node holds is
refused (``NameInUse``) in one line, rather than as the traceback of a failed start.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from dataclasses import replace

from steadyloop.sessions import is_shared_store, open_store

from .app import create_app
from .settings import ServerSettings, check_bind

__all__ = ["answering_for", "serve"]


def serve(
    settings: ServerSettings, *, host: str = "127.0.0.1", port: int = 8765, log_level: str = "info"
) -> None:
    """Serve the API until interrupted.

    Raises:
        InvalidInput: ``host`` is not loopback and the settings have no token, or the PostgreSQL store
            refuses the connection (a wrong password, a missing database).
        NameInUse: another live node on the PostgreSQL store has the node's name.
        StoreUnavailable: the PostgreSQL store could not be reached within its connect timeout.
    """
    check_bind(host, settings)
    settings = answering_for(host, settings)
    bound: socket.socket | None = None
    if settings.node is None:
        if port == 0:
            bound = _bind(host)
            port = int(bound.getsockname()[1])
        settings = replace(settings, node=f"{socket.gethostname()}:{port}")
    if is_shared_store(settings.store):
        asyncio.run(_reach_store(settings.store or "", settings.node or ""))
    import uvicorn

    app = create_app(settings)
    if bound is None:
        uvicorn.run(app, host=host, port=port, log_level=log_level, lifespan="on")
        return
    shown = f"[{host}]" if ":" in host else host
    print(f"steadyloop serve: node {settings.node} on http://{shown}:{port}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    uvicorn.Server(config).run(sockets=[bound])


def _bind(host: str) -> socket.socket:
    """A socket listening on ``host`` at a port the system picks (as uvicorn would bind it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), 0))
    sock.set_inheritable(True)
    return sock


def answering_for(host: str, settings: ServerSettings) -> ServerSettings:
    """The settings with the address the server listens on among its allowed hosts: a client that names
    that address reaches it as the operator chose (a wildcard address names no host, so it adds none)."""
    name = host.strip("[]")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        address = None
    if address is not None and address.is_unspecified:
        return settings
    entry = f"[{name}]" if address is not None and address.version == 6 else name
    if entry.lower() in settings.allowed_hosts:
        return settings
    return replace(settings, allowed_hosts=(*settings.allowed_hosts, entry))


async def _reach_store(target: str, node: str) -> None:
    """Reach a shared store before uvicorn starts, and see that no live node has this node's name: a
    refusal comes out as one typed error to the caller, where inside the app's start it was uvicorn's
    traceback of a failed lifespan."""
    from .nodes import name_free

    store = open_store(target)
    try:
        await store.list("steadyloop-serve")  # any call connects, and creates the schema on first use
    finally:
        await store.close()
    await name_free(target, node)
