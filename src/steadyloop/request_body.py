"""``build_body``: the chat-completions request one step of the loop sends (public).

Two rules here exist for the prompt cache. Tools are declared in name order, because a chat template
renders the tool block at the head of the prompt and an order that changes between boots (a dict, database
rows, servers connecting in whatever order) throws away the cache for the whole transcript. And the system
prompt is never touched by anything that changes per step.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from .errors import InvalidInput
from .messages import AssistantMessage, Message, UserMessage, to_openai
from .structured import response_schema
from .tools.definition import Tool
from .turn.body import apply_latches
from .turn.capabilities import EndpointCapabilities, ModelCapabilities
from .turn.thinking_budgets import BudgetStyle, budget_fields, budget_tokens, check_budgets
from .wire.schema_compat import relax_tools, sanitize_tools

__all__ = [
    "NEGOTIABLE_FIELDS",
    "RESERVED_FIELDS",
    "SAMPLING_FIELDS",
    "MetadataResolver",
    "ModelParams",
    "RequestMetadata",
    "build_body",
    "droppable_fields",
    "needs_reasoning_replay",
    "order_tools",
]

#: Fields the loop owns; ``extra_body`` never overrides them.
RESERVED_FIELDS = frozenset({"model", "messages", "stream", "tools"})

#: The sampling controls ``ModelParams`` carries as fields, under their request names.
SAMPLING_FIELDS: tuple[str, ...] = (
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "seed",
    "service_tier",
    "stop",
)

#: Fields a refusal drops (latched off for that endpoint and model, with a notice) however the caller set
#: them: the sampling controls, who the request is for, and where the named thinking-budget styles put
#: their budget. A caller who set ``top_k`` gets an answer from a server that does not take it, and is
#: told so by the ``Downgrade`` event and its notice rather than by a failed turn.
NEGOTIABLE_FIELDS: frozenset[str] = frozenset(
    {
        *SAMPLING_FIELDS,
        "metadata",
        "user",
        "thinking_budget_tokens",
        "thinking",
        "thinking_budget",
        "enable_thinking",
        "reasoning",
        "extra_body",
    }
)

_REPLAY = re.compile(r"gpt-oss|deepseek", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RequestMetadata:
    """Who and what a request is for, as the endpoint records it.

    Attributes:
        metadata: sent as ``metadata`` (OpenAI keeps up to 16 string pairs with a stored completion).
        user: sent as ``user``: an end-user identifier for the provider's abuse monitoring.
    """

    metadata: Mapping[str, Any] | None = None
    user: str | None = None


#: Called for every request with the model name; what it returns is sent with that request.
MetadataResolver: TypeAlias = Callable[[str], RequestMetadata | None]


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
        top_p, top_k, min_p, presence_penalty, frequency_penalty, repetition_penalty, seed, service_tier,
        stop: sampling controls, sent under these names when set. Each is negotiated like the fields
            above: a server that refuses one (``Unrecognized request argument supplied: top_k``) gets the
            request again without it, and the refusal is latched for that (endpoint, model), told once
            as a ``Downgrade`` event and a ``Notice`` naming the field. A refused *value* (out of range)
            is not dropped: it fails the turn with the server's words. Setting one here and in
            ``extra_body`` as well is an ``InvalidInput``.
        thinking_budget: for a server that takes a token budget for thinking rather than an effort: where
            the budget goes (``"llama.cpp"``, ``"anthropic"``, ``"gemini"``, ``"qwen"``, ``"openrouter"``,
            or a function from tokens to fields). The budget is sent instead of ``reasoning_effort``; if
            the server refuses it, the effort is sent instead from then on.
        thinking_budgets: tokens per level, over ``DEFAULT_THINKING_BUDGETS`` (``none`` is 0: off).
        metadata: who the request is for (``RequestMetadata``), or a resolver called for every request.
        side_effort: the reasoning effort side tasks of a run (fold summaries) ask for; ``None`` sends
            none. It goes through the same latches, so a rung this model refused is never sent.
    """

    model: str
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    response_format: Mapping[str, Any] | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    reasoning_replay: bool | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    service_tier: str | None = None
    stop: str | Sequence[str] | None = None
    thinking_budget: BudgetStyle | None = None
    thinking_budgets: Mapping[str, int] | None = None
    metadata: RequestMetadata | MetadataResolver | None = None
    side_effort: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.extra_body, Mapping):
            raise InvalidInput(f"extra_body must be a mapping of request fields, got {self.extra_body!r}")
        if self.reasoning_effort is not None and not isinstance(self.reasoning_effort, str):
            raise InvalidInput(
                f"reasoning_effort must be a string such as 'low', got {self.reasoning_effort!r}"
            )
        for name in ("top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            ):
                raise InvalidInput(f"{name} must be a finite number, got {value!r}")
        for name in ("top_k", "seed"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidInput(f"{name} must be a whole number, got {value!r}")
        if self.service_tier is not None and not isinstance(self.service_tier, str):
            raise InvalidInput(f"service_tier must be a string, got {self.service_tier!r}")
        stop = self.stop
        if stop is not None and not isinstance(stop, str):
            if not isinstance(stop, Sequence) or not all(isinstance(s, str) for s in stop):
                raise InvalidInput(f"stop must be a string or a list of strings, got {stop!r}")
            object.__setattr__(self, "stop", tuple(stop))
        both = [
            name for name in SAMPLING_FIELDS if getattr(self, name) is not None and name in self.extra_body
        ]
        if both:
            raise InvalidInput(f"{', '.join(both)} set both as a field and in extra_body; set it once")
        check_budgets(self.thinking_budgets)
        if self.thinking_budget is not None and not callable(self.thinking_budget):
            budget_fields(self.thinking_budget, 0)  # an unknown style fails here, not mid-run


def droppable_fields(params: ModelParams) -> frozenset[str]:
    """The fields a request built from ``params`` may go without when the endpoint refuses them.

    ``extra_body`` keys, ``prompt_cache_key``, ``NEGOTIABLE_FIELDS`` and ``response_format`` (whose schema
    is then stated in the prompt, and the answer still checked against it); never the loop's own fields.
    """
    return frozenset(params.extra_body) | NEGOTIABLE_FIELDS | {"prompt_cache_key", "response_format"}


def _format_stated(messages: list[Any], response_format: Mapping[str, Any]) -> list[Any]:
    """The messages with the response schema stated in the system message, for an endpoint that refused
    ``response_format``: the answer is read and checked against it as it would have been (``ask_json``
    falls back the same way)."""
    schema = response_schema(response_format)
    if schema is None:
        return messages
    stated = json.dumps(schema, ensure_ascii=False, sort_keys=True)
    note = f"Answer with one JSON value matching this JSON Schema, and nothing else:\n{stated}"
    first = messages[0] if messages else None
    if isinstance(first, Mapping) and first.get("role") == "system" and isinstance(first.get("content"), str):
        return [{**first, "content": f"{first['content']}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


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
    for name in SAMPLING_FIELDS:
        value = getattr(params, name)
        if value is not None and value != ():
            body[name] = list(value) if isinstance(value, tuple) else value
    budget = _budget(params, model)
    if budget:
        for key, value in budget.items():
            body.setdefault(key, value)
    elif params.reasoning_effort:
        body["reasoning_effort"] = params.reasoning_effort
    tags = _metadata(params)
    if tags is not None:
        if tags.metadata is not None:
            body["metadata"] = dict(tags.metadata)
        if tags.user is not None:
            body["user"] = tags.user
    if params.response_format is not None:
        if model.structured_output and "response_format" not in model.refused_fields:
            body["response_format"] = dict(params.response_format)
        else:
            body["messages"] = _format_stated(body["messages"], params.response_format)
    if prompt_cache_key:
        body["prompt_cache_key"] = prompt_cache_key
    return apply_latches(body, caps, model)


def _budget(params: ModelParams, model: ModelCapabilities) -> dict[str, Any] | None:
    """The thinking-budget fields for this request, or ``None`` to send ``reasoning_effort`` instead."""
    if params.thinking_budget is None:
        return None
    tokens = budget_tokens(params.reasoning_effort, params.thinking_budgets)
    if tokens is None:
        return None
    fields = budget_fields(params.thinking_budget, tokens)
    # A server that refused the budget's field is asked with the effort from then on.
    if any(key in model.refused_fields for key in fields):
        return None
    return fields


def _metadata(params: ModelParams) -> RequestMetadata | None:
    found = params.metadata
    if found is None or isinstance(found, RequestMetadata):
        return found
    resolved = found(params.model)
    if resolved is not None and not isinstance(resolved, RequestMetadata):
        raise InvalidInput(f"a metadata resolver must return RequestMetadata or None, got {resolved!r}")
    return resolved
