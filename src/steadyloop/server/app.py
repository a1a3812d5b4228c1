"""``create_app(settings)``: the Starlette app of one server, its state made here and nowhere else."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from importlib import resources

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from .errors import ApiError, error_body, error_response
from .guard import HostAndOrigin
from .openapi import openapi_document
from .routes import Api
from .runtime import Runtime
from .settings import ServerSettings

__all__ = ["create_app"]

log = logging.getLogger("steadyloop.server")

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 406: "not_acceptable", 413: "payload_too_large"}

#: The page's files (``server/page/``) by suffix; nothing else there is served.
_PAGE_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
# The page runs its own files only: no inline script or style, nothing from elsewhere, images only inline
# (a user's upload), and no other site may frame it (an Approve button under someone else's page).
_PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}


def _page_files() -> tuple[str, dict[str, tuple[str, str]]]:
    """The page's HTML, and its scripts and styles by name with their types."""
    folder = resources.files("steadyloop.server").joinpath("page")
    assets = {
        f.name: (f.read_text(encoding="utf-8"), _PAGE_TYPES[suffix])
        for f in folder.iterdir()
        if (suffix := f.name[f.name.rfind(".") :]) in _PAGE_TYPES
    }
    return folder.joinpath("index.html").read_text(encoding="utf-8"), assets


def create_app(settings: ServerSettings) -> Starlette:
    """The HTTP API (and the web page) over one session store and one endpoint.

    The store is opened and runs interrupted by an earlier stop are closed when the app starts (its
    lifespan); running runs are aborted and the store closed when it stops.
    """
    runtime = Runtime(settings)
    api = Api(runtime)
    document = openapi_document()
    page, assets = _page_files()

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await runtime.start()
        try:
            yield
        finally:
            await runtime.close()

    async def openapi(_: Request) -> Response:
        return JSONResponse(document)

    async def index(_: Request) -> Response:
        if not settings.page:
            raise ApiError("not_found", "the web page is turned off on this server")
        return HTMLResponse(page, headers=_PAGE_HEADERS)

    async def asset(request: Request) -> Response:
        found = assets.get(request.path_params["name"]) if settings.page else None
        if found is None:
            raise ApiError("not_found", "no such file of the page")
        text, media_type = found
        return Response(text, media_type=media_type, headers=_PAGE_HEADERS)

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def api_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc, runtime.scrub)

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = _HTTP_CODES.get(exc.status_code, "invalid_request")
        status = exc.status_code if exc.status_code in _HTTP_CODES else 400
        return JSONResponse(
            error_body(code, runtime.scrub(str(exc.detail))), status_code=status, headers=exc.headers
        )

    async def client_left(request: Request, _: Exception) -> Response:
        # The client went away before its body was all sent: nothing failed here, and nobody is left to
        # read an answer (the server sends none to a closed connection).
        log.info("a client left mid-request: %s %s, its body cut short", request.method, request.url.path)
        return JSONResponse(error_body("invalid_request", "the request body was cut short"), status_code=400)

    async def unexpected(_: Request, exc: Exception) -> Response:
        log.error("unexpected error in a request", exc_info=exc)
        return JSONResponse(error_body("internal", "the server failed on this request"), status_code=500)

    session = "/sessions/{session_id}"
    routes = [
        Route("/", index, methods=["GET"]),
        Route("/page/{name}", asset, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/info", api.info, methods=["GET"]),
        Route("/sessions", api.list_sessions, methods=["GET"]),
        Route("/sessions", api.create_session, methods=["POST"]),
        Route(session, api.get_session, methods=["GET"]),
        Route(session, api.rename_session, methods=["PATCH"]),
        Route(session, api.delete_session, methods=["DELETE"]),
        Route(f"{session}/export", api.export_session, methods=["GET"]),
        Route(f"{session}/messages", api.post_message, methods=["POST"]),
        Route(f"{session}/events", api.events, methods=["GET"]),
        Route(f"{session}/steer", api.steer, methods=["POST"]),
        Route(f"{session}/follow_up", api.follow_up, methods=["POST"]),
        Route(f"{session}/abort", api.abort, methods=["POST"]),
        Route(f"{session}/tree", api.tree, methods=["GET"]),
        Route(f"{session}/branch", api.branch, methods=["POST"]),
        Route(f"{session}/approvals", api.pending, methods=["GET"]),
        Route(f"{session}/approvals/{{approval_id}}", api.decide, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(HostAndOrigin, allowed_hosts=settings.allowed_hosts)],
        exception_handlers={
            ApiError: api_error,
            HTTPException: http_error,
            ClientDisconnect: client_left,
            Exception: unexpected,
        },
    )
    app.state.runtime = runtime
    return app
