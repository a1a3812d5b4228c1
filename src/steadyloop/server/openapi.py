"""The OpenAPI document, built from the same pydantic models the routes validate with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from steadyloop import __version__

from .errors import CODES
from .schemas import (
    BranchIn,
    BranchOut,
    CreateSession,
    Decision,
    DecisionOut,
    ErrorOut,
    InfoOut,
    PostMessage,
    QueuedOut,
    QueueMessage,
    RunOut,
    SessionDetail,
    SessionList,
    SessionOut,
    SessionPatch,
    TreeOut,
)

__all__ = ["openapi_document"]

_MODELS: list[type[BaseModel]] = [
    BranchIn,
    BranchOut,
    CreateSession,
    Decision,
    DecisionOut,
    ErrorOut,
    InfoOut,
    PostMessage,
    QueuedOut,
    QueueMessage,
    RunOut,
    SessionDetail,
    SessionList,
    SessionOut,
    SessionPatch,
    TreeOut,
]

# What a route that queues into a running session can answer beside its success.
_QUEUE_ERRORS = ("not_found", "no_run_in_progress", "unavailable")

_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "the session's id",
}


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ok(
    status: int, description: str, content: type[BaseModel] | dict[str, Any] | None = None
) -> dict[str, Any]:
    """The success response: no body, a model's JSON, or the media types given."""
    if content is None:
        return {str(status): {"description": description}}
    if isinstance(content, dict):
        return {str(status): {"description": description, "content": content}}
    return {str(status): {"description": description, "content": _json(_ref(content))}}


def _errors(*codes: str) -> dict[str, Any]:
    """One response per status the codes (and those every route may answer) map to, each an ``ErrorOut``.

    Every route may answer 503 ``unavailable``: while the session store's database is away. Every route may
    also answer 400 in plain text: a request that is not valid HTTP (a `Content-Length` that is not a number,
    a header name with a space) is refused by the HTTP layer before any route reads it.
    """
    out: dict[str, Any] = {}
    statuses = sorted({CODES[c] for c in ("unauthorized", "forbidden", "internal", "unavailable", *codes)})
    for status in statuses:
        named = ", ".join(sorted(c for c, s in CODES.items() if s == status))
        out[str(status)] = {"description": f"error ({named})", "content": _json(_ref(ErrorOut))}
    not_http = {"text/plain": {"schema": {"type": "string"}}}
    if "400" in out:
        out["400"]["content"] = {**out["400"]["content"], **not_http}
        out["400"]["description"] += "; in plain text, a request that is not valid HTTP"
    else:
        out["400"] = {
            "description": "a request that is not valid HTTP, refused in plain text",
            "content": not_http,
        }
    return dict(sorted(out.items()))


def _operation(
    operation_id: str,
    summary: str,
    ok: dict[str, Any],
    *errors: str,
    description: str | None = None,
    parameters: list[dict[str, Any]] | None = None,
    body: type[BaseModel] | None = None,
) -> dict[str, Any]:
    """One operation: its success response ``ok`` and its errors; a JSON body adds the errors of one
    (``invalid_request``, ``payload_too_large``, ``unsupported_media_type``)."""
    operation: dict[str, Any] = {"operationId": operation_id, "summary": summary}
    if description is not None:
        operation["description"] = description
    if parameters is not None:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = {"required": True, "content": _json(_ref(body))}
        errors = ("invalid_request", "payload_too_large", "unsupported_media_type", *errors)
    operation["responses"] = {**ok, **_errors(*errors)}
    return operation


_SSE = {
    "text/event-stream": {
        "schema": {"type": "string"},
        "example": 'id: 7\nevent: message_end\ndata: {"type": "message_end", ...}\n\n',
    }
}


_ABOUT = (
    "Sessions of a steadyloop agent over HTTP. Every request must name a loopback host (`localhost`, "
    "`127.0.0.1`, `[::1]`, any port) or one the operator allowed in `Host`, else 403 `host_not_allowed`. "
    "A POST, PUT, PATCH or DELETE that carries an `Origin` (or, without one, a `Referer`) must come from "
    "the server's own origin, else 403 `origin_not_allowed`. A body is JSON with `Content-Type: "
    "application/json`, else 415 `unsupported_media_type`. No response grants another origin a read "
    "(no CORS headers). Without bearer tokens the server answers loopback clients only, and a request "
    "a proxy forwarded (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`, `Via`) is none: 403 `forbidden`."
)


