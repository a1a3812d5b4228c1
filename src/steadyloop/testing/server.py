"""A scripted HTTP server on loopback, for testing code that talks to LLM endpoints.

It listens on a real socket (127.0.0.1, a free port) and answers each model call (``POST
/v1/chat/completions``, Anthropic's ``POST /v1/messages``, Gemini's ``POST
/v1beta/models/{model}:streamGenerateContent``) with the next scripted reply (see ``replies``, and
``provider_streams`` for the other wires' framing), so a client's HTTP stack, SSE parsing, timeouts and
retries all run for real. It also answers ``GET /v1/models``, ``/props`` and ``/health``, and records every request::

    async with ScriptedServer(Reply.stream(text_chunks("Hello!"))) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        ...
        assert server.requests[0].json["stream"] is True

Use ``with ScriptedServer.in_thread() as server:`` from sync code: the server then runs its own event loop in
a thread. From a shell, ``python -m steadyloop.testing.server --script replies.json`` prints the base URL on
its first line and serves until killed.

The app is plain ASGI rather than Starlette routes because faults need the raw send channel: dropping a
connection mid-body and stalling before the headers are exactly what response classes are built to prevent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Self

from ._playback import HOST, Loopback, Receive, Scope, Send, play, read_body
from .replies import BodyReply, Reply, ScriptedReply, StallReply, StreamReply, reply_from_json

__all__ = ["RecordedRequest", "ScriptedServer", "main"]

_CHAT_PATH = "/v1/chat/completions"
# The other wires' model calls, answered from the same script: Anthropic Messages, Gemini's streamed call.
_ANTHROPIC_PATH = "/v1/messages"
_GEMINI_STREAM = ":streamGenerateContent"
_GEMINI_MODELS = "/v1beta/models/"
# Vertex AI's publisher path (``/v1beta1/projects/P/locations/L/publishers/google/models/...``).
_VERTEX_MODELS = re.compile(
    r"/v\d+(?:alpha|beta)?\d*/projects/[^/]+/locations/[^/]+/publishers/[^/]+/models/"
)


def _is_model_call(path: str) -> bool:
    return path in (_CHAT_PATH, _ANTHROPIC_PATH) or (
        (path.startswith(_GEMINI_MODELS) or _VERTEX_MODELS.match(path) is not None)
        and path.endswith(_GEMINI_STREAM)
    )


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received.

    Attributes:
        method: ``"POST"``, ``"GET"``, ...
        path: the path without the query string.
        query: the raw query string.
        headers: (name, value) pairs, names lower-cased, in the order received.
        body: the body bytes.
        json: the body parsed as JSON; None when empty or not JSON.
    """

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    json: Any

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


Models = Sequence[str | Mapping[str, Any]] | ScriptedReply | None
Responder = Callable[["RecordedRequest"], "ScriptedReply | None"]
Document = Mapping[str, Any] | ScriptedReply | None

_MODELS: Models = ("scripted",)
_HEALTH_OK: Document = MappingProxyType({"status": "ok"})


