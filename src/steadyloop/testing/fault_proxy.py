"""A fault-injecting HTTP proxy on loopback: what a broken proxy or server does to a run, on demand.

It sits between a client and an OpenAI-compatible upstream (the scripted server, or a real one) and
forwards every request. Chat-completions requests may instead get a fault:

- ``rate_limited``: 429 with ``Retry-After`` and ``retry-after-ms``;
- ``loading``: 503 "Loading model", llama.cpp's body while a model loads;
- ``server_error``: 500;
- ``reset_before_first_event`` / ``reset_after_first_event``: the connection is cut after the headers,
  or after the upstream's first event;
- ``stall_before_first_event`` / ``stall_after_first_event``: nothing more is sent until the client
  leaves;
- ``keepalive_storm``: a storm of ``: ping`` comment lines before the first event and after it, the
  stream otherwise intact;
- ``junk_events``: a malformed event (``data: {not json``) and a stray line that is no SSE at all
  (what a misbehaving proxy inserts) after the second event, the stream otherwise intact.

Which fault a request gets is decided by the seed, the request itself (its path, key and body) and how
many times the same request came before, so a run replays the same faults however concurrent requests
interleave. A request is faulted with probability ``rate`` for its first ``clean_after`` sendings and
then forwarded untouched, so every run can get through with enough retries. Every base URL may carry a
tenant prefix (``tenant_base_url("a")`` is ``http://127.0.0.1:PORT/t/a/v1``), forwarded without it, so
one upstream can stand for many endpoints::

    async with ScriptedServer(default_reply=reply) as upstream, FaultProxy(upstream.base_url) as proxy:
        endpoint = Endpoint(proxy.tenant_base_url("user-7"), api_key="sk-user-7")
        ...
        print(proxy.injected)  # Counter of the faults played

Other requests (``GET /v1/models``, ``/health``) are always forwarded untouched.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self, get_args

from ._playback import HOST, Exchange, Loopback, Receive, Scope, Send, read_body

if TYPE_CHECKING:
    import httpx2

__all__ = ["ALL_FAULTS", "Fault", "FaultProxy"]

Fault = Literal[
    "rate_limited",
    "loading",
    "server_error",
    "reset_before_first_event",
    "reset_after_first_event",
    "stall_before_first_event",
    "stall_after_first_event",
    "keepalive_storm",
    "junk_events",
]

#: Every fault the proxy can play.
ALL_FAULTS: tuple[Fault, ...] = get_args(Fault)

_TENANT = re.compile(r"^/t/[^/]+(/.*)$")
_EVENT_END = re.compile(rb"\r?\n\r?\n")
# Framing belongs to one hop; the proxy frames its own answer.
_HOP_BY_HOP = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "host", "accept-encoding"}
)
_JSON = ("content-type", "application/json; charset=utf-8")
_BODIES: dict[Fault, tuple[int, bytes]] = {
    "rate_limited": (
        429,
        b'{"error":{"message":"Rate limit reached for requests. Please slow down.",'
        b'"type":"requests","code":"rate_limit_exceeded"}}',
    ),
    # llama.cpp's own answer while the model loads.
    "loading": (503, b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'),
    "server_error": (500, b'{"error":{"message":"Internal server error","type":"server_error","code":500}}'),
}
_JUNK = b"data: {not json\n\nupstream-proxy-keepalive\n\n"
_PING = b": ping\n\n"


class FaultProxy:
    """A fault-injecting proxy on 127.0.0.1 in front of ``upstream``; see the module docstring.

    Args:
        upstream: the upstream's OpenAI base URL, e.g. ``http://127.0.0.1:8080/v1``.
        faults: the faults to draw from, uniformly.
        rate: the chance that a chat-completions request gets a fault.
        clean_after: sendings of one request that may be faulted; later ones are forwarded untouched.
            ``None`` faults every sending with chance ``rate``.
        seed: decides every draw, with each request's identity.
        retry_after_s: what a ``rate_limited`` answer asks the client to wait.
        storm: comment lines per ``keepalive_storm`` burst.

    Attributes:
        injected: how many times each fault was played.
        forwarded: chat-completions requests forwarded without a fault.
    """

    def __init__(
        self,
        upstream: str,
        *,
        faults: Sequence[Fault] = ALL_FAULTS,
        rate: float = 0.5,
        clean_after: int | None = 2,
        seed: int = 0,
        retry_after_s: float = 1.0,
        storm: int = 200,
    ) -> None:
        unknown = set(faults) - set(ALL_FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; choose from {ALL_FAULTS}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate must be between 0 and 1, got {rate!r}")
        self.upstream = upstream.rstrip("/")
        self.faults = tuple(faults)
        self.rate = rate
        self.clean_after = clean_after
        self.seed = seed
        self.retry_after_s = retry_after_s
        self.storm = storm
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self._seen: Counter[str] = Counter()
        self._client: httpx2.AsyncClient | None = None
        self._serving = Loopback(self, "FaultProxy")

    # -- where it listens

    @property
    def port(self) -> int:
        """The bound port; set once the proxy is running."""
        if self._serving.port is None:
            raise RuntimeError("FaultProxy is not running; use `async with FaultProxy(...)`")
        return self._serving.port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL that reaches the upstream through the proxy."""
        return f"http://{HOST}:{self.port}/v1"

    def tenant_base_url(self, tenant: str) -> str:
        """A base URL of its own for ``tenant`` (no ``/`` in it), reaching the same upstream."""
        if not tenant or "/" in tenant:
            raise ValueError(f"a tenant is a non-empty name without '/', got {tenant!r}")
        return f"http://{HOST}:{self.port}/t/{tenant}/v1"

    # -- deciding

    def fault_for(self, identity: bytes) -> Fault | None:
        """The fault the next sending of the request ``identity`` gets (and count the sending)."""
        digest = hashlib.sha256(identity).hexdigest()
        sending = self._seen[digest]
        self._seen[digest] += 1
        if self.clean_after is not None and sending >= self.clean_after:
            return None
        draw = random.Random(f"{self.seed}:{digest}:{sending}")
        if not self.faults or draw.random() >= self.rate:
            return None
        return draw.choice(self.faults)

    # -- the ASGI app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app."""
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if body is None:
            return
        path = scope["path"]
        tenant = _TENANT.match(path)
        upstream_path = tenant.group(1) if tenant else path
        headers = [
            (name.decode("latin-1"), value.decode("latin-1"))
            for name, value in scope["headers"]
            if name.decode("latin-1").lower() not in _HOP_BY_HOP
        ]
        fault: Fault | None = None
        if scope["method"] == "POST" and upstream_path.endswith("/chat/completions"):
            key = next((value for name, value in headers if name.lower() == "authorization"), "")
            fault = self.fault_for(b"\0".join([path.encode(), key.encode(), body]))
            if fault is None:
                self.forwarded += 1
            else:
                self.injected[fault] += 1
        runner = self._serving.uvicorn
        assert runner is not None, "requests arrive only while uvicorn runs"
        async with runner.exchange(scope, receive, send) as exchange:
            await self._answer(exchange, scope, upstream_path, headers, body, fault)

    async def _answer(
        self,
        exchange: Exchange,
        scope: Scope,
        path: str,
        headers: list[tuple[str, str]],
        body: bytes,
        fault: Fault | None,
    ) -> None:
        if fault in _BODIES:
            status, payload = _BODIES[fault]
            extra = []
            if fault == "rate_limited":
                extra = [
                    ("retry-after", str(math.ceil(self.retry_after_s))),
                    ("retry-after-ms", str(int(self.retry_after_s * 1000))),
                ]
            await exchange.start(status, [_JSON, ("content-length", str(len(payload))), *extra])
            await exchange.body(payload, more=False)
            return
        import httpx2

        client = self._client
        assert client is not None
        url = self.upstream.removesuffix("/v1") + path
        query = scope.get("query_string", b"")
        if query:
            url += "?" + query.decode("latin-1")
        try:
            async with client.stream(scope["method"], url, headers=headers, content=body) as response:
                await self._relay(exchange, response, fault)
        except httpx2.HTTPError:
            if exchange.disconnected:
                return
            # The upstream went away under us: pass the cut on, as a proxy does.
            await exchange.drop()

    async def _relay(self, exchange: Exchange, response: httpx2.Response, fault: Fault | None) -> None:
        kept = [(n, v) for n, v in response.headers.items() if n.lower() not in _HOP_BY_HOP]
        await exchange.start(response.status_code, kept)
        streaming = response.headers.get("content-type", "").startswith("text/event-stream")
        if not streaming or fault is None:
            async for data in response.aiter_raw():
                if exchange.over:
                    return
                await exchange.body(data)
            await exchange.body(b"", more=False)
            return
        if await self._interrupt(exchange, fault, "before_first_event"):
            return
        sent = 0
        async for event in _events(response.aiter_raw()):
            if exchange.over:
                return
            await exchange.body(event)
            sent += 1
            if sent == 1 and await self._interrupt(exchange, fault, "after_first_event"):
                return
            if sent == 2 and fault == "junk_events":
                await exchange.body(_JUNK)
        await exchange.body(b"", more=False)

    async def _interrupt(self, exchange: Exchange, fault: Fault, when: str) -> bool:
        """Play what ``fault`` does to the stream at ``when``; whether the stream ends there."""
        if fault == f"reset_{when}":
            await exchange.drop()  # the connection cut under the response
            return True
        if fault == f"stall_{when}":
            await exchange.pause(None)  # nothing more until the client leaves (or the proxy stops)
            await exchange.end()
            return True
        if fault == "keepalive_storm":
            await exchange.body(_PING * self.storm)
        return False

    # -- running

    async def __aenter__(self) -> Self:
        import httpx2

        self._client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(None, connect=10.0),
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=256),
        )
        try:
            await self._serving.start()
        except BaseException:
            await self._client.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._serving.stop()
        if self._client is not None:
            await self._client.aclose()
        self._client = None


async def _events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Whole SSE events (each with its blank line) out of arbitrary reads; what is left at the end too."""
    buffer = b""
    async for data in chunks:
        buffer += data
        start = 0
        for match in _EVENT_END.finditer(buffer):
            yield buffer[start : match.end()]
            start = match.end()
        buffer = buffer[start:]
    if buffer:
        yield buffer
