"""Reading server-sent events: the chat-completions stream, and Gemini's, as the bytes arrive.

Whichever transport sent the request, the body comes back as raw bytes and is read here: building an SDK
model per chunk would cost more than everything else a turn does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from .transport import json_codec

__all__ = ["DONE", "SSEDecoder", "iter_sse"]

#: What ``SSEDecoder`` yields for ``data: [DONE]``.
DONE: Any = object()


class SSEDecoder:
    """Splits a byte stream into server-sent events and decodes their JSON, sans I/O.

    ``feed`` returns the decoded payloads (any JSON value, or ``DONE``) completed by the bytes given.
    Comment lines (``: keep-alive``) are counted in ``comments`` and yield nothing. An event whose data is
    not JSON (a proxy's junk line, a torn write) is counted in ``unreadable``, its first bytes kept in
    ``first_unreadable``, and yields nothing: one bad event does not end a stream. Only an ``error``
    event that is not JSON is still an error. Bytes are joined only when a line ends, so an event that
    arrives a byte at a time costs no more than one that arrives whole.

    With ``keep_raw``, every event is also kept in ``raw`` as received, ``(event name, data)``, before it is
    decoded; the caller takes them out after each ``feed``.

    With ``keep_stray``, lines that are no SSE field at all (a JSON body sent without ``data:`` framing,
    such as an error a server or a proxy wrote into a stream that began with 200) are kept in ``stray``,
    each with its line end, up to ``STRAY_LIMIT`` bytes; ``stray_cut`` says when more came.
    """

    __slots__ = (
        "_data",
        "_event",
        "_parts",
        "comments",
        "first_unreadable",
        "raw",
        "stray",
        "stray_cut",
        "unreadable",
    )

    def __init__(self, *, keep_raw: bool = False, keep_stray: bool = False) -> None:
        self._parts: list[bytes] = []  # the line being read, in the pieces it arrived in
        self._data: list[bytes] = []
        self._event = b""
        self.comments = 0
        self.unreadable = 0
        self.first_unreadable = b""
        self.raw: list[tuple[bytes, bytes]] | None = [] if keep_raw else None
        self.stray: bytearray | None = bytearray() if keep_stray else None
        self.stray_cut = False

    def feed(self, data: bytes) -> list[Any]:
        if b"\n" not in data:
            if data:
                self._parts.append(data)
            return []
        if self._parts:
            self._parts.append(data)
            buffer = b"".join(self._parts)
            self._parts = []
        else:
            buffer = data
        if not self._data and not self._event and b"\r" not in buffer and self.raw is None:
            return self._feed_plain(buffer)
        return self._feed_lines(buffer)

    def _feed_plain(self, buffer: bytes) -> list[Any]:
        # Nearly every server sends "data: {...}" and a blank line per event, with bare newlines: split on the
        # blank lines and decode each block at once, reading a block line by line only when it is anything
        # else (a comment, an event name, data over several lines).
        blocks = buffer.split(b"\n\n")
        rest = blocks.pop()
        out: list[Any] = []
        loads = json_codec.loads_strict
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:
                try:
                    out.append(loads(block[6:]))
                except (ValueError, RecursionError):
                    decoded = self._decode(block[6:], b"")  # [DONE], non-strict JSON, or not JSON at all
                    if decoded is not _UNREADABLE:
                        out.append(decoded)
            elif block:
                out.extend(self._feed_lines(block + b"\n\n"))
        if b"\n" in rest:
            out.extend(self._feed_lines(rest))
        elif rest:
            self._parts = [rest]
        return out

    def _feed_lines(self, buffer: bytes) -> list[Any]:
        lines = buffer.split(b"\n")
        last = lines.pop()
        self._parts = [last] if last else []
        out: list[Any] = []
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    decoded = self._dispatch()
                    if decoded is not _UNREADABLE:
                        out.append(decoded)
                continue
            if line.startswith(b"data:"):
                payload = line[5:]
                self._data.append(payload[1:] if payload.startswith(b" ") else payload)
            elif line.startswith(b":"):
                self.comments += 1
            elif line.startswith(b"event:"):
                self._event = line[6:].strip()
            elif (stray := self.stray) is not None and line.partition(b":")[0] not in _SSE_FIELDS:
                if len(stray) + len(line) < STRAY_LIMIT:
                    stray += line  # in place: ``stray`` is ``self.stray``
                    stray += b"\n"
                else:
                    self.stray_cut = True
        return out

    def flush(self) -> list[Any]:
        """Whatever a stream that ended without a final blank line still held."""
        return self.feed(b"\n\n") if self._parts or self._data else []

    def _dispatch(self) -> Any:
        payload = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data = []
        event, self._event = self._event, b""
        if self.raw is not None:
            self.raw.append((event, payload))
        decoded = self._decode(payload, event)
        if event == b"error" and isinstance(decoded, dict) and "error" not in decoded:
            decoded = {"error": decoded}
        return decoded

    def _decode(self, payload: bytes, event: bytes) -> Any:
        if payload == b"[DONE]":
            return DONE
        try:
            return json_codec.loads(payload)
        except ValueError:
            if event == b"error":
                return {"error": {"message": payload[:500].decode("utf-8", "replace")}}
            self.unreadable += 1
            if not self.first_unreadable:
                self.first_unreadable = payload[:80]
            return _UNREADABLE


_UNREADABLE: Any = object()
_SSE_FIELDS = frozenset({b"data", b"event", b"id", b"retry"})
#: How much of a body's non-SSE lines ``SSEDecoder`` keeps (an error body is a few hundred bytes).
STRAY_LIMIT = 1 << 20


class _ByteStream(Protocol):
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


async def iter_sse(response: _ByteStream) -> AsyncIterator[Any]:
    """Decoded events of a streamed response, then whatever the stream left unterminated."""
    decoder = SSEDecoder()
    async for data in response.aiter_bytes():
        for event in decoder.feed(data):
            yield event
    for event in decoder.flush():
        yield event
