"""What the scripted server answers: reply values, their builders, capture replay, the JSON script format.

Three kinds of reply, each a frozen value with a ``type`` field:

- ``StreamReply``: an SSE stream, chunk by chunk, with optional waits and faults (stall, keep-alives, a
  dropped connection, no ``[DONE]``).
- ``BodyReply``: one complete body with a status and headers (JSON answers, error statuses, raw bytes).
- ``StallReply``: headers are never sent; the connection is held, then dropped.

Build them with ``Reply.stream``, ``Reply.json``, ``Reply.raw``, ``Reply.from_capture``, ``Reply.stall`` and
``Reply.drop``. A reply is immutable and serialises its chunks to bytes once, when built, so one reply can be
played to many concurrent requests (load tests) at little cost per request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from .chunks import Chunk, stream_of

__all__ = [
    "DONE_FRAME",
    "KEEPALIVE_FRAME",
    "BodyReply",
    "Drop",
    "Headers",
    "Reply",
    "ScriptedReply",
    "StallReply",
    "Step",
    "StreamReply",
    "Wait",
    "parse_capture",
    "reply_from_json",
    "split_events",
    "sse_frame",
]

Headers: TypeAlias = Mapping[str, str] | Sequence[tuple[str, str]]
"""Response headers as a mapping or as (name, value) pairs (pairs keep order and allow repeats)."""

_JSON_TYPE = "application/json; charset=utf-8"
_SSE_HEADERS = (
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache"),
    ("X-Accel-Buffering", "no"),
)
DONE_FRAME = b"data: [DONE]\n\n"
KEEPALIVE_FRAME = b": keep-alive\n\n"

# The server sets the framing itself (Content-Length or chunked) and these describe one hop only, so a
# replayed capture or a user's header list must not carry them over.
_HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def _header_pairs(headers: Headers | None) -> tuple[tuple[str, str], ...]:
    if headers is None:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((str(name), str(value)) for name, value in items if name.lower() not in _HOP_BY_HOP)


def _with_defaults(
    headers: tuple[tuple[str, str], ...], defaults: Iterable[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    given = {name.lower() for name, _ in headers}
    return tuple(pair for pair in defaults if pair[0].lower() not in given) + headers


def sse_frame(chunk: Chunk | str | bytes) -> bytes:
    """One SSE event: a dict becomes ``data: {json}\\n\\n``; strings and bytes are sent verbatim."""
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, str):
        return chunk.encode()
    return b"data: " + json.dumps(chunk, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


@dataclass(frozen=True, slots=True)
class Wait:
    """A step of a stream's plan: wait ``seconds`` (None: until the client leaves or the server stops)."""

    seconds: float | None


@dataclass(frozen=True, slots=True)
class Drop:
    """A step of a stream's plan: close the connection without ending the response."""


DROP = Drop()
Step: TypeAlias = bytes | Wait | Drop


