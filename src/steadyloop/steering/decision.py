"""A routed step's decision, sans I/O: the body that asks it, and the reading of the reply.

The same request (messages and tool block unchanged, so the server's prompt cache serves it) goes out with
a JSON schema that allows exactly one of: a call of one declared tool, with arguments of that tool's
schema; or ``{"name": "answer"}``. Grammar-constrained servers (llama.cpp, vLLM, SGLang) compile the
schema, so the reply is always one of those, and it is asked at temperature 0 (the runtime's own decision,
not the user's sampling). The tool gate's request (``tool_gate.py``) is built here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..turn.capabilities import ModelCapabilities
from ..turn.side_tasks import read_json
from ..usage import Usage
from .defaults import without_defaults
from .examples import GENERIC_EXAMPLES, GateExamples
from .tool_gate import gate_messages, gate_schema
from .which_tool import (
    GENERIC_WHICH_TOOL_EXAMPLES,
    WhichToolExample,
    which_tool_messages,
    which_tool_schema,
)

__all__ = [
    "ANSWER",
    "ANSWER_GRAMMAR",
    "MAX_CALLS",
    "Decision",
    "already_made",
    "arguments_rewritten",
    "calls_for_request",
    "decision_body",
    "decision_schema",
    "declared_default",
    "gate_body",
    "not_made",
    "one_read",
    "ran_tools",
    "read_decision",
    "tool_names",
    "which_tool_body",
]

#: The name the decision gives the choice to answer rather than call.
ANSWER = "answer"

#: llama.cpp's GBNF for an answer that does not open like a call (``{``, a fence, a list, a tag): a model
#: that chose to answer sometimes writes the call it did not choose. Dropped, and latched off, where refused.
ANSWER_GRAMMAR = "root ::= [ \\t\\n]* [^{`\\[< \\t\\n] [^\\x00]*"


#: The most calls one routed step may hold: a request that names several items (three cities, two files)
#: asks for a call each, and a bound stops a model at temperature 0 that repeats one call.
MAX_CALLS = 6


@dataclass(frozen=True, slots=True)
class Decision:
    """What a routed step chose: a call of ``name`` with ``arguments`` (and the ``more`` calls made with it,
    in order), or to answer (``name == ANSWER``)."""

    name: str
    arguments: dict[str, Any]
    more: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def answers(self) -> bool:
        return self.name == ANSWER

    @property
    def calls(self) -> tuple[tuple[str, dict[str, Any]], ...]:
        """Every call decided, in order; none for an answer."""
        return () if self.answers else ((self.name, self.arguments), *self.more)


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        schema = parameters if isinstance(parameters, Mapping) else {"type": "object", "properties": {}}
        found.append((function["name"], schema))
    return found


def arguments_rewritten(
    decision: Decision,
    tools: Sequence[Mapping[str, Any]],
    rewrite: Callable[[str, Any, Mapping[str, Any]], Any],
) -> Decision:
    """``decision`` with each argument of each call as ``rewrite(key, value, spec)`` returns it, ``spec``
    being the argument's schema in the declared tool (empty where it has none); ``decision`` itself when
    nothing changed, and for an answer."""
    if decision.answers:
        return decision
    schemas = dict(tool_names(tools))
    calls: list[tuple[str, dict[str, Any]]] = []
    for name, arguments in decision.calls:
        properties = schemas.get(name, {}).get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        specs = {k: spec if isinstance(spec := properties.get(k), Mapping) else {} for k in arguments}
        calls.append((name, {k: rewrite(k, v, specs[k]) for k, v in arguments.items()}))
    if calls == list(decision.calls):
        return decision
    (name, arguments), *more = calls
    return Decision(name, arguments, tuple(more))


def decision_schema(
    tools: Sequence[Mapping[str, Any]],
    *,
    answer: bool = True,
    only: str | None = None,
    several: bool = False,
) -> dict[str, Any]:
    """The schema of a step's reply: one declared tool's call, or ``{"name": "answer"}``.

    Args:
        tools: the declared tools, as the request body carries them (OpenAI format, already sanitised).
        answer: allow the answer (``False`` is ``tool_choice: "required"``: a call it must be).
        only: allow only this tool's call (a named ``tool_choice``).
        several: the reply is a list of one to :data:`MAX_CALLS` such items, so a request that asks for
            several calls gets them in one step; the answer is then an item of its own.
    """
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": dict(schema)},
            "required": ["name", "arguments"],
        }
        for name, schema in tool_names(tools)
        if name != ANSWER and (only is None or name == only)
    ]
    if answer:
        branches.append({"type": "object", "properties": {"name": {"const": ANSWER}}, "required": ["name"]})
    if several:
        return {"type": "array", "minItems": 1, "maxItems": MAX_CALLS, "items": {"anyOf": branches}}
    return {"anyOf": branches}


def _asked_choice(choice: Any, names: Collection[str]) -> tuple[bool, str | None] | None:
    """``(answer allowed, only tool)`` for a body's ``tool_choice``; ``None`` when there is nothing to route."""
    if choice is None or choice == "auto":
        return True, None
    if choice == "required":
        return False, None
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and name in names:
            return False, name
    return None  # "none", or a choice we cannot read: the step goes as it is


