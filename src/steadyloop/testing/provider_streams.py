"""Scripted replies in the Anthropic Messages and Gemini wire formats, for ``ScriptedServer``.

``ScriptedServer`` answers ``POST /v1/messages`` (Anthropic) and
``POST /v1beta/models/{model}:streamGenerateContent`` (Gemini) from the same script as chat completions,
so the real SDK clients can be driven against it on loopback::

    async with ScriptedServer(sse_reply(Path("01-text.sse").read_bytes())) as server:
        endpoint = Endpoint(server.base_url, "key", api="anthropic")

A captured body is replayed byte for byte (``sse_reply``); a sequence that exists only as a non-streamed
body is turned into the events its stream would carry (``anthropic_events``, ``gemini_chunks``) and
framed the way each provider frames events (``anthropic_stream``, ``gemini_stream``). Faults (stalls,
drops, delays) take the same options as ``Reply.stream``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .replies import StreamReply

__all__ = ["anthropic_events", "anthropic_stream", "gemini_chunks", "gemini_stream", "sse_reply"]

_SSE = (("Content-Type", "text/event-stream"),)


def sse_reply(body: bytes, **faults: Any) -> StreamReply:
    """A captured SSE body replayed exactly, cut into its events (``\\n\\n`` or ``\\r\\n\\r\\n`` apart).

    Args:
        body: the body bytes as captured.
        **faults: ``Reply.stream`` options (``stall_after``, ``disconnect_after``, ``delay`` ...).
    """
    separator = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    frames: list[bytes] = []
    start = 0
    while (end := body.find(separator, start)) != -1:
        frames.append(body[start : end + len(separator)])
        start = end + len(separator)
    if start < len(body):
        frames.append(body[start:])
    return replace(StreamReply(frames=tuple(frames), headers=_SSE, done=False), **faults)


def anthropic_stream(events: Sequence[Mapping[str, Any]], **faults: Any) -> StreamReply:
    """Anthropic stream events framed as Anthropic frames them: ``event: <type>`` then ``data: <json>``."""
    frames = tuple(
        f"event: {event.get('type')}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n".encode()
        for event in events
    )
    return replace(StreamReply(frames=frames, headers=_SSE, done=False), **faults)


def anthropic_events(message: Mapping[str, Any], *, json_piece: int = 7) -> list[dict[str, Any]]:
    """The stream events that carry a non-streamed Messages ``message``, in the documented order.

    Text goes out in one ``text_delta`` per block; a tool call's input as ``input_json_delta`` pieces of
    ``json_piece`` characters (so keys and values are cut mid-token, as the live API does).
    """
    usage = dict(message.get("usage") or {})
    start = {
        "type": "message_start",
        "message": {
            "id": message.get("id", "msg_scripted"),
            "type": "message",
            "role": "assistant",
            "model": message.get("model", "claude-scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1},
        },
    }
    events: list[dict[str, Any]] = [start]
    for index, block in enumerate(message.get("content") or ()):
        kind = block.get("type")
        if kind == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": block["text"]},
                }
            )
        elif kind == "tool_use":
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": opened})
            text = json.dumps(block.get("input") or {}, separators=(",", ":"))
            for at in range(0, len(text), json_piece):
                delta = {"type": "input_json_delta", "partial_json": text[at : at + json_piece]}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": dict(block)})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message.get("stop_reason"), "stop_sequence": None},
            "usage": {"output_tokens": usage.get("output_tokens", 1)},
        }
    )
    events.append({"type": "message_stop"})
    return events


def gemini_stream(chunks: Sequence[Mapping[str, Any]], **faults: Any) -> StreamReply:
    """Gemini response chunks framed as ``alt=sse`` frames them: ``data: <json>`` and a blank line, CRLF."""
    frames = tuple(f"data: {json.dumps(chunk, separators=(',', ':'))}\r\n\r\n".encode() for chunk in chunks)
    return replace(StreamReply(frames=frames, headers=_SSE, done=False), **faults)


def gemini_chunks(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``alt=sse`` chunks that carry a non-streamed ``generateContent`` response: one per part, the
    finish reason and usage on the last, as the live API sends them."""
    candidates = response.get("candidates") or [{}]
    candidate = candidates[0]
    parts = list((candidate.get("content") or {}).get("parts") or ())
    role = (candidate.get("content") or {}).get("role", "model")
    chunks: list[dict[str, Any]] = []
    for n, part in enumerate(parts):
        last = n == len(parts) - 1
        piece: dict[str, Any] = {"content": {"role": role, "parts": [part]}, "index": 0}
        if last:
            piece.update({k: v for k, v in candidate.items() if k not in ("content", "index")})
        chunk: dict[str, Any] = {"candidates": [piece]}
        if last and "usageMetadata" in response:
            chunk["usageMetadata"] = response["usageMetadata"]
        chunks.append(chunk)
    if not parts:
        chunk = {"candidates": [dict(candidate)]}
        if "usageMetadata" in response:
            chunk["usageMetadata"] = response["usageMetadata"]
        chunks.append(chunk)
    return chunks