@dataclass(frozen=True)
class StreamReply:
    """An SSE stream; build it with ``Reply.stream`` or ``Reply.from_capture``.

    Timeline: ``headers_delay``, headers, ``first_delay``, frame 0, then ``delay`` before every later frame;
    ``stall_after=k`` waits ``stall_seconds`` (None: forever) before frame k, ``disconnect_after=k`` closes
    the connection instead of sending frame k (so k frames arrived, and no ``[DONE]``). While waiting after
    the headers, ``: keep-alive`` comments go out every ``keepalive_every`` seconds. Frames with no wait
    between them are written together.

    Attributes:
        frames: the serialised events, sent verbatim.
        plan: what the server plays after the headers (bytes to write, waits, a drop), derived once here so
            that a reply reused by many requests costs little per request.
    """

    frames: tuple[bytes, ...]
    status: int = 200
    headers: tuple[tuple[str, str], ...] = _SSE_HEADERS
    delay: float = 0.0
    first_delay: float = 0.0
    headers_delay: float = 0.0
    keepalive_every: float | None = None
    stall_after: int | None = None
    stall_seconds: float | None = None
    disconnect_after: int | None = None
    done: bool = True
    type: Literal["stream"] = "stream"
    plan: tuple[Step, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.keepalive_every is not None and self.keepalive_every <= 0:
            raise ValueError("keepalive_every must be positive")
        for name in ("stall_after", "disconnect_after"):
            at = getattr(self, name)
            # Past the end it would silently never happen, and the test would pass for the wrong reason.
            if at is not None and not 0 <= at <= len(self.frames):
                raise ValueError(f"{name}={at} is outside 0..{len(self.frames)} (the number of chunks)")
        # Frozen: the plan is derived once here, not per request.
        object.__setattr__(self, "plan", self._build_plan())

    def _build_plan(self) -> tuple[Step, ...]:
        steps: list[Step] = []
        pending: list[bytes] = []

        def wait(seconds: float | None) -> None:
            if seconds is not None and seconds <= 0:
                return
            if pending:
                steps.append(b"".join(pending))
                pending.clear()
            steps.append(Wait(seconds))

        wait(self.first_delay)
        count = len(self.frames)
        for index in range(count + 1):
            if index == self.stall_after:
                wait(self.stall_seconds)
            if index == self.disconnect_after:
                if pending:
                    steps.append(b"".join(pending))
                steps.append(DROP)
                return tuple(steps)
            if index == count:
                break
            if index > 0:
                wait(self.delay)
            pending.append(self.frames[index])
        if self.done:
            pending.append(DONE_FRAME)
        if pending:
            steps.append(b"".join(pending))
        return tuple(steps)


@dataclass(frozen=True, slots=True)
class BodyReply:
    """A complete response: status, headers and the body bytes, sent with a Content-Length."""

    body: bytes
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    type: Literal["body"] = "body"


@dataclass(frozen=True, slots=True)
class StallReply:
    """Read the request, send nothing (not even headers), and close the connection after ``seconds``.

    ``seconds=None`` holds the connection until the client gives up or the server stops; ``0`` drops it at
    once.
    """

    seconds: float | None = None
    type: Literal["stall"] = "stall"


ScriptedReply: TypeAlias = StreamReply | BodyReply | StallReply
"""Any reply the server can play."""


class Reply:
    """Builders for scripted replies."""

    @staticmethod
    def stream(
        chunks: Iterable[Chunk | str | bytes],
        *,
        delay: float = 0.0,
        first_delay: float = 0.0,
        headers_delay: float = 0.0,
        keepalive_every: float | None = None,
        stall_after: int | None = None,
        stall_seconds: float | None = None,
        disconnect_after: int | None = None,
        done: bool = True,
        status: int = 200,
        headers: Headers | None = None,
    ) -> StreamReply:
        """An SSE stream of ``chunks``, followed by ``data: [DONE]``.

        Args:
            chunks: dicts are sent as ``data: {json}\\n\\n``; strings and bytes verbatim, so comments,
                malformed events or an event split across two writes (with a ``delay`` between) can be
                scripted.
            delay: seconds before each chunk after the first.
            first_delay: seconds between the headers and the first chunk (a slow prefill the client already
                has headers for).
            headers_delay: seconds before the headers are sent (a slow prefill the SDK call is blocked on).
            keepalive_every: while waiting after the headers, send ``: keep-alive`` this often.
            stall_after: after this many chunks, wait ``stall_seconds`` before continuing.
            stall_seconds: how long the stall lasts; None stalls until the client leaves or the server stops.
            disconnect_after: after this many chunks, close the connection abruptly (no ``[DONE]``, an
                incomplete chunked body).
            done: end with ``data: [DONE]``; False ends the stream cleanly without it.
            status: the HTTP status.
            headers: extra or replacement headers (``Content-Type: text/event-stream`` unless given).
        """
        return StreamReply(
            frames=tuple(sse_frame(chunk) for chunk in chunks),
            status=status,
            headers=_with_defaults(_header_pairs(headers), _SSE_HEADERS),
            delay=delay,
            first_delay=first_delay,
            headers_delay=headers_delay,
            keepalive_every=keepalive_every,
            stall_after=stall_after,
            stall_seconds=stall_seconds,
            disconnect_after=disconnect_after,
            done=done,
        )

    @staticmethod
    def json(body: Any, status: int = 200, headers: Headers | None = None) -> BodyReply:
        """A JSON body, e.g. a non-streamed completion or ``{"error": {...}}`` with status 400, 429 or 503.

        Args:
            body: anything ``json.dumps`` accepts.
            status: the HTTP status.
            headers: extra headers, e.g. ``{"Retry-After": "2"}``.
        """
        raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        return BodyReply(raw, status, _with_defaults(_header_pairs(headers), [("Content-Type", _JSON_TYPE)]))

    @staticmethod
    def raw(body: bytes | str, status: int = 200, headers: Headers | None = None) -> BodyReply:
        """Exactly these body bytes and headers (Content-Length is set by the server)."""
        return BodyReply(body.encode() if isinstance(body, str) else body, status, _header_pairs(headers))

    @staticmethod
    def stall(seconds: float | None = None) -> StallReply:
        """Send nothing, not even headers, then drop the connection after ``seconds`` (None: never)."""
        return StallReply(seconds)

    @staticmethod
    def drop() -> StallReply:
        """Close the connection as soon as the request is read, without any response."""
        return StallReply(0.0)

    @staticmethod
    def from_capture(path: str | Path) -> StreamReply | BodyReply:
        """Replay a captured response: status line, headers, a blank line, then the body bytes.

        A ``text/event-stream`` body becomes a ``StreamReply`` whose frames are the captured events, byte
        for byte (``[DONE]`` included, so ``done`` is False); anything else becomes a ``BodyReply``. Framing
        headers (Content-Length, Transfer-Encoding, Connection, Keep-Alive) are dropped, the others kept as
        captured.
        Add faults with ``dataclasses.replace(reply, delay=0.05, disconnect_after=3)``.
        """
        status, headers, body = parse_capture(Path(path).read_bytes())
        content_type = next((value for name, value in headers if name.lower() == "content-type"), "")
        if content_type.lower().startswith("text/event-stream"):
            return StreamReply(frames=split_events(body), status=status, headers=headers, done=False)
        return BodyReply(body, status, headers)


def parse_capture(data: bytes) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    """Split a capture into status, headers (framing headers removed) and the exact body bytes."""
    separator = b"\r\n\r\n" if b"\r\n\r\n" in data else b"\n\n"
    head, _, body = data.partition(separator)
    status_line, *header_lines = head.decode("latin-1").splitlines()
    parts = status_line.split()
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not (parts[1].isascii() and parts[1].isdigit()):
        raise ValueError(f"not a captured HTTP response: {status_line!r}")
    pairs: list[tuple[str, str]] = []
    for line in header_lines:
        name, _, value = line.partition(":")
        pairs.append((name.strip(), value.strip()))
    return int(parts[1]), _header_pairs(pairs), body


def split_events(body: bytes) -> tuple[bytes, ...]:
    """Cut an SSE body after every blank line; the frames join back to exactly ``body``."""
    frames: list[bytes] = []
    start = 0
    while (end := body.find(b"\n\n", start)) != -1:
        frames.append(body[start : end + 2])
        start = end + 2
    if start < len(body):
        frames.append(body[start:])
    return tuple(frames)


def reply_from_json(obj: Mapping[str, Any], *, base: Path | None = None) -> ScriptedReply:
    """Build a reply from its JSON form, as used by script files.

    Forms, by ``type``:

    - ``"stream"``: ``{"chunks": [...]}`` (dicts or raw strings), or instead of ``chunks`` the ``stream_of``
      fields ``text``, ``reasoning``, ``tool_calls``, ``finish``; plus any ``Reply.stream`` option
      (``delay``, ``disconnect_after``, ``headers`` ...).
    - ``"json"``: ``{"body": ..., "status": 400, "headers": {...}}``.
    - ``"raw"``: ``{"body": "text", "status": ..., "headers": ...}``.
    - ``"capture"``: ``{"path": "x.response.txt"}``, relative to ``base``.
    - ``"stall"``: ``{"seconds": 5}`` or ``{"seconds": null}``; ``"drop"``: ``{}``.

    Raises:
        ValueError: unknown ``type``.
    """
    options = {key: value for key, value in obj.items() if key != "type"}
    kind = obj.get("type", "stream")
    if kind == "stream":
        chunks = options.pop("chunks", None)
        if chunks is None:
            made = {
                key: options.pop(key)
                for key in ("text", "reasoning", "tool_calls", "finish")
                if key in options
            }
            chunks = stream_of(**made)
        return Reply.stream(chunks, **options)
    if kind == "json":
        return Reply.json(options.get("body"), options.get("status", 200), options.get("headers"))
    if kind == "raw":
        return Reply.raw(options.get("body", ""), options.get("status", 200), options.get("headers"))
    if kind == "capture":
        path = Path(options["path"])
        return Reply.from_capture(path if base is None or path.is_absolute() else base / path)
    if kind == "stall":
        return Reply.stall(options.get("seconds"))
    if kind == "drop":
        return Reply.drop()
    raise ValueError(f"unknown reply type {kind!r}")
