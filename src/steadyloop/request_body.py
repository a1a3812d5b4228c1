"""``build_body``: the chat-completions request one step of the loop sends.

Two rules here exist for the prompt cache. Tools are declared in name order, because a chat template
renders the tool block at the head of the prompt and an order that changes between boots (a dict, database
rows, servers connecting in whatever order) throws away the cache for the whole transcript. And the system
prompt is never touched by anything that changes per step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .messages import AssistantMessage, Message, UserMessage, to_openai
from .tools.definition import Tool
from .tools.schema_compat import relax_tools, sanitize_tools
from .turn.body import apply_latches
from .turn.capabilities import EndpointCapabilities, ModelCapabilities

__all__ = ["RESERVED_FIELDS", "ModelParams", "build_body", "needs_reasoning_replay", "order_tools"]

#: Fields the loop owns; ``extra_body`` never overrides them.
RESERVED_FIELDS = frozenset({"model", "messages", "stream", "tools"})

_REPLAY = re.compile(r"gpt-oss|deepseek", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ModelParams:
    """What to ask the model for.

    Attributes:
        model: the model name as the endpoint knows it.
        temperature: sent unless the model turned out to pick its own.
        max_tokens: the reply ceiling (spelled as the model wants it).
        reasoning_effort: ``none`` .. ``high`` (walked upward when refused), ``"off"`` or ``None`` for none.
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or a named-function object.
        response_format: hold the final answer to a JSON schema (``{"type": "json_schema", ...}``).
        extra_body: anything else the server takes (``top_k``, ``min_p``, ``id_slot``, ``cache_prompt`` ...);
            merged last, never over the loop's own fields, and each key droppable when refused.
        reasoning_replay: send the reasoning behind a tool call back with it; ``None`` decides by model
            family (gpt-oss and DeepSeek read it back; other models are better off without it).
    """

    model: str
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    response_format: Mapping[str, Any] | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    reasoning_replay: bool | None = None


def needs_reasoning_replay(params: ModelParams) -> bool:
    """Whether this model reads the reasoning behind its tool calls back on the next request."""
    if params.reasoning_replay is not None:
        return params.reasoning_replay
    return bool(_REPLAY.search(params.model))


def order_tools(tools: Sequence[Tool], order: bool | Callable[[Tool], Any] = True) -> list[Tool]:
    """Tools in the order a request declares them: by name, the caller's order, or a key of the caller's."""
    if order is True:
        return sorted(tools, key=lambda t: t.name)
    if order is False:
        return list(tools)
    return sorted(tools, key=order)


def _messages(messages: Sequence[Message], replay: bool) -> list[dict[str, Any]]:
    last_user = -1
    if replay:
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], UserMessage):
                last_user = i
                break
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        # The reasoning behind a call is replayed only within the exchange still under way: once the
        # model has answered the question, it is context paid for on every turn for nothing.
        keep = replay and i > last_user and isinstance(message, AssistantMessage) and bool(message.tool_calls)
        out.append(to_openai(message, reasoning_field="reasoning_content" if keep else None))
    return out


class ToolBlock:
    """The declared tool definitions of a set of tools, sanitised once and kept while the set is the same."""

    __slots__ = ("_key", "_relaxed", "_strict")

    def __init__(self) -> None:
        self._key: tuple[int, ...] = ()
        self._strict: list[dict[str, Any]] = []
        self._relaxed: list[dict[str, Any]] | None = None

    def definitions(self, tools: Sequence[Tool], strict: bool) -> list[dict[str, Any]]:
        key = tuple(id(t) for t in tools)
        if key != self._key:
            self._key = key
            self._strict = sanitize_tools([t.definition() for t in tools])
            self._relaxed = None
        if strict:
            return self._strict
        if self._relaxed is None:
            self._relaxed = relax_tools(self._strict)
        return self._relaxed


def build_body(
    params: ModelParams,
    system: str | None,
    messages: Sequence[Message],
    tools: Sequence[Tool],
    caps: EndpointCapabilities,
    model: ModelCapabilities,
    *,
    block: ToolBlock | None = None,
    prompt_cache_key: str | None = None,
) -> dict[str, Any]:
    """The request body for one step, rebuilt from the latches.

    Args:
        params: what to ask the model for.
        system: the system prompt, sent first.
        messages: the transcript (already checked for integrity).
        tools: the tools to declare, in the order to declare them.
        caps: the endpoint's latches (strict or relaxed tool schemas).
        model: the model's latches (token-limit spelling, temperature, effort, refused fields).
        block: a cache of sanitised definitions, reused across steps.
        prompt_cache_key: sent where the endpoint takes it (routes a session's requests to one cache).
    """
    body: dict[str, Any] = {}
    for key, value in params.extra_body.items():
        if key not in RESERVED_FIELDS:
            body[key] = value
    body["model"] = params.model
    wire = _messages(messages, needs_reasoning_replay(params))
    body["messages"] = [{"role": "system", "content": system}, *wire] if system else wire
    if tools:
        body["tools"] = (block or ToolBlock()).definitions(tools, caps.strict_schemas)
        if params.tool_choice is not None:
            body["tool_choice"] = params.tool_choice
    if params.temperature is not None and "temperature" not in params.extra_body:
        body["temperature"] = params.temperature
    if params.max_tokens is not None:
        body["max_tokens"] = params.max_tokens
    if params.reasoning_effort:
        body["reasoning_effort"] = params.reasoning_effort
    if params.response_format is not None:
        body["response_format"] = dict(params.response_format)
    if prompt_cache_key:
        body["prompt_cache_key"] = prompt_cache_key
    return apply_latches(body, caps, model)
