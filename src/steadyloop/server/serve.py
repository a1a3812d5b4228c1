"""``serve``: the app on uvicorn, after refusing a bind that would open it to the network unguarded."""

from __future__ import annotations

import asyncio
import ipaddress
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
        StoreUnavailable: the PostgreSQL store could not be reached within its connect timeout.
    """
    check_bind(host, settings)
    settings = answering_for(host, settings)
    if is_shared_store(settings.store):
        asyncio.run(_reach_store(settings.store or ""))
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, lifespan="on")


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


async def _reach_store(target: str) -> None:
    """Reach a shared store before uvicorn starts: its refusal comes out as one typed error to the caller,
    where inside the app's start it was uvicorn's traceback of a failed lifespan."""
    store = open_store(target)
    try:
        await store.list("steadyloop-serve")  # any call connects, and creates the schema on first use
    finally:
        await store.close()