class ScriptedServer:
    """A scripted OpenAI-compatible server on 127.0.0.1; see the module docstring.

    Run it with ``async with`` (served by the current event loop) or ``with`` (its own loop in a thread).

    Args:
        *replies: the initial script.
        respond: answers each chat-completions request by what it asks, before the script (e.g. a tool
            call when the last message is the user's, an answer when it is a tool result): what many
            concurrent runs need, since the order their requests arrive in is not theirs to choose. It
            returns ``None`` to play the script's next reply instead (e.g. to answer a summariser's side
            requests apart from the conversation's, whenever they come).
        port: the port to bind; 0 picks a free one (read it from ``port`` or ``base_url``).

    Attributes:
        default_reply: played when the script is empty (None: answer 500 "script ran out"), e.g. one stream
            reused by a thousand concurrent requests in a load test.
        models: served by ``GET /v1/models`` (and ``/models``): ids, or full model objects used as given;
            None answers 404; a reply (e.g. 503 "Loading model") is played instead. The same models answer
            ``GET /v1/models/{id}`` (one by its ``id``, Anthropic's shape), and Gemini's ``GET
            /v1beta/models`` and ``/v1beta/models/{model}`` (an id becomes ``{"name": "models/<id>"}``; a
            full object is matched by its ``name``).
        props: served by ``GET /props`` (llama.cpp's server properties); None answers 404.
        health: served by ``GET /health`` and ``/v1/health``; None answers 404.
        count_tokens: served by ``POST /v1/messages/count_tokens`` (Anthropic's count), e.g.
            ``{"input_tokens": 1234}``, and by Gemini's ``POST /v1beta/models/{model}:countTokens``
            (``{"totalTokens": 1234}``; Vertex AI's publisher path too); None (the default) answers 404.
            A function of the ``RecordedRequest`` answers each count by what it asks.
        requests: every request received, in order (the script's own and the metadata ones).
        disconnects: replies that ended because the client went away while the server was waiting
            (a stall, a delay): what a client that closes a stream early should cause.

    A request in absolute form (``POST http://upstream/v1/chat/completions``, what a client sends to a
    forward proxy) is answered and recorded by its path, so the server can stand in for a proxy.
    """

    def __init__(
        self,
        *replies: ScriptedReply,
        default_reply: ScriptedReply | None = None,
        models: Models = _MODELS,
        props: Document = None,
        health: Document = _HEALTH_OK,
        respond: Responder | None = None,
        port: int = 0,
    ) -> None:
        self._script: deque[ScriptedReply] = deque(replies)
        self.respond = respond
        self.default_reply = default_reply
        self.models = models
        self.props = props
        self.health = health
        self.count_tokens: Document | Callable[[RecordedRequest], Document] = None
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0
        self._chat_count = 0
        # Guards requests and waiters: thread mode records on the server thread while the test thread waits.
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._requested_port = port
        self._serving = Loopback(self, "ScriptedServer")
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def in_thread(
        cls,
        *replies: ScriptedReply,
        default_reply: ScriptedReply | None = None,
        models: Models = _MODELS,
        props: Document = None,
        health: Document = _HEALTH_OK,
        respond: Responder | None = None,
        port: int = 0,
    ) -> Self:
        """The same server, spelled for ``with``: it runs its own event loop in a daemon thread.

        For sync code, and for benchmarks that must not share the client's event loop.
        """
        return cls(
            *replies,
            default_reply=default_reply,
            models=models,
            props=props,
            health=health,
            respond=respond,
            port=port,
        )

    # -- the script

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Append replies to the script; each answers one chat-completions request, first in first out."""
        self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Replies enqueued and not yet played."""
        return len(self._script)

    async def wait_for_requests(self, count: int = 1) -> None:
        """Return once ``count`` chat-completions requests have arrived (counted from the start).

        For tests that act while a request is in flight, e.g. cancel a client that is waiting on a stall.
        Works from any event loop, so also with a server running ``in_thread``.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._chat_count >= count:
                return
            self._waiters.append((count, loop, future))
        await future

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            if not _is_model_call(request.path):
                return
            self._chat_count += 1
            ready = [waiter for waiter in self._waiters if waiter[0] <= self._chat_count]
            self._waiters = [waiter for waiter in self._waiters if waiter[0] > self._chat_count]
        for _, loop, future in ready:
            loop.call_soon_threadsafe(_resolve, future)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded model calls only: chat completions, Anthropic messages, Gemini streamed calls."""
        return [request for request in self.requests if _is_model_call(request.path)]

    @property
    def port(self) -> int:
        """The bound port; set once the server is running."""
        if self._serving.port is None:
            raise RuntimeError(
                "ScriptedServer is not running; use `async with` or `with ScriptedServer.in_thread()`"
            )
        return self._serving.port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://{HOST}:{self.port}/v1"

    def _next_reply(self) -> ScriptedReply:
        if self._script:
            return self._script.popleft()
        if self.default_reply is not None:
            return self.default_reply
        message = (
            f"steadyloop ScriptedServer: the script ran out at chat-completions request #{self._chat_count}; "
            "enqueue more replies or set default_reply"
        )
        return Reply.json({"error": {"message": message, "type": "script_exhausted", "code": 500}}, 500)

    # -- the ASGI app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app."""
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not part of the API
        body = await read_body(receive)
        if body is None:
            return
        path, method = _origin_path(scope["path"]), scope["method"]
        request = _recorded(scope, body)
        self._record(request)
        runner = self._serving.uvicorn
        assert runner is not None, "requests arrive only while uvicorn runs"
        async with runner.exchange(scope, receive, send) as exchange:
            try:
                await play(exchange, self._route(method, path, request))
            finally:
                if exchange.disconnected:
                    with self._lock:
                        self.disconnects += 1

    def _route(self, method: str, path: str, request: RecordedRequest) -> ScriptedReply:
        if method == "POST" and _is_model_call(path):
            answered = self.respond(request) if self.respond is not None else None
            return answered if answered is not None else self._next_reply()
        if method == "GET" and path in ("/v1/models", "/models"):
            models = self.models
            if models is None or isinstance(models, StreamReply | BodyReply | StallReply):
                return _static(models)
            return Reply.json({"object": "list", "data": [_model_entry(model) for model in models]})
        if method == "GET" and path == "/props":
            return _static(self.props)
        if method == "GET" and path in ("/health", "/v1/health"):  # llama.cpp serves both
            return _static(self.health)
        if method == "POST" and (path == "/v1/messages/count_tokens" or _is_gemini_count(path)):
            count = self.count_tokens
            if callable(count):  # a responder: it reads the request, as a real count checks its shape
                return _static(count(request))
            return _static(count)
        if method == "GET" and path.startswith(("/v1/models/", _GEMINI_MODELS)):
            return self._model(path)
        if method == "GET" and path == _GEMINI_MODELS.rstrip("/"):
            models = self.models
            if models is None or isinstance(models, StreamReply | BodyReply | StallReply):
                return _static(models)
            return Reply.json({"models": [_gemini_entry(model) for model in models]})
        error = {"message": f"no route for {method} {path}", "type": "not_found_error", "code": 404}
        return Reply.json({"error": error}, 404)

    def _model(self, path: str) -> ScriptedReply:
        """One model by its id (Anthropic's ``/v1/models/{id}``, Gemini's ``/v1beta/models/{name}``)."""
        models = self.models
        if models is None or isinstance(models, StreamReply | BodyReply | StallReply):
            return _static(models)
        gemini = path.startswith(_GEMINI_MODELS)
        wanted = path.removeprefix(_GEMINI_MODELS if gemini else "/v1/models/")
        for model in models:
            entry = _gemini_entry(model) if gemini else _model_entry(model)
            if entry.get("name" if gemini else "id") == (f"models/{wanted}" if gemini else wanted):
                return Reply.json(entry)
        return _static(None)

    # -- running

    async def _start(self) -> None:
        await self._serving.start(self._requested_port)

    async def _stop(self) -> None:
        await self._serving.stop()

    async def __aenter__(self) -> Self:
        await self._start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    def __enter__(self) -> Self:
        started = threading.Event()
        failure: list[BaseException] = []

        async def main() -> None:
            self._thread_loop = asyncio.get_running_loop()
            try:
                await self._start()
            except BaseException as error:
                failure.append(error)
                return
            finally:
                started.set()
            assert self._serving.task is not None
            await self._serving.task

        self._thread = threading.Thread(
            target=asyncio.run, args=(main(),), name="scripted-server", daemon=True
        )
        self._thread.start()
        started.wait()
        if failure:
            self._thread.join()
            self._thread = self._thread_loop = None
            raise failure[0]
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        loop, thread = self._thread_loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), loop).result()
        thread.join()
        self._thread = self._thread_loop = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():  # the waiter may have been cancelled meanwhile
        future.set_result(None)


