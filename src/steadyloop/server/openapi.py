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
    TreeOut,
]

_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "the session's id",
}


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json_body(model: type[BaseModel]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(model)}}}


def _ok(status: int, description: str, model: type[BaseModel] | None = None) -> dict[str, Any]:
    if model is None:
        return {str(status): {"description": description}}
    return {
        str(status): {"description": description, "content": {"application/json": {"schema": _ref(model)}}}
    }


def _errors(*codes: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    statuses = sorted({CODES[c] for c in ("unauthorized", "forbidden", "internal", *codes)})
    for status in statuses:
        named = ", ".join(sorted(c for c, s in CODES.items() if s == status))
        out[str(status)] = {
            "description": f"error ({named})",
            "content": {"application/json": {"schema": _ref(ErrorOut)}},
        }
    return out


_SSE = {
    "text/event-stream": {
        "schema": {"type": "string"},
        "example": 'id: 7\nevent: message_end\ndata: {"type": "message_end", ...}\n\n',
    }
}


def openapi_document() -> dict[str, Any]:
    """The API as an OpenAPI 3.1 document."""
    _, schemas = models_json_schema(
        [(m, "validation") for m in _MODELS], ref_template="#/components/schemas/{model}"
    )
    components = schemas.get("$defs", {})
    on_session = [_SESSION_ID]
    paths: dict[str, Any] = {
        "/info": {
            "get": {
                "operationId": "info",
                "summary": "What the server offers: its model, tools, MCP servers and limits",
                "responses": {**_ok(200, "the server", InfoOut), **_errors()},
            }
        },
        "/sessions": {
            "get": {
                "operationId": "listSessions",
                "summary": "The caller's sessions, most recently active first",
                "responses": {**_ok(200, "the sessions", SessionList), **_errors()},
            },
            "post": {
                "operationId": "createSession",
                "summary": "Create a session from agent settings or an agent document",
                "requestBody": _json_body(CreateSession),
                "responses": {
                    **_ok(201, "the new session", SessionOut),
                    **_errors("invalid_request", "payload_too_large", "unavailable"),
                },
            },
        },
        "/sessions/{session_id}": {
            "parameters": on_session,
            "get": {
                "operationId": "getSession",
                "summary": "The session: its transcript, usage, status and pending approvals",
                "responses": {
                    **_ok(200, "the session", SessionDetail),
                    **_errors("not_found", "unavailable"),
                },
            },
            "delete": {
                "operationId": "deleteSession",
                "summary": "Delete the session with its transcript and record",
                "responses": {**_ok(204, "deleted"), **_errors("not_found", "run_in_progress")},
            },
        },
        "/sessions/{session_id}/export": {
            "parameters": on_session,
            "get": {
                "operationId": "exportSession",
                "summary": "The whole session as JSONL: a header, its messages, its events",
                "responses": {
                    "200": {
                        "description": "JSONL",
                        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                    },
                    **_errors("not_found"),
                },
            },
        },
        "/sessions/{session_id}/messages": {
            "parameters": on_session,
            "post": {
                "operationId": "postMessage",
                "summary": "Run the agent on a new user message",
                "description": "With `Accept: text/event-stream` every event of the run streams as SSE "
                "(`id:` is the event's seq in the session's record; live deltas come as `event: delta` "
                "without an id). Otherwise the answer comes back as JSON when the run ends. A second "
                "message while a run is going gets 409 `run_in_progress`: steer, follow up, or abort.",
                "requestBody": _json_body(PostMessage),
                "responses": {
                    "200": {
                        "description": "the run's end (JSON) or its events (SSE)",
                        "content": {"application/json": {"schema": _ref(RunOut)}, **_SSE},
                    },
                    **_errors(
                        "invalid_request",
                        "not_found",
                        "run_in_progress",
                        "payload_too_large",
                        "too_many_runs",
                        "unavailable",
                    ),
                },
            },
        },
        "/sessions/{session_id}/events": {
            "parameters": on_session,
            "get": {
                "operationId": "sessionEvents",
                "summary": "Replay the session's event record after a seq, then follow it live",
                "description": "Each recorded event once, in seq order, with no gap between the replay "
                "and the live feed. `follow=run` (default) ends at the end of the run going when it "
                "attached (at once when none was); `follow=session` stays until the client leaves.",
                "parameters": [
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
                "responses": {
                    "200": {"description": "the events as SSE", "content": _SSE},
                    **_errors("invalid_request", "not_found"),
                },
            },
        },
        "/sessions/{session_id}/steer": {
            "parameters": on_session,
            "post": {
                "operationId": "steer",
                "summary": "Queue a message the running model reads after its current step",
                "requestBody": _json_body(QueueMessage),
                "responses": {
                    **_ok(202, "queued", QueuedOut),
                    **_errors(
                        "invalid_request",
                        "not_found",
                        "no_run_in_progress",
                        "payload_too_large",
                        "unavailable",
                    ),
                },
            },
        },
        "/sessions/{session_id}/follow_up": {
            "parameters": on_session,
            "post": {
                "operationId": "followUp",
                "summary": "Queue a message for when the running model would otherwise stop",
                "requestBody": _json_body(QueueMessage),
                "responses": {
                    **_ok(202, "queued", QueuedOut),
                    **_errors(
                        "invalid_request",
                        "not_found",
                        "no_run_in_progress",
                        "payload_too_large",
                        "unavailable",
                    ),
                },
            },
        },
        "/sessions/{session_id}/abort": {
            "parameters": on_session,
            "post": {
                "operationId": "abort",
                "summary": "Stop the running run",
                "responses": {
                    **_ok(202, "stopping"),
                    **_errors("not_found", "no_run_in_progress", "unavailable"),
                },
            },
        },
        "/sessions/{session_id}/tree": {
            "parameters": on_session,
            "get": {
                "operationId": "sessionTree",
                "summary": "Every entry of the session's tree, with its parent, and the entry it continues from",
                "responses": {**_ok(200, "the tree", TreeOut), **_errors("not_found")},
            },
        },
        "/sessions/{session_id}/branch": {
            "parameters": on_session,
            "post": {
                "operationId": "branch",
                "summary": "Continue the session from an entry of its tree",
                "description": "The branch left behind stays in the tree. With `summarise` (the default) "
                "it is summarised by the session's model into an entry under the target, listing the files "
                "it read and changed, and the session continues from that entry. A summary that fails or "
                "is aborted (`POST /sessions/{id}/abort`) moves nothing: `moved` is false and `summary` "
                "says why. Refused with 409 while a run or another move is going.",
                "requestBody": _json_body(BranchIn),
                "responses": {
                    **_ok(200, "the move", BranchOut),
                    **_errors(
                        "invalid_request",
                        "not_found",
                        "run_in_progress",
                        "unknown_entry",
                        "payload_too_large",
                        "unavailable",
                    ),
                },
            },
        },
        "/sessions/{session_id}/approvals": {
            "parameters": on_session,
            "get": {
                "operationId": "pendingApprovals",
                "summary": "The gated calls waiting for a decision",
                "responses": {
                    "200": {
                        "description": "the waiting approvals",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_errors("not_found", "unavailable"),
                },
            },
        },
        "/sessions/{session_id}/approvals/{approval_id}": {
            "parameters": [
                _SESSION_ID,
                {"name": "approval_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "post": {
                "operationId": "decide",
                "summary": "Allow or deny a gated call; the decision is an event every watcher sees",
                "requestBody": _json_body(Decision),
                "responses": {
                    **_ok(200, "decided", DecisionOut),
                    **_errors(
                        "invalid_request", "not_found", "already_decided", "payload_too_large", "unavailable"
                    ),
                },
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "steadyloop", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
