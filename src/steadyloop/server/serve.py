"""``serve``: the app on uvicorn, after refusing a bind that would open it to the network unguarded."""

from __future__ import annotations

from .app import create_app
from .settings import ServerSettings, check_bind

__all__ = ["serve"]


def serve(
    settings: ServerSettings, *, host: str = "127.0.0.1", port: int = 8765, log_level: str = "info"
) -> None:
    """Serve the API until interrupted.

    Raises:
        InvalidInput: ``host`` is not loopback and the settings have no token.
    """
    check_bind(host, settings)
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, lifespan="on")
