"""``serve``: the app on uvicorn, after refusing a bind that would open it to the network unguarded."""

from __future__ import annotations

import asyncio

from steadyloop.sessions import is_shared_store, open_store

from .app import create_app
from .settings import ServerSettings, check_bind

__all__ = ["serve"]


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
    if is_shared_store(settings.store):
        asyncio.run(_reach_store(settings.store or ""))
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, lifespan="on")


async def _reach_store(target: str) -> None:
    """Reach a shared store before uvicorn starts: its refusal comes out as one typed error to the caller,
    where inside the app's start it was uvicorn's traceback of a failed lifespan."""
    store = open_store(target)
    try:
        await store.list("steadyloop-serve")  # any call connects, and creates the schema on first use
    finally:
        await store.close()
