"""Tools for a server that takes none natively: described in the prompt, calls and results written as text.

vLLM started without ``--enable-auto-tool-choice`` refuses any request that carries ``tools``, and some
models behind Ollama do the same. Such a server still runs a model that can call tools when told how, so
the request goes without ``tools``: the system message says which tools exist and how to call one
(Hermes-style ``<tool_call>{...}</tool_call>``, which ``recover_tool_calls`` reads back), and the
transcript's earlier calls and results are written in that same spelling, since a template with no tool
support cannot render tool messages. The description is the same text on every step, so the prompt cache
holds across a run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

from .._nesting import too_deep

__all__ = ["describe_tools", "tools_as_text"]

_PREAMBLE = (
    "You can call the tools listed below. To call one, reply with nothing but a block like\n"
    '<tool_call>{"name": "<tool name>", "arguments": {<the arguments as a JSON object>}}</tool_call>\n'
    "(one block per call) and wait: each result comes back in a <tool_response> block. When no tool is "
    "needed, answer in plain words.\n\nTools:"
)


def describe_tools(tools: Sequence[Any]) -> str:
    """The tools as the prompt tells them: how to call one, then each name, purpose and argument schema."""
    lines = [_PREAMBLE]
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        description = function.get("description")
        head = f"- {function['name']}" + (
            f": {description}" if isinstance(description, str) and description else ""
        )
        lines.append(head)
        parameters = function.get("parameters")
        if isinstance(parameters, Mapping) and parameters:
            schema = json.dumps(parameters, ensure_ascii=False, separators=(",", ":"), default=str)
            lines.append(f"  arguments: {schema}")
    return "\n".join(lines)


def tools_as_text(body: Mapping[str, Any]) -> dict[str, Any]:
    """A request body without ``tools``: the tools described in its system message, calls and results as text.

    ``tool_choice`` and ``parallel_tool_calls`` go with the tools: nothing on the server can honour them.
    """
    out = dict(body)
    tools = out.pop("tools", None)
    tools = tools if isinstance(tools, list) else []
    out.pop("tool_choice", None)
    out.pop("parallel_tool_calls", None)
    messages = out.get("messages")
    if not isinstance(messages, list):
        return out
    described = describe_tools(tools) if tools else ""
    out["messages"] = _with_description(_as_text(messages), described)
    return out


def _with_description(messages: list[Any], described: str) -> list[Any]:
    if not described:
        return messages
    first = messages[0] if messages else None
    if isinstance(first, Mapping) and first.get("role") in ("system", "developer"):
        content = first.get("content")
        if isinstance(content, str):
            return [
                {**first, "content": f"{content}\n\n{described}" if content else described},
                *messages[1:],
            ]
        if isinstance(content, list):
            return [{**first, "content": [*content, {"type": "text", "text": described}]}, *messages[1:]]
    return [{"role": "system", "content": described}, *messages]


def _as_text(messages: list[Any]) -> list[Any]:
    """Assistant tool calls as ``<tool_call>`` blocks, and tool results as one user message per batch."""
    out: list[Any] = []
    results: list[str] = []
    for message in messages:
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "tool":
            results.append(f"<tool_response>\n{_text(message.get('content'))}\n</tool_response>")
            continue
        if results:
            out.append({"role": "user", "content": "\n".join(results)})
            results = []
        listed = message.get("tool_calls") if role == "assistant" else None
        if isinstance(listed, list) and listed:
            calls = [_call_text(call) for call in listed if isinstance(call, Mapping)]
            said = _text(message.get("content"))
            written = "\n".join([said, *calls] if said else calls)
            out.append(
                {key: value for key, value in message.items() if key != "tool_calls"} | {"content": written}
            )
        else:
            out.append(message)
    if results:
        out.append({"role": "user", "content": "\n".join(results)})
    return out


def _call_text(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    arguments = function.get("arguments")
    parsed = arguments
    if isinstance(arguments, str) and not too_deep(arguments):
        with suppress(ValueError, RecursionError):  # unreadable: kept as the text the model wrote
            parsed = json.loads(arguments)
    envelope = {"name": function.get("name"), "arguments": parsed if parsed is not None else {}}
    try:
        written = json.dumps(envelope, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        written = json.dumps(
            {"name": str(function.get("name")), "arguments": str(arguments)}, ensure_ascii=False
        )
    return f"<tool_call>{written}</tool_call>"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return str(content)
