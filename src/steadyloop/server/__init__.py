"""``steadyloop serve``: sessions over HTTP, their runs streamed as SSE, attach from any seq, remote approvals (public).

Needs the ``server`` extra (``pip install 'steadyloop[server]'``). The server is a shell over the public
API: an ``Agent`` per session, living in the SQLite session store, its events fanned out to every watcher.
``create_app(settings)`` makes the Starlette app; ``serve`` runs it on uvicorn. See ``docs/server.md``.
"""

from .app import create_app
from .errors import CODES, ApiError
from .serve import serve
from .settings import LOCAL_PRINCIPAL, ServerLimits, ServerSettings, check_bind

__all__ = [
    "CODES",
    "LOCAL_PRINCIPAL",
    "ApiError",
    "ServerLimits",
    "ServerSettings",
    "check_bind",
    "create_app",
    "serve",
]