def _recorded(scope: Scope, body: bytes) -> RecordedRequest:
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    headers = tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"])
    query = scope.get("query_string", b"").decode("latin-1")
    return RecordedRequest(scope["method"], _origin_path(scope["path"]), query, headers, body, parsed)


def _origin_path(path: str) -> str:
    # A request sent to a forward proxy names its whole URL (absolute form); the server answers it as the
    # upstream would, so a client's proxy settings can be tested against it.
    if path.startswith(("http://", "https://")):
        return "/" + path.split("://", 1)[1].partition("/")[2]
    return path


def _model_entry(model: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(model, str):
        return {"id": model, "object": "model", "created": 0, "owned_by": "steadyloop"}
    return dict(model)


def _gemini_entry(model: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(model, str):
        return {"name": f"models/{model}", "displayName": model}
    return dict(model)


def _is_gemini_count(path: str) -> bool:
    return (path.startswith(_GEMINI_MODELS) or _VERTEX_MODELS.match(path) is not None) and path.endswith(
        ":countTokens"
    )


def _static(value: Document) -> ScriptedReply:
    if value is None:
        return Reply.json({"error": {"message": "not found", "type": "not_found_error", "code": 404}}, 404)
    if isinstance(value, StreamReply | BodyReply | StallReply):
        return value
    return Reply.json(dict(value))


# -- command line


def load_script(path: Path) -> dict[str, Any]:
    """Read a script file: a list of replies, or ``{"replies": [...], "default": {...}, "props": ...}``."""
    data = json.loads(path.read_text())
    spec: dict[str, Any] = {"replies": data} if isinstance(data, list) else dict(data)
    base = path.parent
    options: dict[str, Any] = {
        "replies": [reply_from_json(item, base=base) for item in spec.get("replies", [])]
    }
    if spec.get("default") is not None:
        options["default_reply"] = reply_from_json(spec["default"], base=base)
    for key in ("models", "props", "health"):
        if key in spec:
            options[key] = spec[key]
    return options


async def _serve_forever(server: ScriptedServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        print(server.base_url, flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m steadyloop.testing.server [--port N] [--script FILE.json]``: serve until killed."""
    parser = argparse.ArgumentParser(
        prog="python -m steadyloop.testing.server", description="A scripted OpenAI-compatible server."
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--script", type=Path, help="JSON file: a list of replies (see reply_from_json)")
    args = parser.parse_args(argv)
    options = load_script(args.script) if args.script else {"replies": []}
    server = ScriptedServer(*options.pop("replies"), port=args.port, **options)
    asyncio.run(_serve_forever(server))


if __name__ == "__main__":
    main(sys.argv[1:])
