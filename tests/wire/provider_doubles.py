"""One test double per wire, built from recorded provider sequences (tests/data/providers, README there
says where each came from) or, for the OpenAI-compatible wire, from the chunk builders.

Each double answers the same questions for the behaviour suite: which reply is a plain answer, a streamed
call with its arguments in pieces, two parallel calls, thinking then a call, a refusal, an overflow in
the provider's own words, a 429 with a retry hint, an overloaded provider; and what the suite should then
see.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steadyloop.testing.chunks import (
    finish_chunk,
    opener_chunk,
    reasoning_chunks,
    stream_of,
    text_chunks,
    tool_call_chunks,
)
from steadyloop.testing.provider_streams import (
    anthropic_events,
    anthropic_stream,
    gemini_chunks,
    gemini_stream,
    sse_reply,
)
from steadyloop.testing.replies import Reply, ScriptedReply

DATA = Path(__file__).parent.parent / "data" / "providers"


def _errors(provider: str) -> list[dict[str, Any]]:
    path = DATA / provider / "errors.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def recorded_events(path: Path) -> list[bytes]:
    """The event payloads of a ``*.chunks.jsonl`` recording, each line's bytes as the source kept them."""
    return [line for line in path.read_bytes().split(b"\n") if line.strip()]


def framed(payloads: list[bytes], *, api: str) -> ScriptedReply:
    """Recorded payloads framed as their API frames events (the recording kept no framing): Anthropic's
    ``event: <type>`` and ``data:`` lines apart by ``\n``, Gemini's ``data:`` lines apart by CRLF."""
    frames = []
    for payload in payloads:
        if api == "anthropic":
            kind = json.loads(payload)["type"]
            frames.append(b"event: " + kind.encode() + b"\ndata: " + payload + b"\n\n")
        else:
            frames.append(b"data: " + payload + b"\r\n\r\n")
    return sse_reply(b"".join(frames))


def error_reply(provider: str, number: int) -> ScriptedReply:
    """Row ``number`` (from 1) of a provider's errors.jsonl as an HTTP reply."""
    row = _errors(provider)[number - 1]
    headers = {
        k: v
        for k, v in (row["headers"] or {}).items()
        if k.lower() not in ("content-length", "transfer-encoding", "connection")
    }
    headers.setdefault("content-type", "application/json")
    return Reply.raw(row["body"], status=row["status"], headers=headers)


@dataclass(frozen=True)
class Double:
    """A wire's scripted replies and what the suite expects of them."""

    api: str
    model: str
    plain: ScriptedReply
    plain_text: str
    split_call: ScriptedReply
    split_call_name: str
    split_call_arguments: dict[str, Any]
    parallel: ScriptedReply
    parallel_count: int
    thinking_call: ScriptedReply
    thinking_call_name: str
    answer: ScriptedReply
    answer_text: str
    overflow: ScriptedReply
    rate_limited: ScriptedReply
    retry_after: float
    overloaded: ScriptedReply
    overloaded_in_stream: ScriptedReply | None
    refusal: ScriptedReply | None
    signature: str | None  # what the thinking call signed, to be replayed byte for byte
    plain_raw: bytes | None  # a plain answer's raw body, for stalls and cuts

    def say(self, text: str) -> ScriptedReply:
        """A plain answer saying ``text``, in this wire's own stream."""
        if self.api == "anthropic":
            message = {
                "model": self.model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 20, "output_tokens": 9},
            }
            return anthropic_stream(anthropic_events(message))
        if self.api == "gemini":
            response = {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text}]},
                        "finishReason": "STOP",
                        "index": 0,
                    }
                ],
                "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 9, "totalTokenCount": 29},
                "modelVersion": self.model,
            }
            return gemini_stream(gemini_chunks(response))
        return Reply.stream(stream_of(text))

    def plain_with(self, **faults: Any) -> ScriptedReply:
        if self.plain_raw is None:
            return Reply.stream(stream_of("Hello there, friend."), **faults)
        return sse_reply(self.plain_raw, **faults)


def _anthropic() -> Double:
    d = DATA / "anthropic"
    parallel = json.loads((d / "03-parallel-tool-use.nonstream.json").read_text())
    thinking = (d / "04-thinking-then-tool-use.sse").read_bytes()
    signature = next(
        json.loads(line.removeprefix(b"data: "))["delta"]["signature"]
        for line in thinking.splitlines()
        if b"signature_delta" in line
    )
    return Double(
        api="anthropic",
        model="claude-sonnet-4-5",
        plain=sse_reply((d / "01-text.sse").read_bytes()),
        plain_text=_anthropic_text(d / "01-text.sse"),
        split_call=sse_reply((d / "02-tool-use.sse").read_bytes()),
        split_call_name="get_weather",
        split_call_arguments=_anthropic_input(d / "02-tool-use.sse"),
        parallel=anthropic_stream(anthropic_events(parallel)),
        parallel_count=4,
        thinking_call=sse_reply(thinking),
        thinking_call_name="get_temperature",
        answer=sse_reply((d / "05-thinking-text.sse").read_bytes()),
        answer_text=_anthropic_text(d / "05-thinking-text.sse"),
        overflow=error_reply("anthropic", 1),
        rate_limited=error_reply("anthropic", 7),
        retry_after=8.0,
        overloaded=error_reply("anthropic", 9),
        overloaded_in_stream=sse_reply((d / "10-error-event-overloaded.reconstructed.sse").read_bytes()),
        refusal=sse_reply((d / "07-refusal.sse").read_bytes()),
        signature=signature,
        plain_raw=(d / "01-text.sse").read_bytes(),
    )


