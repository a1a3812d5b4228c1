"""The OpenAPI document, checked against the live server by a property-based run (schemathesis).

Every operation gets generated requests: no input the schema allows gives a 500, every answer has a status
and a body the document names, and every error is the typed JSON body.
"""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from steadyloop import Endpoint
from steadyloop.server import ServerLimits, ServerSettings, create_app
from steadyloop.server.openapi import openapi_document
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import free_port

TOKEN = "openapi-test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store: Path = tmp_path_factory.mktemp("openapi") / "sessions.db"
    with ScriptedServer(default_reply=Reply.stream(stream_of("ok"))) as model:
        app = create_app(
            ServerSettings(
                endpoint=Endpoint(model.base_url),
                model="scripted",
                store_path=store,
                tokens={TOKEN: "tester"},
                limits=ServerLimits(max_body_bytes=256 * 1024),
            )
        )
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(30)


# The document the server serves is built without I/O, so the cases are generated from it at collection;
# the last test checks the live server serves exactly this one.
schema = schemathesis.openapi.from_dict(openapi_document())


def a_real_session(live_url: str) -> str:
    response = httpx.post(f"{live_url}/sessions", json={"title": "generated"}, headers=AUTH)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_the_schema_allows_gives_a_500_and_every_answer_is_documented(
    case: Any, live_url: str
) -> None:
    generated = case.path_parameters or {}
    if "session_id" in generated and zlib.crc32(str(generated["session_id"]).encode()) % 2 == 0:
        generated["session_id"] = a_real_session(live_url)  # half the cases reach a session that exists
    case.call_and_validate(
        base_url=live_url,
        headers=AUTH,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
        timeout=60,
    )


def test_the_document_is_served_and_names_every_route(live_url: str) -> None:
    document = httpx.get(f"{live_url}/openapi.json").json()
    assert document == openapi_document()
    assert document["openapi"].startswith("3.1")
    assert {"/sessions", "/sessions/{session_id}/messages", "/sessions/{session_id}/events"} <= set(
        document["paths"]
    )
    assert "CreateSession" in document["components"]["schemas"]


def test_a_request_that_is_not_valid_http_gets_the_documented_plain_400(live_url: str) -> None:
    # A Content-Length that is not a number is refused by the HTTP layer before any route reads the request.
    host, port = live_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(
            b"DELETE /sessions/abc HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Length: r}H!T08\r\n\r\n"
        )
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    head = answer.split(b"\r\n", 1)[0]
    assert head.startswith(b"HTTP/1.1 400"), answer
    assert b"text/plain" in answer.lower()
    for path in openapi_document()["paths"].values():
        for operation in path.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue  # a path's shared parameters
            assert "text/plain" in operation["responses"]["400"]["content"]
