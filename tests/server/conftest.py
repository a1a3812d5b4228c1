"""A live server on loopback over the scripted model server, and an SSE reader for its streams."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import uvicorn

from steadyloop import Endpoint, Tool
from steadyloop.server import ServerSettings, create_app
from steadyloop.testing import ScriptedServer


@dataclass
class Sse:
    """One server-sent event as a client sees it."""

    id: int | None
    event: str
    data: dict[str, Any]


async def read_sse(response: httpx.Response) -> AsyncIterator[Sse]:
    event_id: int | None = None
    name = "message"
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield Sse(event_id, name, json.loads("\n".join(data)))
            event_id, name, data = None, "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = int(value)
            elif field == "event":
                name = value
            elif field == "data":
                data.append(value)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def until_started(process: asyncio.subprocess.Process) -> None:
    """Read a ``steadyloop serve`` child's log until its app has started; its log so far if it never does."""
    assert process.stderr is not None
    seen: list[str] = []
    while line := (await asyncio.wait_for(process.stderr.readline(), 120)).decode():
        seen.append(line)
        if "Application startup complete" in line:
            return
    raise AssertionError("the server did not start:\n" + "".join(seen))


class LiveServer:
    """The app served by uvicorn on a loopback port, for as long as the context lasts."""

    def __init__(self, settings: ServerSettings, wrap: Callable[[Any], Any] | None = None) -> None:
        self.settings = settings
        self.port = free_port()
        self.app = create_app(settings)
        served = self.app if wrap is None else wrap(self.app)  # ``wrap``: ASGI middleware of the test's own
        config = uvicorn.Config(served, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> LiveServer:
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._server.server_state.connections:
            self._server.force_exit = True
        assert self._task is not None
        await self._task

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, **{"timeout": 30, **kwargs})


Serve = Callable[..., Awaitable[LiveServer]]


@pytest.fixture
def settings_for(tmp_path: Path) -> Callable[..., ServerSettings]:
    def make(model_url: str, *, tools: list[Tool] | None = None, **kwargs: Any) -> ServerSettings:
        return ServerSettings(
            endpoint=Endpoint(model_url),
            model=kwargs.pop("model", "scripted"),
            store_path=kwargs.pop("store_path", tmp_path / "sessions.db"),
            tools=tools or [],
            **kwargs,
        )

    return make


@pytest.fixture
async def model() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


async def wait_for_event(http: httpx.AsyncClient, session_id: str, kind: str) -> Sse:
    """The first event of this type in the session's record, waiting on the live feed until it comes."""
    async with http.stream("GET", f"/sessions/{session_id}/events?after=0&follow=session") as response:
        async for event in read_sse(response):
            if event.event == kind:
                return event
    raise AssertionError(f"the stream ended before a {kind} event")


@pytest.fixture
async def live(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A server in this process on the scripted model, and a session made on it."""
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        yield http, sid


def assert_typed_refusal(response: httpx.Response) -> None:
    """An answer, or a refusal with the server's one error shape: never a 5xx."""
    assert response.status_code < 500, response.text[:500]
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"} and isinstance(body["error"]["code"], str), body
