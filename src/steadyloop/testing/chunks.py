"""Builders for OpenAI chat-completion stream chunks, shaped like what llama.cpp's llama-server sends.

Each builder returns plain JSON dicts (one per SSE ``data:`` event), ready for ``Reply.stream``. The shapes
follow the captures in ``shared/llm/captures``: an opener whose delta is ``{"role": "assistant", "content":
null}``, then content, reasoning or tool-call deltas, then a finish chunk with ``delta: {}`` and
``finish_reason``, then, when usage was asked for, a chunk with ``choices: []``, ``usage`` and llama.cpp
``timings``.

``text_chunks``, ``reasoning_chunks`` and ``tool_call_chunks`` each return a complete stream of that one kind;
pass ``role_opener=False, finish=None`` to get the bare pieces to splice into a hand-built stream.
``stream_of`` assembles the usual combinations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..messages import ToolCall

__all__ = [
    "DEFAULT_ID",
    "DEFAULT_MODEL",
    "Chunk",
    "delta_chunk",
    "finish_chunk",
    "llamacpp_timings",
    "opener_chunk",
    "reasoning_chunks",
    "split_text",
    "stream_of",
    "text_chunks",
    "tool_call_chunks",
    "usage_chunk",
]

Chunk = dict[str, Any]
"""One ``chat.completion.chunk`` as the JSON object that follows ``data:``."""

DEFAULT_MODEL = "scripted"
DEFAULT_ID = "chatcmpl-scripted"

# Word-sized pieces with their trailing whitespace: close enough to tokens that stream assembly sees many
# small deltas, and joining the pieces gives back the text exactly.
_PIECE = re.compile(r"\s*\S+\s*|\s+")


def split_text(text: str) -> list[str]:
    """Split text into word-sized pieces that join back to exactly ``text`` (none for ``""``)."""
    return _PIECE.findall(text)


def _pieces(text: str | Sequence[str]) -> Sequence[str]:
    return split_text(text) if isinstance(text, str) else text


def delta_chunk(
    delta: Mapping[str, Any],
    *,
    finish_reason: str | None = None,
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
    created: int = 0,
    extra: Mapping[str, Any] | None = None,
) -> Chunk:
    """One chunk with a single choice carrying ``delta``; the building block for hand-made quirks.

    Args:
        delta: the choice's delta, used as given (so ``{"tool_calls": [{"id": None}]}`` works).
        finish_reason: the choice's ``finish_reason``.
        model: the chunk's ``model``.
        id: the chunk's ``id`` (the same on every chunk of one stream).
        created: the chunk's ``created`` timestamp; fixed by default so scripted streams are reproducible.
        extra: more top-level fields, e.g. llama.cpp ``timings`` on a finish chunk.
    """
    chunk: Chunk = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
    }
    if extra:
        chunk.update(extra)
    return chunk


def opener_chunk(*, model: str = DEFAULT_MODEL, id: str = DEFAULT_ID) -> Chunk:
    """The first chunk llama.cpp sends: delta ``{"role": "assistant", "content": null}``, no text yet."""
    return delta_chunk({"role": "assistant", "content": None}, model=model, id=id)


def finish_chunk(
    reason: str = "stop",
    *,
    timings: Mapping[str, float] | None = None,
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
) -> Chunk:
    """The chunk that ends the choice: empty delta and ``finish_reason``.

    Args:
        reason: ``"stop"``, ``"length"``, ``"tool_calls"``, ...
        timings: llama.cpp puts ``timings`` here when the request did not ask for usage.
        model: the chunk's ``model``.
        id: the chunk's ``id``.
    """
    extra = {"timings": dict(timings)} if timings is not None else None
    return delta_chunk({}, finish_reason=reason, model=model, id=id, extra=extra)


def llamacpp_timings(
    prompt_n: int,
    predicted_n: int,
    *,
    cache_n: int = 0,
    prompt_ms: float | None = None,
    predicted_ms: float | None = None,
) -> dict[str, float]:
    """llama.cpp's ``timings`` object, with the per-token and per-second figures derived like the server does.

    Args:
        prompt_n: prompt tokens evaluated (not counting the ``cache_n`` reused ones).
        predicted_n: tokens generated.
        cache_n: prompt tokens reused from the KV cache.
        prompt_ms: prefill time; 1 ms per prompt token when not given.
        predicted_ms: decode time; 10 ms per generated token when not given.
    """
    p_ms = float(prompt_n) if prompt_ms is None else prompt_ms
    d_ms = 10.0 * predicted_n if predicted_ms is None else predicted_ms
    return {
        "cache_n": cache_n,
        "prompt_n": prompt_n,
        "prompt_ms": p_ms,
        "prompt_per_token_ms": p_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": 1000.0 * prompt_n / p_ms if p_ms else 0.0,
        "predicted_n": predicted_n,
        "predicted_ms": d_ms,
        "predicted_per_token_ms": d_ms / predicted_n if predicted_n else 0.0,
        "predicted_per_second": 1000.0 * predicted_n / d_ms if d_ms else 0.0,
    }


def usage_chunk(
    prompt: int,
    completion: int,
    *,
    cached: int | None = None,
    reasoning: int | None = None,
    timings: Mapping[str, float] | None = None,
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
) -> Chunk:
    """The trailing usage chunk sent when the request had ``stream_options.include_usage``: ``choices: []``.

    Args:
        prompt: ``usage.prompt_tokens``.
        completion: ``usage.completion_tokens``.
        cached: ``usage.prompt_tokens_details.cached_tokens``; omitted when None.
        reasoning: ``usage.completion_tokens_details.reasoning_tokens``; omitted when None.
        timings: llama.cpp ``timings`` (see ``llamacpp_timings``); omitted when None, as OpenAI does.
        model: the chunk's ``model``.
        id: the chunk's ``id``.
    """
    usage: dict[str, Any] = {
        "completion_tokens": completion,
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    chunk: Chunk = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
        "usage": usage,
    }
    if timings is not None:
        chunk["timings"] = dict(timings)
    return chunk


def _framed(body: list[Chunk], *, role_opener: bool, finish: str | None, model: str, id: str) -> list[Chunk]:
    head = [opener_chunk(model=model, id=id)] if role_opener else []
    tail = [finish_chunk(finish, model=model, id=id)] if finish is not None else []
    return head + body + tail


def text_chunks(
    text: str | Sequence[str],
    *,
    role_opener: bool = True,
    finish: str | None = "stop",
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
) -> list[Chunk]:
    """A plain answer: opener, one ``delta.content`` chunk per piece, finish chunk.

    Args:
        text: a string (split into word-sized pieces) or the exact pieces to send.
        role_opener: start with the ``{"role": "assistant", "content": null}`` chunk.
        finish: the finish reason of the closing chunk; None for no closing chunk.
        model: every chunk's ``model``.
        id: every chunk's ``id``.
    """
    body = [delta_chunk({"content": piece}, model=model, id=id) for piece in _pieces(text)]
    return _framed(body, role_opener=role_opener, finish=finish, model=model, id=id)


def reasoning_chunks(
    reasoning: str | Sequence[str],
    *,
    field: str = "reasoning_content",
    role_opener: bool = True,
    finish: str | None = "stop",
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
) -> list[Chunk]:
    """Thinking sent in its own delta field: ``reasoning_content`` (llama.cpp, DeepSeek) or ``reasoning``.

    Args:
        reasoning: a string (split into word-sized pieces) or the exact pieces to send.
        field: the delta field that carries it.
        role_opener: start with the opener chunk.
        finish: the finish reason of the closing chunk; None for no closing chunk.
        model: every chunk's ``model``.
        id: every chunk's ``id``.
    """
    body = [delta_chunk({field: piece}, model=model, id=id) for piece in _pieces(reasoning)]
    return _framed(body, role_opener=role_opener, finish=finish, model=model, id=id)


def _call_parts(call: ToolCall | Mapping[str, Any], index: int) -> tuple[str, str, str]:
    if isinstance(call, ToolCall):
        arguments: Any = call.raw_arguments if call.raw_arguments is not None else call.arguments
        call_id, name = call.id, call.name
    else:
        arguments = call.get("arguments", {})
        call_id, name = call.get("id") or f"call_{index}", call["name"]
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return call_id, name, arguments


def tool_call_chunks(
    calls: Sequence[ToolCall | Mapping[str, Any]],
    *,
    split_arguments_every: int | None = None,
    style: Literal["openai", "llamacpp"] = "openai",
    role_opener: bool = True,
    finish: str | None = "tool_calls",
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
) -> list[Chunk]:
    """Streamed tool calls, one after another, each at its own index.

    The first delta of a call carries ``index``, ``id``, ``type`` and ``function.name``; its ``arguments`` are
    ``""`` (OpenAI) or the first character of the arguments, ``"{"`` (llama.cpp). The rest of the arguments
    follows in fragments carrying only ``index`` and ``function.arguments``.

    Args:
        calls: ``ToolCall`` values, or mappings with ``name``, ``arguments`` (a JSON string sent verbatim,
            or an object to serialise) and optionally ``id`` (default ``call_<n>``).
        split_arguments_every: fragment length in characters; None sends the arguments in one fragment.
        style: which server's first delta to imitate.
        role_opener: start with the opener chunk.
        finish: the finish reason of the closing chunk; None for no closing chunk.
        model: every chunk's ``model``.
        id: every chunk's ``id``.
    """
    if split_arguments_every is not None and split_arguments_every < 1:
        raise ValueError("split_arguments_every must be at least 1")
    body: list[Chunk] = []
    for index, call in enumerate(calls):
        call_id, name, arguments = _call_parts(call, index)
        head, rest = (arguments[:1], arguments[1:]) if style == "llamacpp" else ("", arguments)
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": head},
        }
        body.append(delta_chunk({"tool_calls": [first]}, model=model, id=id))
        step = split_arguments_every or max(len(rest), 1)
        for start in range(0, len(rest), step):
            fragment = {"index": index, "function": {"arguments": rest[start : start + step]}}
            body.append(delta_chunk({"tool_calls": [fragment]}, model=model, id=id))
    return _framed(body, role_opener=role_opener, finish=finish, model=model, id=id)


def stream_of(
    text: str | Sequence[str] = "",
    reasoning: str | Sequence[str] = "",
    tool_calls: Sequence[ToolCall | Mapping[str, Any]] = (),
    finish: str | None = None,
    usage: Chunk | None = None,
    *,
    model: str = DEFAULT_MODEL,
    id: str = DEFAULT_ID,
) -> list[Chunk]:
    """A whole stream in llama.cpp's order: opener, reasoning, text, tool calls, finish, usage.

    Args:
        text: the answer, as a string or the exact pieces.
        reasoning: thinking sent as ``delta.reasoning_content``, before the answer.
        tool_calls: calls streamed after the text, OpenAI style (see ``tool_call_chunks`` for options).
        finish: the finish reason; defaults to ``"tool_calls"`` when there are calls, else ``"stop"``.
        usage: a trailing chunk, usually from ``usage_chunk``.
        model: every chunk's ``model`` (the usage chunk is used as given).
        id: every chunk's ``id``.
    """
    bare: dict[str, Any] = {"role_opener": False, "finish": None, "model": model, "id": id}
    body = reasoning_chunks(reasoning, **bare) + text_chunks(text, **bare)
    if tool_calls:
        body += tool_call_chunks(tool_calls, **bare)
    reason = finish if finish is not None else ("tool_calls" if tool_calls else "stop")
    chunks = _framed(body, role_opener=True, finish=reason, model=model, id=id)
    if usage is not None:
        chunks.append(usage)
    return chunks
