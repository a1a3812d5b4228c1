"""The Anthropic Messages request, sans I/O: the runtime's chat-completions-shaped request in, Anthropic's
out (its stream is read in ``events``).

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
from collections.abc import Mapping
from typing import Any

from ..._nesting import too_deep
from ...errors import InvalidInput
from ...messages import SignedThinking

__all__ = ["ANTHROPIC_SETTINGS", "anthropic_betas", "anthropic_request", "arguments_of", "claude_generation"]

#: Request fields only the Anthropic wire reads: the beta features sent in the ``anthropic-beta`` header.
ANTHROPIC_SETTINGS: frozenset[str] = frozenset({"anthropic_beta"})
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
# Thinking tokens an effort level is worth before 4.6 (the levels of steadyloop's thinking budgets).
# A beta feature as Anthropic names them (``context-1m-2025-08-07``): what may go in the anthropic-beta header.
_BETA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768, "max": 32768}
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
    if "anthropic_beta" in body:
        betas = anthropic_betas(body["anthropic_beta"])
        if betas:
            # A header, not a body field: the SDK sends extra_headers with the request (and the count).
            out["extra_headers"] = {"anthropic-beta": ",".join(betas)}
    _place_breakpoints(out)
    return out


def anthropic_betas(value: Any) -> list[str]:
    """The beta features a request's ``anthropic_beta`` field names (one name or a list), each once.

    They go out in the ``anthropic-beta`` header; put them in ``ModelParams.extra_body`` (``model.extra_body``
    in an agent document) to ask for a beta on an Anthropic endpoint. The other wires of a failover chain
    are never sent it.

    Raises:
        InvalidInput: the value is not a name or a list of names (letters, digits, ``.``, ``_``, ``-``).
    """
    names = [value] if isinstance(value, str) else value if isinstance(value, list) else None
    if names is None:
        raise InvalidInput(f"anthropic_beta is a beta name or a list of them, got {type(value).__name__}")
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or not _BETA_NAME.fullmatch(name.strip()):
            shown = repr(name)[:80]
            raise InvalidInput(
                f"anthropic_beta: {shown} is no beta feature name (such as context-1m-2025-08-07)"
            )
        if name.strip() not in out:
            out.append(name.strip())
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
                "input": arguments_of(fn.get("arguments")),
            }
        )
    return blocks


def arguments_of(raw: Any) -> dict[str, Any]:
    """A call's arguments as an object: parsed from JSON text, ``{}`` for anything that is not one."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str) and raw.strip() and not too_deep(raw):
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
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


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