def decision_body(
    body: Mapping[str, Any],
    model: ModelCapabilities,
    *,
    call: bool = False,
    among: Sequence[Mapping[str, Any]] | None = None,
    several: bool = False,
    ceiling: int | None = None,
) -> dict[str, Any] | None:
    """``body`` asked as a decision; ``None`` when there is nothing to decide.

    Nothing to decide: no tools declared, or ``tool_choice`` is ``"none"``. ``"required"`` leaves out the
    answer; a named function leaves only that tool. The messages and tools stay as they are, so the
    server's prompt cache serves the request; the reply is held to :func:`decision_schema` and sampled at
    temperature 0 where the model lets us pick it.

    Args:
        call: a call it must be (the tool gate said so): the answer is left out.
        among: the calls the schema allows, when fewer than the body's tools (those tools, or narrower
            schemas of them); the body's own tools are sent unchanged, for the prompt cache.
        several: the reply may hold several calls (see :func:`decision_schema`).
        ceiling: the most tokens the decision may take, below the body's own reply ceiling. Held to a
            schema, a small model can write a string argument on and on (newline after newline) until the
            window is full: 30 minutes on two CPU cores, for a reply of a few dozen tokens.
    """
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    asked = _asked_choice(body.get("tool_choice"), [n for n, _ in tool_names(tools)])
    if asked is None:
        return None
    answer, only = asked
    answer = answer and not call
    if among is not None and only is not None:
        among = [t for t in among if t.get("function", {}).get("name") == only] or None
    out = dict(body)
    out["tool_choice"] = "none"
    out["response_format"] = {
        "type": "json_schema",
        "json_schema": {
            "name": "step",
            "schema": decision_schema(
                tools if among is None else among, answer=answer, only=only, several=several
            ),
        },
    }
    if model.chosen_temperature:
        out["temperature"] = 0
    if ceiling is not None:
        _hold_to(out, ceiling, "max_tokens" if model.legacy_token_limit else "max_completion_tokens")
    return out


def _hold_to(body: dict[str, Any], ceiling: int, spelling: str) -> None:
    """``body``'s reply ceiling lowered to ``ceiling`` under whichever name it has, else set as ``spelling``."""
    named = [key for key in ("max_tokens", "max_completion_tokens") if key in body]
    for key in named:
        asked = body[key]
        body[key] = min(asked, ceiling) if isinstance(asked, int) and asked > 0 else ceiling
    if not named:
        body[spelling] = ceiling


def read_decision(text: str, tools: Sequence[Mapping[str, Any]]) -> Decision | None:
    """The decision a reply holds; ``None`` when it holds none (the server did not keep to the schema).

    A list (:func:`decision_schema` with ``several``) is read item by item: its calls in order, each once
    (a model at temperature 0 may write one call again and again), an answer only when it holds no call.
    """
    value = read_json(text)
    names = {n for n, _ in tool_names(tools)}
    if isinstance(value, list):
        return _read_items(value[:MAX_CALLS], names)
    return _read_item(value, names)


def _read_item(value: Any, names: Collection[str]) -> Decision | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    name = value["name"]
    if name == ANSWER:
        return Decision(ANSWER, {})
    if name not in names:
        return None
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict):
        return None
    return Decision(name, arguments)