def openapi_document() -> dict[str, Any]:
    """The API as an OpenAPI 3.1 document."""
    _, schemas = models_json_schema(
        [(m, "validation") for m in _MODELS], ref_template="#/components/schemas/{model}"
    )
    components = schemas.get("$defs", {})
    on_session = [_SESSION_ID]
    paths: dict[str, Any] = {
        "/info": {
            "get": _operation(
                "info",
                "What the server offers: its model, tools, MCP servers and limits",
                _ok(200, "the server", InfoOut),
            )
        },
        "/sessions": {
            "get": _operation(
                "listSessions",
                "The caller's sessions, most recently active first",
                _ok(200, "the sessions", SessionList),
                "invalid_request",
                parameters=[
                    {
                        "name": "q",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "maxLength": 200},
                        "description": "only sessions whose title, or whose user or assistant messages, "
                        "contain this text (case and spacing aside)",
                    }
                ],
            ),
            "post": _operation(
                "createSession",
                "Create a session from agent settings or an agent document",
                _ok(201, "the new session", SessionOut),
                "unavailable",
                "approvals_below_floor",
                description="The server's approvals (which effects and tools wait for a decision, and for "
                "how long) are a floor set by its operator: `approvals` (or the agent document's "
                "`[approvals]`) may gate more effects and tools and shorten `timeout_s`, never leave out an "
                "effect or a tool the server gates or wait longer. A request that would is refused whole "
                "with 403 `approvals_below_floor`, its message naming each lowering and the floor.",
                body=CreateSession,
            ),
        },
        "/sessions/{session_id}": {
            "parameters": on_session,
            "get": _operation(
                "getSession",
                "The session: its transcript, usage, status and pending approvals",
                _ok(200, "the session", SessionDetail),
                "not_found",
                "unavailable",
            ),
            "patch": _operation(
                "renameSession",
                "Rename the session",
                _ok(200, "the session", SessionOut),
                "not_found",
                description="A blank or null title clears it; the session's next message titles it "
                "again, as its first message titled it. Renaming leaves its place in the list as it was.",
                body=SessionPatch,
            ),
            "delete": _operation(
                "deleteSession",
                "Delete the session with its transcript and record",
                _ok(204, "deleted"),
                "not_found",
                "run_in_progress",
            ),
        },
        "/sessions/{session_id}/export": {
            "parameters": on_session,
            "get": _operation(
                "exportSession",
                "The whole session as JSONL: a header, its messages, its events",
                _ok(200, "JSONL", {"application/x-ndjson": {"schema": {"type": "string"}}}),
                "not_found",
            ),
        },
        "/sessions/{session_id}/messages": {
            "parameters": on_session,
            "post": _operation(
                "postMessage",
                "Run the agent on a new user message",
                _ok(200, "the run's end (JSON) or its events (SSE)", {**_json(_ref(RunOut)), **_SSE}),
                "not_found",
                "run_in_progress",
                "too_many_runs",
                "unavailable",
                description="With `Accept: text/event-stream` every event of the run streams as SSE "
                "(`id:` is the event's seq in the session's record; live deltas come as `event: delta` "
                "without an id). Otherwise the answer comes back as JSON when the run ends. A second "
                "message while a run is going gets 409 `run_in_progress`: steer, follow up, or abort.",
                body=PostMessage,
            ),
        },
        "/sessions/{session_id}/events": {
            "parameters": on_session,
            "get": _operation(
                "sessionEvents",
                "Replay the session's event record after a seq, then follow it live",
                _ok(200, "the events as SSE", _SSE),
                "invalid_request",
                "not_found",
                description="Each recorded event once, in seq order, with no gap between the replay "
                "and the live feed. `follow=run` (default) ends at the end of the run going when it "
                "attached (at once when none was); `follow=session` stays until the client leaves.",
                parameters=[
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 0},
                        "description": "replay from the event after this seq (default: Last-Event-ID, or 0)",
                    },
                    {
                        "name": "follow",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string", "enum": ["run", "session"]},
                    },
                ],
            ),
        },
        "/sessions/{session_id}/steer": {
            "parameters": on_session,
            "post": _operation(
                "steer",
                "Queue a message the running model reads after its current step",
                _ok(202, "queued", QueuedOut),
                *_QUEUE_ERRORS,
                body=QueueMessage,
            ),
        },
        "/sessions/{session_id}/follow_up": {
            "parameters": on_session,
            "post": _operation(
                "followUp",
                "Queue a message for when the running model would otherwise stop",
                _ok(202, "queued", QueuedOut),
                *_QUEUE_ERRORS,
                body=QueueMessage,
            ),
        },
        "/sessions/{session_id}/abort": {
            "parameters": on_session,
            "post": _operation(
                "abort",
                "Stop the running run",
                _ok(202, "stopping"),
                *_QUEUE_ERRORS,
            ),
        },
        "/sessions/{session_id}/tree": {
            "parameters": on_session,
            "get": _operation(
                "sessionTree",
                "Every entry of the session's tree, with its parent, and the entry it continues from",
                _ok(200, "the tree", TreeOut),
                "not_found",
            ),
        },
        "/sessions/{session_id}/branch": {
            "parameters": on_session,
            "post": _operation(
                "branch",
                "Continue the session from an entry of its tree",
                _ok(200, "the move", BranchOut),
                "not_found",
                "run_in_progress",
                "unknown_entry",
                "unavailable",
                description="The branch left behind stays in the tree. With `summarise` (the default) "
                "it is summarised by the session's model into an entry under the target, listing the files "
                "it read and changed, and the session continues from that entry. A summary that fails or "
                "is aborted (`POST /sessions/{id}/abort`) moves nothing: `moved` is false and `summary` "
                "says why. Refused with 409 while a run or another move is going.",
                body=BranchIn,
            ),
        },
        "/sessions/{session_id}/approvals": {
            "parameters": on_session,
            "get": _operation(
                "pendingApprovals",
                "The gated calls waiting for a decision",
                _ok(200, "the waiting approvals", _json({"type": "object"})),
                "not_found",
                "unavailable",
            ),
        },
        "/sessions/{session_id}/approvals/{approval_id}": {
            "parameters": [
                _SESSION_ID,
                {"name": "approval_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "post": _operation(
                "decide",
                "Allow or deny a gated call; the decision is an event every watcher sees",
                _ok(200, "decided", DecisionOut),
                "not_found",
                "already_decided",
                "unavailable",
                body=Decision,
            ),
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "steadyloop", "version": __version__, "description": _ABOUT},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
