"""Bearer tokens, per-token isolation, loopback-only without tokens, limits, and errors that leak nothing."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from dataclasses import replace

import pytest

from steadyloop import Endpoint, InvalidInput
from steadyloop.server import ServerLimits, ServerSettings, check_bind
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"


async def test_a_token_sees_only_its_own_sessions(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    settings = settings_for(model.base_url, tokens={ALICE: "alice", BOB: "bob"})
    async with LiveServer(settings) as server:
        async with server.client() as anonymous:
            refused = await anonymous.get("/sessions")
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
            assert refused.headers["www-authenticate"].startswith("Bearer")
        async with server.client("wrong-token-000000") as wrong:
            assert (await wrong.get("/sessions")).status_code == 401
        async with server.client(ALICE) as alice, server.client(BOB) as bob:
            sid = (await alice.post("/sessions", json={"title": "mine"})).json()["id"]
            assert [s["id"] for s in (await alice.get("/sessions")).json()["sessions"]] == [sid]
            assert (await bob.get("/sessions")).json()["sessions"] == []
            for method, path in [
                ("GET", f"/sessions/{sid}"),
                ("GET", f"/sessions/{sid}/export"),
                ("GET", f"/sessions/{sid}/events"),
                ("DELETE", f"/sessions/{sid}"),
                ("POST", f"/sessions/{sid}/abort"),
                ("GET", f"/sessions/{sid}/tree"),
            ]:
                response = await bob.request(method, path)
                assert response.status_code == 404, (method, path, response.text)
                assert response.json()["error"]["code"] == "not_found"
            posted = await bob.post(f"/sessions/{sid}/messages", json={"text": "hi"})
            assert posted.status_code == 404
            moved = await bob.post(f"/sessions/{sid}/branch", json={"entry_id": None})
            assert moved.status_code == 404 and moved.json()["error"]["code"] == "not_found"
            assert model.chat_requests == []
            assert (await alice.get(f"/sessions/{sid}")).status_code == 200


def test_without_a_token_the_server_binds_loopback_only() -> None:
    settings = ServerSettings(endpoint=Endpoint("http://127.0.0.1:1/v1"), model="m")
    for host in ("127.0.0.1", "::1", "localhost"):
        check_bind(host, settings)
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.com"):
        with pytest.raises(InvalidInput, match="without a bearer token"):
            check_bind(host, settings)
    check_bind("0.0.0.0", ServerSettings(endpoint=Endpoint("http://127.0.0.1:1/v1"), tokens={ALICE: "a"}))


async def test_limits_on_body_images_schema_and_runs_per_token(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(Reply.stream(stream_of("slow"), stall_after=1, stall_seconds=None))
    limits = ServerLimits(max_body_bytes=64 * 1024, max_images=2, max_schema_bytes=200, max_runs_per_token=1)
    async with LiveServer(settings_for(model.base_url, limits=limits)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        other = (await http.post("/sessions", json={})).json()["id"]
        big = await http.post(f"/sessions/{sid}/messages", json={"text": "x" * 70_000})
        assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"
        png = base64.b64encode(b"\x89PNG....").decode()
        images = await http.post(
            f"/sessions/{sid}/messages",
            json={"text": "x", "images": [{"data": png, "mime_type": "image/png"}] * 3},
        )
        assert images.status_code == 413 and "at most 2 images" in images.json()["error"]["message"]
        wrong = await http.post(
            f"/sessions/{sid}/messages",
            json={"text": "x", "images": [{"data": "!!!", "mime_type": "image/png"}]},
        )
        assert wrong.status_code == 400
        schema = {"type": "object", "description": "d" * 300}
        refused = await http.post(
            f"/sessions/{sid}/messages", json={"text": "x", "output_schema": {"schema": schema}}
        )
        assert refused.status_code == 413 and "schema" in refused.json()["error"]["message"]
        running = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "go"}))
        await model.wait_for_requests(1)
        second = await http.post(f"/sessions/{other}/messages", json={"text": "too"})
        assert second.status_code == 429 and second.json()["error"]["code"] == "too_many_runs"
        assert (await http.post(f"/sessions/{sid}/abort")).status_code == 202
        assert (await running).status_code == 200
        assert model.chat_requests and len(model.chat_requests) == 1


async def test_every_error_is_a_typed_json_body_without_credentials_or_paths(
    settings_for: Callable[..., ServerSettings],
) -> None:
    secret = "sk-live-secret-key-1234567890"
    settings = settings_for("http://127.0.0.1:9/v1", tokens={ALICE: "alice"})
    settings = replace(settings, endpoint=Endpoint("http://127.0.0.1:9/v1", api_key=secret))
    async with LiveServer(settings) as server, server.client(ALICE) as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        cases = [
            await http.get("/nowhere"),
            await http.put("/sessions"),
            await http.post("/sessions", content=b"{not json", headers={"Content-Type": "application/json"}),
            await http.post("/sessions", json={"unknown": 1}),
            await http.post("/sessions", json=[1, 2]),
            await http.get(f"/sessions/{'x' * 100}"),
            await http.get(f"/sessions/{sid}/events?after=-3"),
            await http.post(f"/sessions/{sid}/approvals/a1", json={"decision": "maybe"}),
        ]
        for response in cases:
            body = response.json()
            assert 400 <= response.status_code < 500, response.text
            assert set(body) == {"error"} and isinstance(body["error"]["code"], str), body
            assert secret not in response.text and ALICE not in response.text
        run = await http.post(f"/sessions/{sid}/messages", json={"text": "hi"})
        assert run.status_code == 200
        text = run.text
        assert run.json()["outcome"] == "error"
        assert secret not in text and "/work/" not in text and "/home/" not in text
