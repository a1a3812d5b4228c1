"""What a successful streamed request's body is: an event stream, a whole JSON completion, or neither.

A 200 is not always a stream. A server that ignores ``stream: true`` answers with one JSON chat completion;
a proxy, a captive portal or a login wall answers with an HTML page. Read as a stream, either ends "before
the endpoint said it was finished", which reads as transient and is sent again and again. Here the first
bytes decide, the ``Content-Type`` only breaks a tie:

- an SSE field (``data:``, ``event:``, ``id:``, ``retry:``) or a comment (``:``) starts a stream;
- ``{`` or ``[`` starts JSON: a chat completion becomes the stream chunks it stands for, so it goes through
  the same assembly, fences and tool-call recovery as a stream would; ``{"error": ...}`` becomes the error
  event a stream would have carried; anything else is unreadable;
- ``<`` (HTML, XML) is unreadable, and so is other text unless the response said ``text/event-stream``.

Unreadable is ``EndpointUnreadable``, never retried, quoting the body's first bytes with credentials masked.
Sans I/O apart from ``settle``, which each transport calls with its own way of reading more.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from ...errors import EndpointUnreadable
from ..web_pages import is_web_page, page_words, web_page_words
from . import json_codec

__all__ = [
    "HEAD_BYTES",
    "MAX_JSON_BODY",
    "BodyKind",
    "completion_chunks",
    "mask_credentials",
    "settle",
    "sniff",
]

BodyKind = Literal["stream", "json", "other"]

#: The most bytes read before deciding, and the most quoted in an error.
HEAD_BYTES = 512
#: The largest non-streamed body read whole; a chat completion is a small fraction of this.
MAX_JSON_BODY = 16 * 1024 * 1024
_QUOTED_CHARS = 200

_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")
_BLANK = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"

# Credentials a page may echo back (a debug page listing the request's headers, a URL with a key in it).
_CREDENTIAL_PATTERNS = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"),
    re.compile(
        r"(?i)\b(api[_-]?key|access[_-]?token|token|secret|password|authorization)"
        r"(\W{1,3})[^\s\"'&,;<>]{4,}"
    ),
    re.compile(r"(?i)(://[^/\s:@]+:)[^@\s/]+@"),
)


def sniff(content_type: str, head: bytes, *, ended: bool) -> BodyKind | None:
    """What a body starting with ``head`` is; ``None`` when more bytes are needed to tell.

    Args:
        content_type: the response's ``Content-Type`` (``""`` when absent).
        head: the body's first bytes.
        ended: no more bytes will come (the body ended, or enough was read to decide).
    """
    start = head[3:] if head.startswith(_BOM) else head
    start = start.lstrip(_BLANK)
    if not start:
        # Nothing but blank lines so far; an empty body is left to the stream's reader, which calls a
        # stream that ended without a word cut short.
        return "stream" if ended else None
    first = start[:1]
    if first in (b"{", b"["):
        return "json"
    if first == b"<":
        return "other"
    if start.startswith(_SSE_STARTS):
        return "stream"
    if not ended and any(field.startswith(start) for field in _SSE_STARTS):
        return None  # "da", "eve": the start of a field name, cut by the read
    return "stream" if is_event_stream(content_type) else "other"


def is_event_stream(content_type: str) -> bool:
    """Whether a ``Content-Type`` names an event stream."""
    return content_type.split(";", 1)[0].strip().lower() == "text/event-stream"


def completion_chunks(document: Any) -> list[dict[str, Any]] | None:
    """The stream chunks a non-streamed answer stands for; ``None`` when it is not one.

    A chat completion becomes a reasoning chunk (when it has reasoning), then one chunk with its content,
    tool calls and finish reason, then its usage; an ``{"error": ...}`` document becomes the error event.
    """
    if not isinstance(document, Mapping):
        return None
    if document.get("error"):
        return [dict(document)]
    choices = document.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, str) or not choices:
        return None
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        return None
    common = {key: document[key] for key in ("id", "model", "created") if key in document}
    chunks: list[dict[str, Any]] = []
    for field in ("reasoning_content", "reasoning"):
        reasoning = message.get(field)
        if isinstance(reasoning, str) and reasoning:
            chunks.append(_chunk(common, {field: reasoning}))
            break
    delta: dict[str, Any] = {"role": "assistant"}
    content = message.get("content")
    if isinstance(content, str) and content:
        delta["content"] = content
    calls = message.get("tool_calls")
    if isinstance(calls, Sequence) and not isinstance(calls, str) and calls:
        delta["tool_calls"] = [
            {**call, "index": index} if isinstance(call, Mapping) else call
            for index, call in enumerate(calls)
        ]
    finish = choice.get("finish_reason")
    last = _chunk(common, delta, finish)
    if "timings" in document:
        last["timings"] = document["timings"]
    chunks.append(last)
    usage = document.get("usage")
    if isinstance(usage, Mapping):
        chunks.append({**common, "choices": [], "usage": dict(usage)})
    return chunks


def _chunk(common: Mapping[str, Any], delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
    return {
        **common,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def mask_credentials(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with the given secrets and anything shaped like a credential replaced by ``***``."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _CREDENTIAL_PATTERNS[0].sub(lambda m: f"{m.group(1)} ***", text)
    text = _CREDENTIAL_PATTERNS[1].sub("sk-***", text)
    text = _CREDENTIAL_PATTERNS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
    return _CREDENTIAL_PATTERNS[3].sub(lambda m: f"{m.group(1)}***@", text)


def quote(head: bytes, secrets: Sequence[str] = ()) -> str:
    """The first bytes of a body as one line of text, bounded, with credentials masked."""
    text = head[: HEAD_BYTES * 2].decode("utf-8", "replace")
    text = " ".join(text.split())
    text = mask_credentials(text, secrets)
    return text[:_QUOTED_CHARS] + ("..." if len(text) > _QUOTED_CHARS else "")


def unreadable(
    why: str,
    head: bytes,
    content_type: str,
    *,
    status: int,
    endpoint: str | None,
    model: str | None,
    secrets: Sequence[str] = (),
) -> EndpointUnreadable:
    """The error for a body that cannot be read as a turn."""
    quoted = quote(head, secrets)
    shown = content_type or "no content type"
    text = head.decode("utf-8", "replace")
    said = f"{endpoint} answered {status} ({shown}) with {why}: {quoted!r}"
    if is_web_page(text):
        said = web_page_words(status, mask_credentials(page_words(text), secrets))
    return EndpointUnreadable(
        said,
        endpoint=endpoint,
        model=model,
        status=status,
        body=quoted,
        kind="unreadable",
        content_type=content_type,
    )


async def settle(
    first: bytes,
    read_more: Callable[[], Awaitable[bytes]],
    content_type: str,
    *,
    status: int,
    endpoint: str | None,
    model: str | None,
    secrets: Sequence[str] = (),
) -> tuple[bytes, bool]:
    """Decide what a body is from its first read, reading more only while that is undecided.

    Args:
        first: the first bytes read (not empty).
        read_more: returns the next bytes, ``b""`` at the end of the body.
        content_type: the response's ``Content-Type``.
        status: the response's status, for the error.
        endpoint: for the error.
        model: for the error.
        secrets: credentials to mask in anything quoted (the request's key).

    Returns:
        The bytes to read as the stream (what was read, or the chunks a JSON completion stands for), and
        whether the body is over (a JSON body is read whole).

    Raises:
        EndpointUnreadable: the body is neither a stream nor a completion.
    """
    head = first
    ended = False
    kind = sniff(content_type, head, ended=False)
    while kind is None:
        data = await read_more()
        ended = not data
        head += data
        kind = sniff(content_type, head, ended=ended or len(head) >= HEAD_BYTES)
    if kind == "stream":
        return head, ended
    if kind == "other":
        while not ended and len(head) < HEAD_BYTES:
            data = await read_more()
            ended = not data
            head += data
        raise unreadable(
            "a body that is not an event stream",
            head,
            content_type,
            status=status,
            endpoint=endpoint,
            model=model,
            secrets=secrets,
        )
    parts = [head]
    size = len(head)
    while not ended:
        data = await read_more()
        ended = not data
        size += len(data)
        if size > MAX_JSON_BODY:
            raise unreadable(
                f"a JSON body over {MAX_JSON_BODY} bytes",
                head,
                content_type,
                status=status,
                endpoint=endpoint,
                model=model,
                secrets=secrets,
            )
        parts.append(data)
    body = b"".join(parts)
    try:
        document = json_codec.loads(body)
    except (ValueError, RecursionError):
        document = None
    chunks = completion_chunks(document)
    if chunks is None:
        why = (
            "JSON that is not a chat completion"
            if document is not None
            else "a body that is neither one JSON document nor an event stream"
        )
        raise unreadable(
            why, body, content_type, status=status, endpoint=endpoint, model=model, secrets=secrets
        )
    frames = [b"data: " + json_codec.dumps(chunk) + b"\n\n" for chunk in chunks]
    frames.append(b"data: [DONE]\n\n")
    return b"".join(frames), True
