"""context_limit_for and list_models against real HTTP servers on loopback, shaped like the real ones."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from steadyloop.errors import EndpointRefused, EndpointUnavailable
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.openai_chat import models as windows
from steadyloop.wire.transport.clients import configure_clients, get_client
from steadyloop.wire.windows import ModelInfo, context_limit_for, list_models, reset_windows

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
QWEN = "qwen2.5-coder-0.5b-instruct"


def _capture_body(name: str) -> bytes:
    return (CAPTURES / name).read_bytes().split(b"\r\n\r\n", 1)[1]


@dataclass
class Answer:
    status: int = 200
    body: bytes | str | Any = b""
    content_type: str = "application/json"
    hang: asyncio.Event | None = None

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


def js(body: Any, status: int = 200) -> Answer:
    return Answer(status=status, body=body)


NOT_FOUND = Answer(status=404, body=b"404 page not found", content_type="text/plain")


class _Uvicorn(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # A test server must not take Ctrl-C away from pytest.
        yield


@dataclass
class Loopback:
    """A tiny server on 127.0.0.1 that answers GETs from ``routes`` (404 otherwise) and records paths."""

    routes: dict[str, Answer] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    port: int = 0

    def endpoint(self, prefix: str = "/v1", **options: Any) -> Endpoint:
        return Endpoint(base_url=f"http://127.0.0.1:{self.port}{prefix}", **options)

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        self.hits.append(path)
        answer = self.routes.get(path, NOT_FOUND)
        if answer.hang is not None:
            await answer.hang.wait()
        return Response(answer.encoded(), status_code=answer.status, media_type=answer.content_type)


@contextlib.asynccontextmanager
async def serve(server: Loopback) -> AsyncIterator[Loopback]:
    app = Starlette(routes=[Route("/{path:path}", server.handle, methods=["GET"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", server.port))
    # Listening before uvicorn starts means a request made now waits in the backlog: no startup race.
    sock.listen(64)
    server.port = sock.getsockname()[1]
    runner = _Uvicorn(uvicorn.Config(app, lifespan="off", log_config=None, access_log=False))
    task = asyncio.create_task(runner.serve(sockets=[sock]))
    try:
        yield server
    finally:
        for answer in server.routes.values():
            if answer.hang is not None:
                answer.hang.set()
        runner.should_exit = True
        await task
        sock.close()


@pytest.fixture(autouse=True)
def _fresh_windows() -> Iterator[None]:
    reset_windows()
    yield
    reset_windows()


@pytest.fixture
async def server() -> AsyncIterator[Loopback]:
    async with serve(Loopback()) as running:
        yield running
        # Close this loop's pooled clients while their loop is still here to close them on.
        for endpoint in (running.endpoint(), running.endpoint("/api/v1")):
            await get_client(endpoint).close()


def llamacpp(server: Loopback) -> None:
    server.routes["/props"] = Answer(body=_capture_body("props.response.txt"))
    server.routes["/v1/models"] = Answer(body=_capture_body("v1_models.response.txt"))


async def test_llamacpp_props_gives_the_served_window_not_the_trained_one(server: Loopback) -> None:
    llamacpp(server)
    assert await context_limit_for(server.endpoint(), QWEN) == 4096
    assert server.hits == ["/props"]


async def test_single_model_llamacpp_answers_for_any_name(server: Loopback) -> None:
    llamacpp(server)
    assert await context_limit_for(server.endpoint(), "whatever-the-config-says") == 4096
    del server.routes["/props"]
    reset_windows()
    assert await context_limit_for(server.endpoint(), "whatever-the-config-says") == 4096


async def test_llamacpp_listing_prefers_served_n_ctx_and_falls_back_to_trained(server: Loopback) -> None:
    listing = json.loads(_capture_body("v1_models.response.txt"))
    server.routes["/v1/models"] = js(listing)
    assert await context_limit_for(server.endpoint(), QWEN) == 4096
    del listing["data"][0]["meta"]["n_ctx"]
    server.routes["/v1/models"] = js(listing)
    reset_windows()
    assert await context_limit_for(server.endpoint(), QWEN) == 32768


async def test_a_loading_llamacpp_is_not_latched(server: Loopback) -> None:
    loading = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
    server.routes["/props"] = js(loading, 503)
    server.routes["/api/v0/models"] = js(loading, 503)
    server.routes["/v1/models"] = js(loading, 503)
    assert await context_limit_for(server.endpoint(), QWEN) is None
    llamacpp(server)
    server.hits.clear()
    assert await context_limit_for(server.endpoint(), QWEN) == 4096
    assert server.hits == ["/props"]


async def test_lmstudio_loaded_window_then_max(server: Loopback) -> None:
    # LM Studio answers a route it does not have with 200 and an error object.
    server.routes["/props"] = js({"error": "Unexpected endpoint or method. (GET /props)"})
    server.routes["/api/v0/models"] = js(
        {
            "object": "list",
            "data": [
                {
                    "id": "qwen2.5-7b-instruct",
                    "object": "model",
                    "type": "llm",
                    "publisher": "lmstudio-community",
                    "arch": "qwen2",
                    "state": "loaded",
                    "loaded_context_length": 8192,
                    "max_context_length": 32768,
                },
                {"id": "gemma-3-4b", "type": "vlm", "state": "not-loaded", "max_context_length": 131072},
            ],
        }
    )
    endpoint = server.endpoint()
    assert await context_limit_for(endpoint, "qwen2.5-7b-instruct") == 8192
    assert server.hits == ["/props", "/api/v0/models"]
    server.hits.clear()
    assert await context_limit_for(endpoint, "gemma-3-4b") == 131072
    assert server.hits == ["/api/v0/models"]  # /props was latched


async def test_vllm_max_model_len_and_the_listing_is_cached(server: Loopback) -> None:
    server.routes["/props"] = js({"detail": "Not Found"}, 404)
    server.routes["/v1/models"] = js(
        {
            "object": "list",
            "data": [
                {
                    "id": "Qwen/Qwen3-8B",
                    "object": "model",
                    "owned_by": "vllm",
                    "root": "Qwen/Qwen3-8B",
                    "max_model_len": 16384,
                }
            ],
        }
    )
    endpoint = server.endpoint()
    assert await context_limit_for(endpoint, "Qwen/Qwen3-8B") == 16384
    assert server.hits == ["/props", "/api/v0/models", "/v1/models"]
    server.hits.clear()
    assert await context_limit_for(endpoint, "Qwen/Qwen3-8B") == 16384
    assert server.hits == []


async def test_openrouter_context_length_under_a_prefixed_base_url(server: Loopback) -> None:
    server.routes["/api/props"] = Answer(body="<!DOCTYPE html><html></html>", content_type="text/html")
    server.routes["/api/v1/models"] = js(
        {
            "data": [
                {
                    "id": "meta-llama/llama-3.3-70b-instruct",
                    "context_length": 131072,
                    "top_provider": {"context_length": 65536, "max_completion_tokens": 16384},
                },
                {"id": "some/model", "top_provider": {"context_length": 32768}},
            ]
        }
    )
    endpoint = server.endpoint("/api/v1")
    assert await context_limit_for(endpoint, "meta-llama/llama-3.3-70b-instruct") == 131072
    assert await context_limit_for(endpoint, "some/model") == 32768
    assert server.hits == ["/api/props", "/api/api/v0/models", "/api/v1/models"]


async def test_aliases_match(server: Loopback) -> None:
    server.routes["/v1/models"] = js(
        {
            "data": [
                {"id": "a", "aliases": ["fast"], "context_length": 100},
                {"id": "b", "context_length": 200},
            ]
        }
    )
    assert await context_limit_for(server.endpoint(), "fast") == 100
    assert await context_limit_for(server.endpoint(), "b") == 200


async def test_a_server_with_no_routes_is_latched_and_not_asked_again(server: Loopback) -> None:
    server.routes["/v1/models"] = js({"object": "list", "data": [{"id": "llama3.2", "owned_by": "library"}]})
    endpoint = server.endpoint()
    assert await context_limit_for(endpoint, "llama3.2") is None
    assert server.hits == ["/props", "/api/v0/models", "/v1/models"]
    server.hits.clear()
    assert await context_limit_for(endpoint, "llama3.2") is None
    assert server.hits == []  # served routes latched, listing cached and naming no window


async def test_the_operator_value_wins_without_a_request(server: Loopback) -> None:
    llamacpp(server)
    assert await context_limit_for(server.endpoint(), QWEN, 2048) == 2048
    assert server.hits == []
    # Zero or nothing means "not set".
    assert await context_limit_for(server.endpoint(), QWEN, 0) == 4096


async def test_a_missing_model_is_remembered_for_the_miss_window(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(windows, "_clock", lambda: now[0])
    server.routes["/v1/models"] = js({"data": [{"id": "other", "context_length": 100}]})
    endpoint = server.endpoint()
    assert await context_limit_for(endpoint, "typo") is None
    server.hits.clear()
    now[0] += 29.0
    assert await context_limit_for(endpoint, "typo") is None
    assert server.hits == []
    # Another model the cached listing names is answered from the cache meanwhile.
    assert await context_limit_for(endpoint, "other") == 100
    assert server.hits == []
    # Half a minute on, the listing is asked again and picks up a model pulled in the meantime.
    server.routes["/v1/models"] = js({"data": [{"id": "typo", "context_length": 300}]})
    now[0] += 2.0
    assert await context_limit_for(endpoint, "typo") == 300
    assert server.hits == ["/v1/models"]


async def test_the_miss_window_follows_configure_clients(
    server: Loopback, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(windows, "_clock", lambda: now[0])
    configure_clients(listing_miss_s=2)
    server.routes["/v1/models"] = js({"data": []})
    endpoint = server.endpoint()
    assert await context_limit_for(endpoint, "m") is None
    server.hits.clear()
    now[0] += 1.0
    assert await context_limit_for(endpoint, "m") is None
    assert server.hits == []
    now[0] += 1.5
    assert await context_limit_for(endpoint, "m") is None
    assert server.hits == ["/v1/models"]


async def test_a_server_that_is_down_is_not_latched() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", request_timeout=5)
    assert await context_limit_for(endpoint, QWEN) is None
    # The same server, started afterwards, is asked for its window.
    late = Loopback(port=port)
    llamacpp(late)
    async with serve(late):
        assert await context_limit_for(endpoint, QWEN) == 4096
        assert late.hits == ["/props"]
        await get_client(endpoint).close()


async def test_a_silent_server_is_bounded_by_the_request_timeout(server: Loopback) -> None:
    server.routes["/props"] = Answer(hang=asyncio.Event())
    server.routes["/api/v0/models"] = Answer(hang=asyncio.Event())
    server.routes["/v1/models"] = Answer(hang=asyncio.Event())
    endpoint = server.endpoint(request_timeout=0.2)
    async with asyncio.timeout(5):
        assert await context_limit_for(endpoint, QWEN) is None
    await get_client(endpoint).close()


async def test_reset_windows_forgets_latches(server: Loopback) -> None:
    endpoint = server.endpoint()
    assert await context_limit_for(endpoint, QWEN) is None
    llamacpp(server)
    assert await context_limit_for(endpoint, QWEN) is None  # /props latched, listing miss remembered
    reset_windows()
    assert await context_limit_for(endpoint, QWEN) == 4096


async def test_list_models(server: Loopback) -> None:
    llamacpp(server)
    models = await list_models(server.endpoint())
    assert models == [ModelInfo(id=QWEN, context_length=4096, owned_by="llamacpp", aliases=(QWEN,))]
    # The listing fetched here serves context_limit_for too.
    del server.routes["/props"]
    server.hits.clear()
    assert await context_limit_for(server.endpoint(), QWEN) == 4096
    assert "/v1/models" not in server.hits


async def test_list_models_errors(server: Loopback) -> None:
    with pytest.raises(EndpointRefused) as refused:
        await list_models(server.endpoint())
    assert refused.value.status == 404
    server.routes["/v1/models"] = Answer(body="<html></html>", content_type="text/html")
    with pytest.raises(EndpointRefused):
        await list_models(server.endpoint())
    server.routes["/v1/models"] = js({"error": "busy"}, 503)
    with pytest.raises(EndpointUnavailable):
        await list_models(server.endpoint())


async def test_list_models_when_down() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", request_timeout=5)
    with pytest.raises(EndpointUnavailable):
        await list_models(endpoint)
    await get_client(endpoint).close()
