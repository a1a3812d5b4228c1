"""Anthropic Messages stream events read into chat-completions chunks, sans I/O.

Text becomes ``delta.content``, thinking ``delta.reasoning_content``, a finished thinking block (with its
signature) or a redacted one ``delta.thinking_blocks``, a ``tool_use`` block ``delta.tool_calls`` with its
input in the pieces it came in. A tool Anthropic runs itself (``server_tool_use``, ``mcp_tool_use``) is no
call of ours: its input is joined from its pieces and kept with the reply's blocks, which a paused turn
sends back as they came. Usage is counted the way chat completions counts it: the prompt whole
(uncached, cache writes and cache reads), cache reads as cached tokens and writes on their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import EndpointRefused, ModelRefusal
from ...messages import SignedThinking
from ..call_arguments import arguments_text
from ..failures import classify_failure
from ..sse import DONE
from ..typed_errors import error_for_failure
from .shape import arguments_of

__all__ = ["AnthropicEvents"]

_STOPS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "pause_turn": "pause_turn",
}
_COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class AnthropicEvents:
    """Reads Messages stream events (as JSON objects) into chat-completions chunks, sans I/O.

    ``feed`` returns the chunks one event makes: text as ``delta.content``, thinking as
    ``delta.reasoning_content``, a finished thinking block whole as ``delta.thinking_blocks`` (with its
    signature), calls as ``delta.tool_calls``, and at ``message_stop`` the finish reason, the usage
    (the prompt counted whole: uncached, cache writes and cache reads) and ``DONE``.

    A ``pause_turn`` stop ends with no ``DONE``: ``paused`` is set and ``content`` holds the reply so far
    as Messages blocks, for the request that continues it. Call indexes run on across such requests.

    Raises (from ``feed``):
        ModelRefusal: the reply stopped with ``stop_reason: refusal``.
        EndpointRefused: an ``error`` event (normally raised by the SDK before it gets here).
        EndpointUnreadable: a ``tool_use`` block's whole input cannot be written back as JSON.
    """

    def __init__(self, *, endpoint: str | None = None, model: str | None = None) -> None:
        self.endpoint = endpoint
        self.model = model
        self.usage: dict[str, int] = {}
        self._total: dict[str, int] = {}
        self.stop_reason = ""
        # The message's id and the model that wrote it, from ``message_start``; they go out on the finish.
        self.identity: dict[str, str] = {}
        self.paused = False
        self.content: list[dict[str, Any]] = []
        self.skipped = 0
        self._blocks: dict[int, dict[str, Any]] = {}
        # A block's text, thinking and signature in the pieces they came in, joined at the block's stop:
        # adding each piece to the block's string would copy the whole text so far, once per piece.
        self._pieces: dict[int, dict[str, list[str]]] = {}
        self._calls: dict[int, int] = {}
        self._json: dict[int, list[str]] = {}
        self._next_call = 0

    def feed(self, event: Mapping[str, Any]) -> list[Any]:
        if not isinstance(event, Mapping):
            self.skipped += 1
            return []
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            self.paused = False
            self.content = []
            self._fold_usage()
            if isinstance(message, Mapping):
                self._identify(message)
                if isinstance(message.get("usage"), Mapping):
                    self._add_usage(message["usage"])
            return []
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_stop":
            return self._stop(event)
        if kind == "message_delta":
            delta = event.get("delta")
            if isinstance(event.get("usage"), Mapping):
                self._add_usage(event["usage"])
            if isinstance(delta, Mapping):
                reason = delta.get("stop_reason")
                if isinstance(reason, str):
                    self.stop_reason = reason
                if reason == "refusal":
                    raise self._refusal(delta.get("stop_details"))
            return []
        if kind == "message_stop":
            if self.stop_reason == "pause_turn":
                self.paused = True
                return []
            finish = _STOPS.get(self.stop_reason, self.stop_reason or "stop")
            return [
                {**self.identity, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                {"choices": [], "usage": self.chat_usage()},
                DONE,
            ]
        if kind == "error":
            failure = classify_failure(None, dict(event))
            raise error_for_failure(
                failure, endpoint=self.endpoint, model=self.model, prefix="in the stream: "
            )
        if kind != "ping":
            self.skipped += 1
        return []

    def _identify(self, message: Mapping[str, Any]) -> None:
        for key in ("id", "model"):
            value = message.get(key)
            if isinstance(value, str) and value:
                self.identity[key] = value

    def _start(self, event: Mapping[str, Any]) -> list[Any]:
        index = event.get("index")
        block = event.get("content_block")
        if not isinstance(index, int) or not isinstance(block, Mapping):
            self.skipped += 1
            return []
        held = dict(block)
        self._blocks[index] = held
        self._pieces[index] = {}
        kind = held.get("type")
        if kind == "text":
            text = held.get("text")
            return [_content(text)] if isinstance(text, str) and text else []
        if kind == "thinking":
            text = held.get("thinking")
            return [_reasoning(text)] if isinstance(text, str) and text else []
        if kind == "tool_use":
            call = self._next_call
            self._next_call += 1
            self._calls[index] = call
            self._json[index] = []
            fragment = {
                "index": call,
                "id": str(held.get("id") or ""),
                "type": "function",
                "function": {"name": str(held.get("name") or ""), "arguments": ""},
            }
            return [_calls([fragment])]
        if isinstance(kind, str) and kind.endswith("_tool_use"):
            # A call Anthropic runs itself (web search, web fetch, code execution, an MCP server's tool):
            # no call of ours, but its input streams in pieces, and a paused turn sends it back exactly.
            self._json[index] = []
        return []  # redacted thinking and results of server-side tools are kept whole at their stop

    def _delta(self, event: Mapping[str, Any]) -> list[Any]:
        index = event.get("index")
        delta = event.get("delta")
        block = self._blocks.get(index) if isinstance(index, int) else None
        if block is None or not isinstance(index, int) or not isinstance(delta, Mapping):
            self.skipped += 1
            return []
        kind = delta.get("type")
        pieces = self._pieces[index]
        if kind == "text_delta":
            text = delta.get("text")
            if isinstance(text, str) and text:
                pieces.setdefault("text", []).append(text)
                return [_content(text)]
            return []
        if kind == "thinking_delta":
            text = delta.get("thinking")
            if isinstance(text, str) and text:
                pieces.setdefault("thinking", []).append(text)
                return [_reasoning(text)]
            return []
        if kind == "signature_delta":
            signature = delta.get("signature")
            if isinstance(signature, str):
                pieces.setdefault("signature", []).append(signature)
            return []
        if kind == "input_json_delta" and index in self._json:
            part = delta.get("partial_json")
            if isinstance(part, str) and part:
                self._json[index].append(part)
                if index in self._calls:
                    return [_calls([{"index": self._calls[index], "function": {"arguments": part}}])]
            return []
        if kind not in ("citations_delta", "compaction_delta"):
            self.skipped += 1
        return []

    def _stop(self, event: Mapping[str, Any]) -> list[Any]:
        index = event.get("index")
        block = self._blocks.pop(index, None) if isinstance(index, int) else None
        if block is None or not isinstance(index, int):
            return []
        for field, parts in self._pieces.pop(index, {}).items():
            block[field] = str(block.get(field) or "") + "".join(parts)
        kind = block.get("type")
        out: list[Any] = []
        if kind == "thinking":
            signed = SignedThinking(
                provider="anthropic",
                text=str(block.get("thinking") or ""),
                signature=str(block.get("signature") or ""),
            )
            out.append(_signed(signed))
        elif kind == "redacted_thinking":
            out.append(_signed(SignedThinking(provider="anthropic", redacted=str(block.get("data") or ""))))
        elif kind == "tool_use" and isinstance(index, int):
            parts = self._json.pop(index, [])
            given = block.get("input")
            if not parts and isinstance(given, Mapping) and given:
                # The input came whole on the block's start, not in pieces.
                arguments = self._written(given)
                out.append(_calls([{"index": self._calls[index], "function": {"arguments": arguments}}]))
            block["input"] = arguments_of("".join(parts)) if parts else arguments_of(given)
        elif index in self._json:
            parts = self._json.pop(index)
            if parts:
                block["input"] = arguments_of("".join(parts))
        self.content.append(block)
        return out

    def _written(self, arguments: Any) -> str:
        return arguments_text(
            arguments, what="a tool_use block's input", endpoint=self.endpoint, model=self.model
        )

    def _add_usage(self, usage: Mapping[str, Any]) -> None:
        # message_delta counts are this message's totals so far, so they replace rather than add. With
        # server-side compaction the top-level counts are the last pass's only; the passes are itemised in
        # ``iterations``, and the request cost their sum.
        passes = usage.get("iterations")
        if isinstance(passes, list) and passes and all(isinstance(p, Mapping) for p in passes):
            usage = {name: sum(_count(p.get(name)) for p in passes) for name in _COUNTS} | {
                "output_tokens_details": usage.get("output_tokens_details")
            }
        for name in _COUNTS:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                self.usage[name] = value
        details = usage.get("output_tokens_details")
        if isinstance(details, Mapping) and isinstance(details.get("thinking_tokens"), int):
            self.usage["thinking_tokens"] = details["thinking_tokens"]

    def _fold_usage(self) -> None:
        # A request that continues a paused reply reports its own counts: the reply's are the sum.
        for name, value in self.usage.items():
            self._total[name] = self._total.get(name, 0) + value
        self.usage = {}

    def chat_usage(self) -> dict[str, Any]:
        """The usage so far in the chat-completions spelling, the prompt counted whole."""
        counts = dict(self._total)
        for name, value in self.usage.items():
            counts[name] = counts.get(name, 0) + value
        read = counts.get("cache_read_input_tokens", 0)
        written = counts.get("cache_creation_input_tokens", 0)
        out: dict[str, Any] = {
            "prompt_tokens": counts.get("input_tokens", 0) + read + written,
            "completion_tokens": counts.get("output_tokens", 0),
            "prompt_tokens_details": {"cached_tokens": read},
            "cache_creation_input_tokens": written,
        }
        if "thinking_tokens" in counts:
            out["completion_tokens_details"] = {"reasoning_tokens": counts["thinking_tokens"]}
        return out

    def _refusal(self, details: Any) -> EndpointRefused:
        category = details.get("category") if isinstance(details, Mapping) else None
        explanation = details.get("explanation") if isinstance(details, Mapping) else None
        named = category if isinstance(category, str) and category else None
        words = f"the model declined to answer (stop_reason refusal, category {named or 'not given'})"
        if isinstance(explanation, str) and explanation:
            words += f": {explanation}"
        return ModelRefusal(words, category=named, endpoint=self.endpoint, model=self.model, body=explanation)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _content(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _reasoning(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"reasoning_content": text}}]}


def _calls(fragments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": list(fragments)}}]}


def _signed(block: SignedThinking) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"thinking_blocks": [block.to_dict()]}}]}