def _read_items(values: list[Any], names: Collection[str]) -> Decision | None:
    calls: list[tuple[str, dict[str, Any]]] = []
    answered = False
    for value in values:
        item = _read_item(value, names)
        if item is None:
            return None
        if item.answers:
            answered = True
        elif item.calls[0] not in calls:
            calls.append(item.calls[0])
    if calls:
        (name, arguments), *more = calls
        return Decision(name, arguments, tuple(more))
    return Decision(ANSWER, {}) if answered else None


def calls_for_request(body: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """``(name, arguments)`` of every call the assistant made since the last user message of ``body``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    made: list[tuple[Any, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "user":
            break
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            made.append((function.get("name"), arguments))
    return made


def already_made(body: Mapping[str, Any], decision: Decision) -> bool:
    """Whether every call of ``decision`` was made already for the request ``body`` ends with."""
    return bool(decision.calls) and not not_made(body, decision)


def not_made(body: Mapping[str, Any], decision: Decision) -> list[tuple[str, dict[str, Any]]]:
    """The calls of ``decision`` not made already for the request ``body`` ends with. A call is made
    already if one of the same name and arguments was, an argument at the default its schema names
    counting as left out (the first may have been sent without it: ``unasked.py``)."""
    tools = body.get("tools")
    schemas = dict(tool_names(tools)) if isinstance(tools, list) else {}

    def seen(name: Any, arguments: Any) -> tuple[Any, Any]:
        schema = schemas.get(name) if isinstance(name, str) else None
        return name, arguments if schema is None else without_defaults(arguments, schema)

    made = [seen(name, arguments) for name, arguments in calls_for_request(body)]
    return [call for call in decision.calls if seen(*call) not in made]


def one_read(first: Usage, then: Usage) -> Usage:
    """Two requests of one step as one: the first read the prompt, the second found it cached.

    The step's usage then reads like any step's (one prompt, both replies), so the cache watch compares
    prompt with prompt.
    """
    both = first + then
    return both.with_(
        prompt_tokens=first.prompt_tokens,
        cached_tokens=first.cached_tokens,
        uncached_tokens=first.uncached_tokens,
        total_tokens=first.prompt_tokens + both.completion_tokens,
    )


def ran_tools(body: Mapping[str, Any]) -> bool:
    """Whether tool results follow the last user message of ``body``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "tool":
            return True
        if role == "user":
            return False
    return False


def gate_body(
    body: Mapping[str, Any], model: ModelCapabilities, examples: GateExamples = GENERIC_EXAMPLES
) -> dict[str, Any] | None:
    """The kinds gate's request for a step's ``body`` (see ``tool_gate.py``); ``None``: nothing to ask."""
    messages = gate_messages(body, examples)
    if messages is None:
        return None
    return _gate_request(body, model, messages, gate_schema(body, examples))


def which_tool_body(
    body: Mapping[str, Any],
    model: ModelCapabilities,
    examples: Sequence[WhichToolExample] = GENERIC_WHICH_TOOL_EXAMPLES,
) -> dict[str, Any] | None:
    """The which-tool gate's request for a step's ``body`` (see ``which_tool.py``); ``None``: nothing to ask."""
    messages = which_tool_messages(body, examples)
    if messages is None:
        return None
    return _gate_request(body, model, messages, which_tool_schema(body))


def _gate_request(
    body: Mapping[str, Any],
    model: ModelCapabilities,
    messages: list[dict[str, Any]],
    schema: Mapping[str, Any],
) -> dict[str, Any]:
    """A gate's question as a request of its own: short, held to ``schema``, at temperature 0."""
    out: dict[str, Any] = {"messages": messages, "max_tokens": 32}
    if "model" in body:
        out["model"] = body["model"]
    out["response_format"] = {"type": "json_schema", "json_schema": {"name": "gate", "schema": dict(schema)}}
    if model.chosen_temperature:
        out["temperature"] = 0
    return out


def declared_default(tools: object, name: str, argument: str) -> object:
    """The default the declared tool ``name`` gives its parameter ``argument`` (``None``: none given)."""
    for declared in tools if isinstance(tools, list) else []:
        function = declared.get("function") if isinstance(declared, Mapping) else None
        if not isinstance(function, Mapping) or function.get("name") != name:
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        schema = properties.get(argument) if isinstance(properties, Mapping) else None
        return schema.get("default") if isinstance(schema, Mapping) else None
    return None
