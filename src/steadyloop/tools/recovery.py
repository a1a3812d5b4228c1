"""Finding tool calls a model wrote into its reply as text.

A server whose tool-call parser was written for another chat template passes the model's call through as
plain text, and the run would end on a reply that is nothing but a call nobody made. ``recover_tool_calls``
reads the spellings open-weight models use:

- tagged, and so taken at their word: Hermes/Qwen ``<tool_call>{...}</tool_call>`` (also left unclosed at
  the end), Qwen3-Coder ``<tool_call><function=f><parameter=p>...`` markup, Mistral ``[TOOL_CALLS][...]``
  and ``[TOOL_CALLS]f[CALL_ID]id[ARGS]{...}``, Llama ``<|python_tag|>{...}`` (several split by ``;``) and
  ``<|python_start|>[f(x=1)]<|python_end|>``, gpt-oss harmony ``<|channel|>commentary to=functions.f ...
  <|message|>{...}<|call|>`` served raw;
- untagged, and only when every call names a tool that exists: a reply that is nothing but a JSON call (or a
  list of them), a reply holding one fenced JSON call, a reply that is nothing but a Python-style list of
  calls ``[f(x=1), g(y="z")]``.

Prose that mentions a tool is never a call. Only the text after the last closing thinking tag is read.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from json_repair import repair_json

from ..errors import ToolArgumentsError
from ..messages import ToolCall
from .arguments import parse_tool_arguments

__all__ = ["RecoveredCalls", "recover_tool_calls"]


@dataclass(frozen=True, slots=True)
class RecoveredCalls:
    """What ``recover_tool_calls`` found.

    Attributes:
        calls: the calls, with ids ``call_recovered_0``, ``call_recovered_1``, ... in reply order.
        content: the reply with the calls taken out, trimmed.
    """

    calls: list[ToolCall] = field(default_factory=list)
    content: str = ""


# A call before its id is given: name, arguments, and the argument text when there is one to keep.
_Found = tuple[str, dict[str, Any], str | None]
# A span of the text to take out, and the calls it held.
_Span = tuple[int, int, list[_Found]]

_THINK_END = re.compile(
    r"</think>|</thinking>|</reasoning>|◁/think▷|\[/THINK\]"
    r"|<\|channel\|>analysis<\|message\|>.*?<\|end\|>",
    re.DOTALL,
)
_TOOL_CALL = re.compile(r"<tool_call>(?P<body>.*?)(?:</tool_call>|(?=<tool_call>)|\Z)", re.DOTALL)
_FUNCTION = re.compile(
    r"<function=(?P<name>[^>\s]+)\s*>(?P<body>.*?)(?:</function>|(?=<function=)|\Z)", re.DOTALL
)
_PARAMETER = re.compile(
    r"<parameter=(?P<name>[^>\s]+)\s*>(?P<value>.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)",
    re.DOTALL,
)
_NAME_FIELD = re.compile(r"""["']name["']\s*:\s*["']([^"']+)["']""")
_MISTRAL = re.compile(r"\[TOOL_CALLS\]")
_MISTRAL_NAMED = re.compile(
    r"\s*(?P<name>[\w.\-]+)\s*(?:\[CALL_ID\]\s*(?P<id>[\w\-]+)\s*)?(?P<args>\[ARGS\])?\s*(?=\{|\Z|\[TOOL_CALLS\])"
)
_PYTHON_TAG = re.compile(
    r"<\|python_tag\|>(?P<body>.*?)(?:<\|eom_id\|>|<\|eot_id\|>|(?=<\|python_tag\|>)|\Z)", re.DOTALL
)
_PYTHON_START = re.compile(r"<\|python_start\|>(?P<body>.*?)(?:<\|python_end\|>|\Z)", re.DOTALL)
_HARMONY = re.compile(
    r"(?:<\|start\|>\s*assistant)?(?P<head>\s*to=[^\s<]+\s*)?<\|channel\|>(?P<channel>[^<]*?)"
    r"(?:<\|constrain\|>[^<]*)?<\|message\|>(?P<body>.*?)"
    r"(?:<\|call\|>|<\|end\|>|<\|return\|>|(?=<\|start\|>)|(?=<\|channel\|>)|\Z)",
    re.DOTALL,
)
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_FENCED = re.compile(r"```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL)
_FENCE_LANGS = frozenset({"", "json", "tool_call", "tool_code", "javascript", "js"})
_JSON_SEPARATORS = " \t\r\n;,"


def recover_tool_calls(text: str, tool_names: Collection[str]) -> RecoveredCalls:
    """Find the tool calls a model wrote as text.

    Args:
        text: the reply's content.
        tool_names: the tools the model was given. Untagged calls must name one of them; tagged calls are
            kept whatever they name, so the loop can tell the model which tools exist.

    Returns:
        The calls found, and the text left once they are taken out. A tagged call whose arguments cannot
        be read is kept with ``{}`` and its text in ``raw_arguments``; an untagged one is not a call.
    """
    cut = _after_thinking(text)
    head, body = text[:cut], text[cut:]
    # Most replies are prose: none of the characters any call spelling starts with means nothing to find.
    if not any(mark in body for mark in "<[{`"):
        return RecoveredCalls([], text.strip())
    names = frozenset(tool_names)
    spans: list[_Span] = []
    for finder in _TAGGED:
        spans = finder(body)
        if spans:
            break
    if not spans:
        spans = _untagged(body, names)
    if not spans:
        return RecoveredCalls([], text.strip())
    pieces: list[str] = []
    calls: list[ToolCall] = []
    position = 0
    for start, end, found in sorted(spans, key=lambda span: span[0]):
        pieces.append(body[position:start])
        position = end
        for name, arguments, raw in found:
            calls.append(ToolCall(f"call_recovered_{len(calls)}", name, arguments, raw))
    pieces.append(body[position:])
    return RecoveredCalls(calls, (head + "".join(pieces)).strip())


def _after_thinking(text: str) -> int:
    """Where the answer starts: after the last closing thinking tag, or 0."""
    last = None
    for last in _THINK_END.finditer(text):  # noqa: B007 - only the last one matters
        pass
    return last.end() if last else 0


# Tagged spellings ---------------------------------------------------------------------------------------


def _harmony(body: str) -> list[_Span]:
    if "<|message|>" not in body or "to=" not in body:
        return []
    segments = list(_HARMONY.finditer(body))
    if not any(_recipient(m) for m in segments):
        return []
    # Harmony framing is markup, not answer: a call goes, an analysis message goes, and any other message
    # keeps only its words.
    spans: list[_Span] = []
    for m in segments:
        recipient = _recipient(m)
        if recipient:
            name = recipient.removeprefix("functions.")
            spans.append((m.start(), m.end(), [_tagged_arguments(name, m.group("body"))]))
        elif m.group("channel").split()[:1] == ["analysis"]:
            spans.append((m.start(), m.end(), []))
        else:
            spans.append((m.start(), m.start("body"), []))
            spans.append((m.end("body"), m.end(), []))
    return spans


def _recipient(m: re.Match[str]) -> str | None:
    header = (m.group("head") or "") + " " + m.group("channel")
    found = _RECIPIENT.search(header)
    return found.group(1) if found else None


def _tool_call_blocks(body: str) -> list[_Span]:
    spans: list[_Span] = []
    for m in _TOOL_CALL.finditer(body):
        inner = m.group("body").strip()
        if "<function=" in inner:
            found = [_xml_call(f) for f in _FUNCTION.finditer(inner)]
        else:
            found = _json_calls(inner, tagged=True)
        if found:
            spans.append((m.start(), m.end(), found))
    if not spans and "<function=" in body:
        # Qwen3-Coder markup whose <tool_call> wrapper the server swallowed.
        spans = [(m.start(), m.end(), [_xml_call(m)]) for m in _FUNCTION.finditer(body)]
    return spans


def _xml_call(m: re.Match[str]) -> _Found:
    arguments = {p.group("name"): _xml_value(p.group("value")) for p in _PARAMETER.finditer(m.group("body"))}
    return m.group("name"), arguments, None


def _xml_value(value: str) -> Any:
    """A parameter's value: JSON when it reads as JSON, the text otherwise."""
    # The template puts the value on its own line; a one-line value loses its indentation too, while a
    # multi-line one (code) keeps it.
    value = value.removeprefix("\n").removesuffix("\n")
    if "\n" not in value.strip():
        value = value.strip()
    try:
        return json.loads(value)
    except ValueError:
        return value


def _mistral(body: str) -> list[_Span]:
    starts = [m.start() for m in _MISTRAL.finditer(body)]
    spans: list[_Span] = []
    for index, start in enumerate(starts):
        limit = starts[index + 1] if index + 1 < len(starts) else len(body)
        at = start + len("[TOOL_CALLS]")
        rest = body[at:limit]
        if rest.lstrip().startswith("["):
            offset = at + len(rest) - len(rest.lstrip())
            end, values = _decode_values(body, offset, limit, single=True)
            found = [f for v in values for f in _from_value(v, tagged=True, names=None)]
            if found:
                spans.append((start, end, found))
            continue
        named = _MISTRAL_NAMED.match(body, at, limit)
        if not named:
            continue
        args_at = named.end()
        if args_at < limit and body[args_at] == "{":
            end, values = _decode_values(body, args_at, limit, single=True)
            if values and isinstance(values[0], dict):
                raw = body[args_at:end]
                spans.append((start, end, [(named.group("name"), values[0], raw)]))
                continue
            # Unreadable or cut short: everything up to the next call is the argument text.
            found_call = _tagged_arguments(named.group("name"), body[args_at:limit])
            spans.append((start, limit, [found_call]))
        elif named.group("args"):
            spans.append((start, args_at, [(named.group("name"), {}, None)]))
    return spans


def _python_tag(body: str) -> list[_Span]:
    spans: list[_Span] = []
    for m in _PYTHON_TAG.finditer(body):
        found = _json_calls(m.group("body").strip(), tagged=True)
        if found:
            spans.append((m.start(), m.end(), found))
    for m in _PYTHON_START.finditer(body):
        calls = _python_calls(m.group("body").strip(), names=None)
        if calls:
            spans.append((m.start(), m.end(), calls))
    return spans


_TAGGED: tuple[Callable[[str], list[_Span]], ...] = (_harmony, _tool_call_blocks, _mistral, _python_tag)


# Untagged spellings -------------------------------------------------------------------------------------


def _untagged(body: str, names: frozenset[str]) -> list[_Span]:
    stripped = body.strip()
    start = body.index(stripped) if stripped else 0
    if stripped.startswith(("{", "[")):
        found = _json_calls(stripped, tagged=False, names=names)
        if not found and stripped.startswith("["):
            found = _python_calls(stripped, names=names)
        if found:
            return [(start, start + len(stripped), found)]
    fenced = [m for m in _FENCED.finditer(body) if m.group("lang").lower() in _FENCE_LANGS]
    found_in = [(m, _json_calls(m.group("body").strip(), tagged=False, names=names)) for m in fenced]
    with_calls = [(m, found) for m, found in found_in if found]
    if len(with_calls) == 1:
        m, found = with_calls[0]
        return [(m.start(), m.end(), found)]
    return []


def _python_calls(text: str, names: frozenset[str] | None) -> list[_Found]:
    """``[f(x=1), g(y="z")]`` read with ``ast``: keyword arguments with literal values only."""
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return []
    if not isinstance(tree, ast.List) or not tree.elts:
        return []
    found: list[_Found] = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args or not isinstance(node.func, ast.Name):
            return []
        name = node.func.id
        if names is not None and name not in names:
            return []
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return []
        if len(arguments) != len(node.keywords) or not _json_safe(arguments):
            return []
        found.append((name, arguments, None))
    return found


def _json_safe(value: Any) -> bool:
    """Whether a literal survives JSON: no bytes, sets, complex numbers or infinities."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# JSON envelopes -----------------------------------------------------------------------------------------


def _json_calls(text: str, *, tagged: bool, names: frozenset[str] | None = None) -> list[_Found]:
    """The calls in a text that is one or more JSON call envelopes, or ``[]`` if it is anything else."""
    if not text.startswith(("{", "[")):
        return []
    end, values = _decode_values(text, 0, len(text), single=False)
    if not values or end < len(text):
        # Not clean JSON from end to end. A tagged block, or an untagged reply that ends where JSON would,
        # is repaired; an untagged object followed by prose is left alone.
        if not tagged and not text.rstrip().endswith(("}", "]")):
            return []
        repaired = repair_json(text, return_objects=True, skip_json_loads=True)
        values = repaired if isinstance(repaired, list) else [repaired]
    found: list[_Found] = []
    for value in values:
        calls = _from_value(value, tagged=tagged, names=names)
        if not calls:
            if tagged:
                continue
            return []
        found.extend(calls)
    if tagged and not found:
        named = _NAME_FIELD.search(text)
        if named:
            return [(named.group(1), {}, text)]
    return found


def _decode_values(text: str, start: int, limit: int, *, single: bool) -> tuple[int, list[Any]]:
    """Strict JSON values from ``start``, split by whitespace, ``;`` or ``,``; where reading stopped."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = start
    while position < limit:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            break
        if end > limit:
            break
        values.append(value)
        position = end
        if single:
            break
        after = position
        while after < limit and text[after] in _JSON_SEPARATORS:
            after += 1
        if after >= limit or text[after] not in "{[":
            position = after if after >= limit else position
            break
        position = after
    return position, values


def _from_value(value: Any, *, tagged: bool, names: frozenset[str] | None) -> list[_Found]:
    """Calls from a decoded envelope or list of envelopes; ``[]`` when any of them is not a call."""
    items = value if isinstance(value, list) else [value]
    found: list[_Found] = []
    for item in items:
        call = _envelope(item, tagged=tagged, names=names)
        if call is None:
            return []
        found.append(call)
    return found


def _envelope(item: Any, *, tagged: bool, names: frozenset[str] | None) -> _Found | None:
    """``{"name": .., "arguments"|"parameters": ..}``, or the OpenAI ``{"function": {...}}`` shape."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return None
    key = next((k for k in ("arguments", "parameters") if k in item), None)
    if not tagged and (key is None or (names is not None and name not in names)):
        # An object with a "name" is often just data; untagged, only a known tool with arguments counts.
        return None
    if key is None:
        return name, {}, None
    if tagged:
        return _tagged_arguments(name, item[key])
    raw = item[key]
    try:
        arguments = parse_tool_arguments(raw if isinstance(raw, str | dict) or raw is None else repr(raw))
    except ToolArgumentsError:
        return None
    return name, arguments, raw.strip() if isinstance(raw, str) else None


def _tagged_arguments(name: str, raw: Any) -> _Found:
    """Open a tagged call's arguments; unreadable ones give ``{}`` with the text kept for the model."""
    text = raw if isinstance(raw, str) else None
    try:
        arguments = parse_tool_arguments(raw if isinstance(raw, str | dict) or raw is None else repr(raw))
    except ToolArgumentsError:
        return name, {}, text if text is not None else json.dumps(raw, default=str)
    return name, arguments, text.strip() if text is not None else None
