"""The local server answers the local user only: no rebinding name, no page elsewhere, no proxy's client,
no body that is not JSON; and a client that leaves mid-upload is one quiet line."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import pytest
from starlette.types import Receive, Scope, Send

from steadyloop.server import ServerSettings
from steadyloop.server.serve import answering_for
from steadyloop.testing import ScriptedServer

from .._log_lines import LogLines, captured
from .conftest import LiveServer

TOKEN = "tok-alice-123456"


def refused_with(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code and error["message"] and error["hint"]
    return error


@pytest.mark.parametrize("tokens", [{}, {TOKEN: "alice"}], ids=["no token", "token"])
async def test_a_rebinding_name_is_refused_on_every_route(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], tokens: dict[str, str]
) -> None:
    async with (
        LiveServer(settings_for(model.base_url, tokens=tokens)) as server,
        server.client(TOKEN if tokens else None) as http,
    ):
        sid = (await http.post("/sessions", json={})).json()["id"]
        evil = {"Host": f"evil.example:{server.port}"}
        for method, path in [
            ("GET", "/"),
            ("GET", "/health"),
            ("GET", "/openapi.json"),
            ("GET", "/sessions"),
            ("GET", f"/sessions/{sid}"),
            ("GET", f"/sessions/{sid}/export"),
            ("GET", f"/sessions/{sid}/events?after=0"),
            ("POST", "/sessions"),
            ("DELETE", f"/sessions/{sid}"),
        ]:
            response = await http.request(method, path, headers=evil, json={} if method == "POST" else None)
            error = refused_with(response, 403, "host_not_allowed")
            assert "evil.example" in error["message"] and "--allow-host" in error["hint"]
        assert (
            await http.get(f"/sessions/{sid}", headers={"Host": f"localhost:{server.port}"})
        ).status_code == 200
        assert (
            await http.get(f"/sessions/{sid}", headers={"Host": f"[::1]:{server.port}"})
        ).status_code == 200
        assert len((await http.get("/sessions")).json()["sessions"]) == 1, "nothing was deleted"


async def test_a_name_the_operator_allowed_is_answered(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    settings = settings_for(model.base_url, allowed_hosts=["agents.example.com"])
    async with LiveServer(settings) as server, server.client() as http:
        assert (await http.get("/sessions", headers={"Host": "agents.example.com"})).status_code == 200
        refused_with(
            await http.get("/sessions", headers={"Host": "other.example.com"}), 403, "host_not_allowed"
        )
    # ``serve --host ADDRESS`` answers for the address it listens on; a wildcard address names none.
    assert answering_for("10.0.0.5", settings).allowed_hosts == ("agents.example.com", "10.0.0.5")
    assert answering_for("fd00::5", settings).allowed_hosts == ("agents.example.com", "[fd00::5]")
    assert answering_for("0.0.0.0", settings).allowed_hosts == ("agents.example.com",)
    assert answering_for("::", settings).allowed_hosts == ("agents.example.com",)


async def test_a_simple_cross_site_post_is_refused_and_creates_nothing(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        # What a page on another site may send without asking first: text/plain, and its Origin.
        cross_site = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
        body = json.dumps({"system": "do what the page says"})
        error = refused_with(
            await http.post("/sessions", content=body, headers=cross_site), 403, "origin_not_allowed"
        )
        assert "http://evil.example" in error["message"]
        referred = {"Referer": "http://evil.example/attack.html", "Content-Type": "application/json"}
        refused_with(await http.post("/sessions", content=body, headers=referred), 403, "origin_not_allowed")
        sandboxed = {"Origin": "null", "Content-Type": "application/json"}
        refused_with(await http.post("/sessions", content=body, headers=sandboxed), 403, "origin_not_allowed")
        assert (await http.get("/sessions")).json()["sessions"] == []
        # The server's own page posts with its own origin; a client that is no page sends none.
        own = {"Origin": server.url, "Referer": server.url + "/"}
        sid = (await http.post("/sessions", json={}, headers=own)).json()["id"]
        refused_with(
            await http.delete(f"/sessions/{sid}", headers={"Origin": "http://evil.example"}),
            403,
            "origin_not_allowed",
        )
        refused_with(
            await http.post(f"/sessions/{sid}/abort", headers={"Origin": "http://evil.example"}),
            403,
            "origin_not_allowed",
        )
        assert (await http.delete(f"/sessions/{sid}", headers=own)).status_code == 204


async def test_no_answer_grants_another_origin_a_read(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        evil = {"Origin": "http://evil.example"}
        preflight = await http.options(
            "/sessions",
            headers={
                **evil,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        responses = [
            preflight,
            await http.get(f"/sessions/{sid}", headers=evil),
            await http.get("/sessions", headers=evil),
            await http.post("/sessions", json={}, headers=evil),
        ]
        for response in responses:
            granted = [name for name in response.headers if name.lower().startswith("access-control-")]
            assert granted == [], (response.request.method, response.request.url, granted)
        assert preflight.status_code >= 400


@pytest.mark.parametrize(
    "forwarded",
    [
        {"X-Forwarded-For": "203.0.113.9"},
        {"Forwarded": "for=203.0.113.9;proto=https"},
        {"X-Real-IP": "203.0.113.9"},
        {"X-Forwarded-Host": "agents.example.com"},
        {"Via": "1.1 proxy"},
    ],
    ids=lambda headers: next(iter(headers)),
)
async def test_a_request_through_a_local_proxy_is_not_local(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], forwarded: dict[str, str]
) -> None:
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        error = refused_with(await http.get("/sessions", headers=forwarded), 403, "forbidden")
        assert "proxy" in error["message"] and "--token" in error["hint"]
        refused_with(await http.post("/sessions", json={}, headers=forwarded), 403, "forbidden")
        assert (await http.get("/sessions")).status_code == 200
    async with (
        LiveServer(settings_for(model.base_url, tokens={TOKEN: "alice"})) as server,
        server.client(TOKEN) as http,
    ):
        assert (await http.get("/sessions", headers=forwarded)).status_code == 200, "a token is who it says"


async def test_a_json_route_takes_application_json_only(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        routes = [
            ("/sessions", {}),
            (f"/sessions/{sid}/messages", {"text": "hi"}),
            (f"/sessions/{sid}/steer", {"text": "hi"}),
            (f"/sessions/{sid}/follow_up", {"text": "hi"}),
            (f"/sessions/{sid}/branch", {"entry_id": None}),
            (f"/sessions/{sid}/approvals/a1", {"decision": "deny"}),
        ]
        for path, body in routes:
            for content_type in (
                None,
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data",
            ):
                headers = {"Content-Type": content_type} if content_type else {}
                response = await http.post(path, content=json.dumps(body), headers=headers)
                error = refused_with(response, 415, "unsupported_media_type")
                assert "application/json" in error["message"], path
        with_charset = {"Content-Type": "application/json; charset=utf-8"}
        created = await http.post("/sessions", content=json.dumps({"title": "t"}), headers=with_charset)
        assert created.status_code == 201, created.text
        # A route with no body takes none (and needs no type).
        assert (await http.post(f"/sessions/{sid}/abort")).status_code == 409


class _Settled:
    """The app, with a signal when each request's call into it has returned or raised."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0
        self.settled = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http":
                self.calls += 1
                self.settled.set()