def _anthropic_events(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix(b"data: "))
        for line in path.read_bytes().splitlines()
        if line.startswith(b"data: ")
    ]


def _anthropic_text(path: Path) -> str:
    return "".join(
        e["delta"]["text"]
        for e in _anthropic_events(path)
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "text_delta"
    )


def _anthropic_input(path: Path) -> dict[str, Any]:
    text = "".join(
        e["delta"]["partial_json"]
        for e in _anthropic_events(path)
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "input_json_delta"
    )
    value: dict[str, Any] = json.loads(text)
    return value


def _openai() -> Double:
    rows = json.loads((Path(__file__).parent.parent / "data" / "error_bodies" / "openai.json").read_text())
    overflow = next(r for r in rows if r["expected"].get("kind") == "context_overflow")
    split = tool_call_chunks(
        [{"id": "call_w1", "name": "get_weather", "arguments": {"location": "Paris, France"}}],
        split_arguments_every=6,
    )
    parallel = tool_call_chunks(
        [
            {"id": "call_a", "name": "retrieve_entity_info", "arguments": {"name": "Alice"}},
            {"id": "call_b", "name": "retrieve_entity_info", "arguments": {"name": "Bob"}},
        ]
    )
    thinking = [
        *reasoning_chunks("The user wants the temperature; I will call the tool.", finish=None),
        *tool_call_chunks([{"id": "call_t", "name": "get_temperature", "arguments": {"city": "Utrecht"}}])[
            1:
        ],
    ]
    rate = {
        "error": {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    busy = {"error": {"message": "The server is overloaded or not ready yet.", "type": "server_error"}}
    return Double(
        api="openai",
        model="gpt-4o",
        plain=Reply.stream(stream_of("Hello there, friend.")),
        plain_text="Hello there, friend.",
        split_call=Reply.stream(split),
        split_call_name="get_weather",
        split_call_arguments={"location": "Paris, France"},
        parallel=Reply.stream(parallel),
        parallel_count=2,
        thinking_call=Reply.stream(thinking),
        thinking_call_name="get_temperature",
        answer=Reply.stream(text_chunks("It is 12 degrees in Utrecht.")),
        answer_text="It is 12 degrees in Utrecht.",
        overflow=Reply.json(overflow["body"], status=overflow["status"]),
        rate_limited=Reply.json(rate, status=429, headers={"retry-after": "8"}),
        retry_after=8.0,
        overloaded=Reply.json(busy, status=503),
        # An error after the stream began, as an OpenAI-compatible router sends one: a chunk carrying
        # ``error`` and finish_reason "error" (OpenRouter's documented shape, openrouter.ai/docs/api/errors
        # and "Handling Errors During Streaming" in its streaming reference).
        overloaded_in_stream=Reply.stream(
            [
                opener_chunk(),
                {
                    "id": "cmpl-abc123",
                    "object": "chat.completion.chunk",
                    "created": 1234567890,
                    "model": "gpt-4o",
                    "provider": "openai",
                    "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
                    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
                },
            ]
        ),
        # OpenAI's chat-completions refusal: the words in ``delta.refusal``, no content.
        refusal=Reply.stream(
            [
                opener_chunk(),
                {"choices": [{"index": 0, "delta": {"refusal": "I'm sorry, I can't help with that."}}]},
                finish_chunk("stop"),
            ]
        ),
        signature=None,
        plain_raw=None,
    )


def _gemini() -> Double:
    d = DATA / "gemini"
    thinking = (d / "03-function-call-thought-signature.sse").read_bytes()
    signature = json.loads(thinking.split(b"\r\n\r\n")[0].removeprefix(b"data: "))["candidates"][0][
        "content"
    ]["parts"][0]["thoughtSignature"]
    parallel = json.loads((d / "06-parallel-function-calls.nonstream.json").read_text())
    safety = json.loads((d / "08-finish-safety.nonstream.json").read_text())
    return Double(
        api="gemini",
        model="gemini-3-pro-preview",
        plain=sse_reply((d / "01-text.sse").read_bytes()),
        plain_text=_gemini_text(d / "01-text.sse"),
        # Gemini sends a call's arguments whole, in one chunk: there are no pieces to join.
        split_call=sse_reply((d / "02-function-call.sse").read_bytes()),
        split_call_name="get_capital",
        split_call_arguments={"country": "France"},
        parallel=gemini_stream(gemini_chunks(parallel)),
        parallel_count=3,
        thinking_call=sse_reply(thinking),
        thinking_call_name="get_country",
        answer=sse_reply((d / "04-thinking.sse").read_bytes()),
        answer_text=_gemini_text(d / "04-thinking.sse"),
        overflow=error_reply("gemini", 1),
        rate_limited=error_reply("gemini", 4),
        retry_after=26.0,
        overloaded=error_reply("gemini", 5),
        # Gemini's 503 UNAVAILABLE body as an event of a stream that showed nothing yet.
        overloaded_in_stream=gemini_stream([json.loads(_errors("gemini")[4]["body"])]),
        refusal=gemini_stream(gemini_chunks(safety)),
        signature=signature,
        plain_raw=(d / "01-text.sse").read_bytes(),
    )


def _gemini_text(path: Path) -> str:
    text = []
    for frame in path.read_bytes().split(b"\r\n\r\n"):
        if not frame.startswith(b"data: "):
            continue
        chunk = json.loads(frame.removeprefix(b"data: "))
        for part in chunk["candidates"][0].get("content", {}).get("parts", []):
            if "text" in part and not part.get("thought"):
                text.append(part["text"])
    return "".join(text)


DOUBLES = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini}
