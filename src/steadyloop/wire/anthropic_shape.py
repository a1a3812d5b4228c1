"""The Anthropic Messages shape, sans I/O: the runtime's request in, Anthropic's request out; its stream
events in, chat-completions chunks out.

The request the turn layer builds is chat-completions-shaped. Here it becomes a Messages request: system
text in its own field, tool results as ``tool_result`` blocks (with ``is_error``) in user turns, calls as
``tool_use`` blocks, signed thinking replayed unchanged ahead of the text and calls it preceded, and
prompt-cache breakpoints where a growing conversation reuses the most (the tool block, the system text,
the end of the previous request's conversation and the end of this one: four, Anthropic's most).

What a model accepts depends on its generation: from 4.6 on, thinking is adaptive with an effort level and
temperature is refused; 5.x models always think. Before 4.6, thinking takes a token budget and no
temperature other than the default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import EndpointRefused, ModelRefusal
from ..messages import SignedThinking
from .failures import classify_failure
from .openai_chat import DONE, error_for_failure

__all__ = ["AnthropicEvents", "anthropic_request", "claude_generation"]

#: The reply ceiling when the caller set none: Messages requires one.
DEFAULT_MAX_TOKENS = 8192
#: Anthropic's smallest thinking budget.
MIN_THINKING_BUDGET = 1024
#: Breakpoints one request may carry.
MAX_BREAKPOINTS = 4

_EPHEMERAL = {"type": "ephemeral"}
# claude-opus-4-6, claude-sonnet-4-5-20250929, claude-3-7-sonnet-latest, claude-fable-5-1
_NEW_STYLE = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:-(\d))?(?:\b|-|$)")
_OLD_STYLE = re.compile(r"claude-(\d+)(?:-(\d))?-[a-z]")
_STOPS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "pause_turn": "pause_turn",
}
# Thinking tokens an effort level is worth before 4.6 (the levels of steadyloop's thinking budgets).
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768, "max": 32768}
_COUNTS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "max", "max": "max"}


def claude_generation(model: str) -> tuple[int, int]:
    """(major, minor) of a Claude model name; ``(99, 0)`` for a name that says none (assume the newest)."""
    name = model.lower()
    match = _OLD_STYLE.search(name) or _NEW_STYLE.search(name)
    if match is None:
        return (99, 0)
    major = int(match.group(1))
    if major > 50:  # a date, not a version (claude-sonnet-20250929)
        return (99, 0)
    return (major, int(match.group(2) or 0))


def anthropic_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """The Messages request for a chat-completions-shaped ``body``; ``stream`` is left to the sender."""
    model = str(body.get("model") or "")
    generation = claude_generation(model)
    adaptive = generation >= (4, 6)
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for raw in _items(body.get("messages")):
        if not isinstance(raw, Mapping):
            continue
        role = raw.get("role")
        if role in ("system", "developer") and not turns:
            text = _text(raw.get("content"))
            if text:
                system.append({"type": "text", "text": text})
            continue
        if role == "assistant":
            _append(turns, "assistant", _assistant_blocks(raw))
        elif role == "tool":
            _append(turns, "user", [_tool_result(raw)])
        elif role in ("system", "developer"):
            # An instruction mid-conversation: Messages has one system field, so it is said in a user turn.
            _append(turns, "user", [{"type": "text", "text": f"[system] {_text(raw.get('content'))}"}])
        else:
            _append(turns, "user", _user_blocks(raw.get("content")))

    out: dict[str, Any] = {"model": model}
    ceiling = body.get("max_tokens", body.get("max_completion_tokens"))
    max_tokens = ceiling if isinstance(ceiling, int) and ceiling > 0 else DEFAULT_MAX_TOKENS
    thinking, effort = _thinking(body, generation, adaptive)
    if thinking is not None and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and budget >= max_tokens:
            if ceiling is None:
                max_tokens = budget + DEFAULT_MAX_TOKENS
            elif max_tokens - 1 >= MIN_THINKING_BUDGET:
                thinking = {"type": "enabled", "budget_tokens": max_tokens - 1}
            else:
                thinking = None
    out["max_tokens"] = max_tokens
    if thinking is not None:
        out["thinking"] = thinking
    output_config: dict[str, Any] = {}
    if effort is not None:
        output_config["effort"] = effort
    schema = _schema_of(body.get("response_format"))
    if schema is not None:
        output_config["format"] = {"type": "json_schema", "schema": schema}
    if output_config:
        out["output_config"] = output_config
    if system:
        out["system"] = system
    out["messages"] = turns
    tools = [_tool(t) for t in _items(body.get("tools")) if isinstance(t, Mapping)]
    tools = [t for t in tools if t is not None]
    if tools:
        out["tools"] = tools
        choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None and thinking is not None and choice["type"] in ("any", "tool"):
            # A thinking model refuses forced tool use; it is offered the tools and left to choose.
            choice = {k: v for k, v in choice.items() if k != "name"} | {"type": "auto"}
        if choice is not None:
            out["tool_choice"] = choice
    thinks = thinking is not None
    # No sampling knobs where the model refuses them: every 4.6+ model refuses temperature, and a model
    # thinking takes neither temperature nor top_k.
    if not adaptive and not thinks:
        for name in ("temperature", "top_p", "top_k"):
            value = body.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = value
    stop = body.get("stop")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop) and stop:
        out["stop_sequences"] = list(stop)
    user = body.get("user")
    if isinstance(user, str) and user:
        out["metadata"] = {"user_id": user}
    _place_breakpoints(out)
    return out


def _thinking(
    body: Mapping[str, Any], generation: tuple[int, int], adaptive: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """The ``thinking`` field and effort level the request asks for, as this generation spells them."""
    given = body.get("thinking")
    if isinstance(given, Mapping):
        return dict(given), None
    effort = body.get("reasoning_effort")
    level = effort if isinstance(effort, str) else None
    always = generation[0] >= 5
    if level in (None, "none", "off"):
        return ({"type": "adaptive"}, None) if always else (None, None)
    if adaptive:
        return {"type": "adaptive"}, _EFFORTS.get(level or "", "medium")
    tokens = _BUDGETS.get(level or "", _BUDGETS["medium"])
    return {"type": "enabled", "budget_tokens": max(tokens, MIN_THINKING_BUDGET)}, None


def _append(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    # Messages alternates user and assistant: consecutive results and a following user text are one turn.
    if not blocks:
        blocks = [{"type": "text", "text": "(empty)"}]
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": list(blocks)})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    return ""


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": str(part["text"])})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if isinstance(url, str):
                blocks.append({"type": "image", "source": _image_source(url)})
    return blocks


def _image_source(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": head or "image/png", "data": data}
    return {"type": "url", "url": url}


def _assistant_blocks(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    # Signed thinking first, exactly as it came: Anthropic checks the signature against the bytes.
    for entry in _items(raw.get("thinking_blocks")):
        block = SignedThinking.from_dict(entry)
        if block is None or block.provider != "anthropic":
            continue
        if block.redacted:
            blocks.append({"type": "redacted_thinking", "data": block.redacted})
        else:
            blocks.append({"type": "thinking", "thinking": block.text, "signature": block.signature})
    text = _text(raw.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for n, call in enumerate(_items(raw.get("tool_calls"))):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        blocks.append(
            {
                "type": "tool_use",
                "id": str(call.get("id") or f"call_{n}"),
                "name": str(fn.get("name") or ""),
                "input": _arguments(fn.get("arguments")),
            }
        )
    return blocks


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str) and raw.strip():
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _tool_result(raw: Mapping[str, Any]) -> dict[str, Any]:
    content = raw.get("content")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(raw.get("tool_call_id") or "")}
    if isinstance(content, list):
        block["content"] = _user_blocks(content) or [{"type": "text", "text": "(empty)"}]
    else:
        block["content"] = content if isinstance(content, str) and content else "(empty)"
    if raw.get("is_error") is True:
        block["is_error"] = True
    return block


def _tool(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    fn = raw.get("function") if raw.get("type", "function") == "function" else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        return None
    schema = fn.get("parameters")
    tool: dict[str, Any] = {
        "name": fn["name"],
        "input_schema": dict(schema) if isinstance(schema, Mapping) else {"type": "object", "properties": {}},
    }
    if isinstance(fn.get("description"), str) and fn["description"]:
        tool["description"] = fn["description"]
    return tool


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    out: dict[str, Any] | None = None
    if choice == "auto":
        out = {"type": "auto"}
    elif choice == "required":
        out = {"type": "any"}
    elif choice == "none":
        out = {"type": "none"}
    elif isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        if isinstance(name, str):
            out = {"type": "tool", "name": name}
    if parallel is False:
        out = out or {"type": "auto"}
        if out["type"] != "none":
            out["disable_parallel_tool_use"] = True
    return out


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return None
    inner = response_format.get("json_schema")
    schema = inner.get("schema") if isinstance(inner, Mapping) else None
    return dict(schema) if isinstance(schema, Mapping) else None


def _place_breakpoints(request: dict[str, Any]) -> None:
    """Mark where the prompt cache should be written and read, at most ``MAX_BREAKPOINTS`` marks.

    The tool block and the system text change least, so each ends in a mark. Then the conversation: a
    mark at the end of this request writes all of it, and a mark at the end of the previous request's
    conversation (the user turn before the last reply) reads what that request wrote, however many
    blocks this step added since.
    """
    left = MAX_BREAKPOINTS
    tools = request.get("tools")
    if tools:
        tools[-1]["cache_control"] = dict(_EPHEMERAL)
        left -= 1
    system = request.get("system")
    if system:
        system[-1]["cache_control"] = dict(_EPHEMERAL)
        left -= 1
    turns = request["messages"]
    users = [n for n, t in enumerate(turns) if t["role"] == "user"]
    marks = [len(turns) - 1] if turns else []
    if len(users) >= 2 and users[-2] != len(turns) - 1:
        marks.append(users[-2])
    for n in marks[:left]:
        _mark_last_block(turns[n]["content"])


def _mark_last_block(blocks: list[dict[str, Any]]) -> None:
    for block in reversed(blocks):
        if block.get("type") not in ("thinking", "redacted_thinking"):
            block["cache_control"] = dict(_EPHEMERAL)
            return


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
    """

    def __init__(self, *, endpoint: str | None = None, model: str | None = None) -> None:
        self.endpoint = endpoint
        self.model = model
        self.usage: dict[str, int] = {}
        self._total: dict[str, int] = {}
        self.stop_reason = ""
        self.paused = False
        self.content: list[dict[str, Any]] = []
        self.skipped = 0
        self._blocks: dict[int, dict[str, Any]] = {}
        self._calls: dict[int, int] = {}
        self._json: dict[int, list[str]] = {}
        self._next_call = 0

    def feed(self, event: Mapping[str, Any]) -> list[Any]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            self.paused = False
            self.content = []
            self._fold_usage()
            if isinstance(message, Mapping) and isinstance(message.get("usage"), Mapping):
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
                {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
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

    def _start(self, event: Mapping[str, Any]) -> list[Any]:
        index = event.get("index")
        block = event.get("content_block")
        if not isinstance(index, int) or not isinstance(block, Mapping):
            self.skipped += 1
            return []
        held = dict(block)
        self._blocks[index] = held
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
        return []  # redacted thinking and server-side blocks are kept whole at their stop

    def _delta(self, event: Mapping[str, Any]) -> list[Any]:
        index = event.get("index")
        delta = event.get("delta")
        block = self._blocks.get(index) if isinstance(index, int) else None
        if block is None or not isinstance(delta, Mapping):
            self.skipped += 1
            return []
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if isinstance(text, str) and text:
                block["text"] = str(block.get("text") or "") + text
                return [_content(text)]
            return []
        if kind == "thinking_delta":
            text = delta.get("thinking")
            if isinstance(text, str) and text:
                block["thinking"] = str(block.get("thinking") or "") + text
                return [_reasoning(text)]
            return []
        if kind == "signature_delta":
            signature = delta.get("signature")
            if isinstance(signature, str):
                block["signature"] = str(block.get("signature") or "") + signature
            return []
        if kind == "input_json_delta" and isinstance(index, int) and index in self._calls:
            part = delta.get("partial_json")
            if isinstance(part, str) and part:
                self._json[index].append(part)
                return [_calls([{"index": self._calls[index], "function": {"arguments": part}}])]
            return []
        if kind not in ("citations_delta", "compaction_delta"):
            self.skipped += 1
        return []

    def _stop(self, event: Mapping[str, Any]) -> list[Any]:
        index = event.get("index")
        block = self._blocks.pop(index, None) if isinstance(index, int) else None
        if block is None:
            return []
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
                arguments = json.dumps(given, ensure_ascii=False)
                out.append(_calls([{"index": self._calls[index], "function": {"arguments": arguments}}]))
            block["input"] = _arguments("".join(parts)) if parts else dict(given or {})
        self.content.append(block)
        return out

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


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


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