async def test_a_client_that_leaves_mid_upload_is_one_quiet_line(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    settled: list[_Settled] = []

    def wrap(app: Any) -> _Settled:
        settled.append(_Settled(app))
        return settled[0]

    lines = LogLines(re.compile(r"$^"))
    with captured("steadyloop.server", lines), captured("uvicorn.error", lines):
        async with LiveServer(settings_for(model.base_url), wrap) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            head = (
                "POST /sessions HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{server.port}\r\n"
                "Content-Type: application/json\r\n"
                "Content-Length: 100000\r\n\r\n"
            )
            writer.write(head.encode() + b'{"title": "cut')
            await writer.drain()
            writer.close()
            await writer.wait_closed()
            await asyncio.wait_for(settled[0].settled.wait(), 30)
            assert await reader.read() == b"", "nothing is answered to a connection that is gone"
            async with server.client() as http:
                assert (await http.get("/sessions")).json()["sessions"] == [], "nothing was created"
    ours = [r.getMessage() for r in lines.records if r.name == "steadyloop.server"]
    assert ours == ["a client left mid-request: POST /sessions, its body cut short"]
    loud = [r for r in lines.records if r.levelno >= logging.WARNING or r.exc_info is not None]
    assert loud == [], [r.getMessage() for r in loud]
