"""Tool calls spelled with tags or special tokens, found in one pass each (internal to ``recovery``).

A tag says "this is a call", so what follows it is read as a call envelope (and repaired if need be), as
long as it names a declared tool. Every finder here first lists the positions of its markers with one
regular-expression pass and then reads the stretches between them, each once: no pattern is ever matched
from every position to the end of the text, which is what made the earlier finders quadratic on a reply
such as ``'<function=' * 10000``.

The spellings, by the models that write them:

- wrappers: Hermes/Qwen ``<tool_call>{...}</tool_call>`` (also left unclosed), and the variants
  llama.cpp's Hermes 2 Pro parser accepts (``<function_call>``, ``<response>``, ``<json>``),
  Nemotron ``<TOOLCALL>[...]</TOOLCALL>``, any of them inside a code fence;
- Qwen3-Coder markup ``<tool_call><function=f><parameter=p>...``, with or without the wrapper;
- a special token followed by JSON: Mistral ``[TOOL_CALLS][...]`` and ``[TOOL_CALLS]f[CALL_ID]id[ARGS]{...}``,
  Llama ``<|python_tag|>{...}`` (several split by ``;``), GigaChat ``<|function_call|>{...}`` and
  ``function call<|role_sep|>\\n{...}``, Inkling ``f<|content_invoke_tool_json|>{"name": .., "args": ..}``;
- Llama 4 ``<|python_start|>[f(x=1)]<|python_end|>``;
- gpt-oss harmony ``<|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>``
  served raw. Only a recipient that is a declared tool is a call: ``to=assistant``, ``to=container.exec``
  or ``to=browser.search`` address the model's built-in channels, not our tools.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from itertools import islice
from typing import Any

from ._call_text import MAX_BLOCKS, Found, Reader, Span

__all__ = ["TAGGED", "python_calls"]

# -- wrappers ---------------------------------------------------------------------------------------

# ``<tools>`` is left out: it is where a Hermes prompt lists the tool definitions, and a model that echoes
# them back has not called anything.
_WRAPPERS = ("tool_call", "function_call", "response", "json", "JSON", "TOOLCALL")
_WRAPPER_TAG = re.compile(r"<(/?)(" + "|".join(_WRAPPERS) + r")>")
_FENCE_BEFORE = re.compile(r"```[\w-]*[ \t]*\n?[ \t]*\Z")
_FENCE_AFTER = re.compile(r"\s*```")


def _wrapped(body: str, reader: Reader) -> list[Span]:
    if "<" not in body:
        return []
    blocks: list[tuple[int, int, int, int]] = []  # start, inner start, inner end, end
    open_name: str | None = None
    open_at = inner_at = 0
    for tag in _WRAPPER_TAG.finditer(body):
        if len(blocks) >= MAX_BLOCKS:
            break
        closing, name = tag.group(1), tag.group(2)
        if open_name is None:
            if not closing:
                open_name, open_at, inner_at = name, tag.start(), tag.end()
            continue
        if name != open_name:
            continue  # another wrapper's tag inside this one is part of its text
        blocks.append((open_at, inner_at, tag.start(), tag.start() if not closing else tag.end()))
        open_name = None if closing else name
        open_at, inner_at = tag.start(), tag.end()
    if open_name is not None and len(blocks) < MAX_BLOCKS:
        blocks.append((open_at, inner_at, len(body), len(body)))
    spans: list[Span] = []
    for start, inner_at, inner_end, end in blocks:
        inner = body[inner_at:inner_end].strip()
        if inner.endswith("```"):
            inner = inner[:-3].rstrip()  # a wrapper left open inside a code fence
        if inner.startswith("<function="):
            found = _markup_calls(inner, reader)
        else:
            found = reader.json_calls(inner, tagged=True)
        if found:
            spans.append((*_with_fence(body, start, end), found))
    if not spans and "<function=" in body:
        # Qwen3-Coder markup whose <tool_call> wrapper the server swallowed.
        return _markup_spans(body, 0, len(body), reader)
    return spans


def _with_fence(body: str, start: int, end: int) -> tuple[int, int]:
    """A span widened over the code fence it is the whole of (```xml, ```json around a wrapper)."""
    before = _FENCE_BEFORE.search(body, max(0, start - 40), start)
    if before is None:
        return start, end
    after = _FENCE_AFTER.match(body, end)
    if after is not None:
        return before.start(), after.end()
    if body.endswith("```", start, end):
        return before.start(), end
    return start, end


# -- Qwen3-Coder markup -----------------------------------------------------------------------------

_MARKUP_TAG = re.compile(
    r"<function=([^<>\s]{1,256})\s*>|</function>|<parameter=([^<>\s]{1,256})\s*>|</parameter>"
)


def _markup_calls(text: str, reader: Reader) -> list[Found]:
    return [found for _, _, calls in _markup_spans(text, 0, len(text), reader) for found in calls]


def _markup_spans(text: str, start: int, limit: int, reader: Reader) -> list[Span]:
    """``<function=f><parameter=p>v</parameter></function>`` calls, in one pass over their tags."""
    spans: list[Span] = []
    name: str | None = None
    call_at = 0
    arguments: dict[str, Any] = {}
    parameter: str | None = None
    value_at = 0

    def end_parameter(at: int) -> None:
        nonlocal parameter
        if parameter is not None and name is not None and reader.declared(name):
            arguments[parameter] = _markup_value(text[value_at:at], reader)
        parameter = None

    def end_call(at: int, end: int) -> None:
        nonlocal name, arguments
        end_parameter(at)
        if name is not None and reader.declared(name):
            spans.append((call_at, end, [(name, arguments, None)]))
        name, arguments = None, {}

    for tag in _MARKUP_TAG.finditer(text, start, limit):
        if len(spans) >= MAX_BLOCKS:
            break
        whole = tag.group()
        if tag.group(1) is not None:
            end_call(tag.start(), tag.start())
            name, call_at, arguments = tag.group(1), tag.start(), {}
        elif whole == "</function>":
            end_call(tag.start(), tag.end())
        elif name is None:
            continue
        elif tag.group(2) is not None:
            end_parameter(tag.start())
            parameter, value_at = tag.group(2), tag.end()
        else:
            end_parameter(tag.start())
    end_call(limit, limit)
    return spans


def _markup_value(value: str, reader: Reader) -> Any:
    """A parameter's value: JSON when it reads as JSON, the text otherwise."""
    # The template puts the value on its own line; a one-line value loses its indentation too, while a
    # multi-line one (code) keeps it.
    value = value.removeprefix("\n").removesuffix("\n")
    if "\n" not in value.strip():
        value = value.strip()
    end, values = reader.decode_values(value, 0, len(value), single=True)
    return values[0] if values and end == len(value) else value


# -- special tokens followed by JSON ----------------------------------------------------------------

_MARKERS = (
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<|function_call|>",
    "function call<|role_sep|>",
    "<|content_invoke_tool_json|>",
)
_MARKER = re.compile("|".join(re.escape(m) for m in _MARKERS))
# What ends a marked call: Llama's end of message or turn, an end of sequence, Inkling's end of block.
_MARKED_END = re.compile(r"<\|eom_id\|>|<\|eot_id\|>|</s>|<\|end_message\|>")
_MISTRAL_NAMED = re.compile(
    r"\s*(?P<name>[\w.\-]{1,256})\s*(?:\[CALL_ID\]\s*(?P<id>[\w\-]{1,256})\s*)?(?P<args>\[ARGS\])?\s*"
    r"(?=\{|\Z|\[TOOL_CALLS\])"
)
_GIGACHAT_LEAD = re.compile(r"<\|message_sep\|>\s*\Z")


def _marked(body: str, reader: Reader) -> list[Span]:
    starts = [(m.start(), m.end(), m.group()) for m in islice(_MARKER.finditer(body), MAX_BLOCKS + 1)]
    spans: list[Span] = []
    for index, (start, at, marker) in enumerate(starts[:MAX_BLOCKS]):
        limit = starts[index + 1][0] if index + 1 < len(starts) else len(body)
        ended = _MARKED_END.search(body, at, limit)
        stop = ended.start() if ended else limit
        span = _marked_call(body, at, stop, marker, reader)
        if span is None:
            continue
        end, found = span
        closing = _MARKED_END.match(body, _skip_space(body, end, limit), limit)
        if closing is not None:
            end = closing.end()
        if marker == "<|content_invoke_tool_json|>":
            start = _inkling_start(body, start, found)
        elif marker == "function call<|role_sep|>":
            # GigaChat separates the call from the words before it with its own token.
            lead = _GIGACHAT_LEAD.search(body, max(0, start - 40), start)
            start = lead.start() if lead else start
        spans.append((start, end, found))
    return spans


def _marked_call(
    body: str, at: int, stop: int, marker: str, reader: Reader
) -> tuple[int, list[Found]] | None:
    """The calls after one marker, read up to ``stop``: where they end, and the calls."""
    first = _skip_space(body, at, stop)
    if marker == "[TOOL_CALLS]" and body[first : first + 1] not in ("[", "{"):
        return _mistral_named(body, at, stop, reader)
    end, values = reader.decode_values(body, first, stop, single=False)
    found = [call for value in values for call in reader.from_value(value, tagged=True)]
    if found:
        return end, found
    text = body[first:stop].strip()
    if not text.startswith(("{", "[")):
        return None
    # Unreadable or cut short: everything up to the end of the call is its text, repaired.
    found = reader.repaired_calls(text)
    return (stop, found) if found else None


def _mistral_named(body: str, at: int, stop: int, reader: Reader) -> tuple[int, list[Found]] | None:
    named = _MISTRAL_NAMED.match(body, at, stop)
    if not named or not reader.declared(named.group("name")):
        return None
    name = named.group("name")
    args_at = named.end()
    if args_at < stop and body[args_at] == "{":
        end, values = reader.decode_values(body, args_at, stop, single=True)
        if values and isinstance(values[0], dict):
            return end, [(name, values[0], body[args_at:end])]
        # Unreadable or cut short: everything up to the next call is the argument text.
        return stop, [reader.tagged_arguments(name, body[args_at:stop])]
    if named.group("args"):
        return args_at, [(name, {}, None)]
    return None


def _inkling_start(body: str, start: int, found: list[Found]) -> int:
    """Inkling writes the tool's name before the marker; it goes with the call."""
    window_at = max(0, start - 300)
    before = body[window_at:start].rstrip()
    name = found[0][0]
    if not before.endswith(name):
        return start
    at = len(before) - len(name)
    if at > 0 and (before[at - 1].isalnum() or before[at - 1] in "_.-"):
        return start  # the end of a longer word
    head = before[:at].rstrip()
    if head.endswith("<|message_model|>"):
        at = len(head) - len("<|message_model|>")
    return window_at + at


_SPACE = re.compile(r"\s*")


def _skip_space(text: str, at: int, limit: int) -> int:
    found = _SPACE.match(text, at, limit)
    return found.end() if found else at


# -- Llama 4 pythonic calls -------------------------------------------------------------------------

_PYTHON_START = re.compile(r"<\|python_start\|>|<\|python_end\|>")


def _python_start(body: str, reader: Reader) -> list[Span]:
    if "<|python_start|>" not in body:
        return []
    tags = list(islice(_PYTHON_START.finditer(body), 2 * MAX_BLOCKS))
    spans: list[Span] = []
    for index, tag in enumerate(tags):
        if tag.group() != "<|python_start|>":
            continue
        following = tags[index + 1] if index + 1 < len(tags) else None
        closed = following is not None and following.group() == "<|python_end|>"
        inner_end = following.start() if following is not None else len(body)
        calls = python_calls(body[tag.end() : inner_end].strip(), reader)
        if calls:
            spans.append((tag.start(), following.end() if closed and following else inner_end, calls))
    return spans


def python_calls(text: str, reader: Reader) -> list[Found]:
    """``[f(x=1), g(y="z")]`` read with ``ast``: keyword arguments with literal values, declared tools."""
    # ast is quick, but not a character a nanosecond: a long list pays from the repair budget.
    if not text.startswith("[") or reader.too_deep(text) or not reader.spend(len(text) // 4):
        return []
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    if not isinstance(tree, ast.List) or not tree.elts:
        return []
    found: list[Found] = []
    for node in tree.elts:
        if not isinstance(node, ast.Call) or node.args or not isinstance(node.func, ast.Name):
            return []
        name = node.func.id
        if not reader.declared(name):
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
    except (TypeError, ValueError, RecursionError):
        return False
    return True


# -- gpt-oss harmony --------------------------------------------------------------------------------

_HARMONY_TOKEN = re.compile(r"<\|(start|channel|constrain|message|call|end|return)\|>")
_RECIPIENT = re.compile(r"\bto=([^\s<]{1,256})")


class _Message:
    __slots__ = ("body_end", "body_start", "channel", "channel_at", "end", "header", "start")

    def __init__(self, start: int, header: str, channel_at: int) -> None:
        self.start = start
        self.header = header  # the role header, where a recipient may be named
        self.channel_at = channel_at
        self.channel = ""  # the channel, where a recipient may be named too
        self.body_start = self.body_end = self.end = -1


def _harmony(body: str, reader: Reader) -> list[Span]:
    if "<|message|>" not in body or "to=" not in body:
        return []
    calls = [(m, _recipient(m, reader)) for m in _harmony_messages(body)]
    if not any(name for _, name in calls):
        return []
    # Harmony framing is markup, not answer: a call goes, an analysis message goes, and any other message
    # keeps only its words.
    spans: list[Span] = []
    for m, name in calls:
        if name:
            found = reader.tagged_arguments(name, body[m.body_start : m.body_end])
            spans.append((m.start, m.end, [found]))
        elif m.channel.split()[:1] == ["analysis"]:
            spans.append((m.start, m.end, []))
        else:
            spans.append((m.start, m.body_start, []))
            spans.append((m.body_end, m.end, []))
    return spans


def _harmony_messages(body: str) -> list[_Message]:
    """Every ``[<|start|>role][ to=x]<|channel|>c[<|constrain|>t]<|message|>body<|end|>``, in one pass."""
    messages: list[_Message] = []
    current: _Message | None = None  # a header being read
    reading: _Message | None = None  # a body being read
    start_at: int | None = None
    floor = 0  # where the text since the last token begins
    for token in _HARMONY_TOKEN.finditer(body):
        if len(messages) >= MAX_BLOCKS:
            break
        kind, at, after = token.group(1), token.start(), token.end()
        if reading is not None:
            if kind in ("constrain", "message"):
                continue  # inside a body only an end or a new header counts
            ended = kind in ("call", "end", "return")
            reading.body_end, reading.end = at, after if ended else at
            messages.append(reading)
            reading = None
            if ended:
                floor = after
                continue
        if kind == "start":
            start_at, current = at, None
        elif kind == "channel":
            start = start_at if start_at is not None else _head_start(body, floor, at)
            current, start_at = _Message(start, body[start:at], after), None
        elif kind in ("constrain", "message") and current is not None:
            current.channel = current.channel or body[current.channel_at : at]
            if kind == "message":
                current.body_start = after
                reading, current = current, None
        floor = after
    if reading is not None:
        reading.body_end = reading.end = len(body)
        messages.append(reading)
    return messages


def _head_start(body: str, floor: int, at: int) -> int:
    """Where a `` to=recipient`` written just before ``<|channel|>`` begins (``at`` when there is none)."""
    window_at = max(floor, at - 300)
    head = body[window_at:at].rstrip()
    to = head.rfind("to=")
    if to == -1 or not head[to + 3 :] or any(c.isspace() or c == "<" for c in head[to + 3 :]):
        return at
    if to > 0 and not head[to - 1].isspace():
        return at
    return window_at + len(head[:to].rstrip())


def _recipient(m: _Message, reader: Reader) -> str | None:
    """The declared tool a message is addressed to, if any."""
    found = _RECIPIENT.search(m.header + " " + m.channel)
    if found is None:
        return None
    name = found.group(1).removeprefix("functions.")
    return name if reader.declared(name) else None


#: Tagged finders in the order they are tried; the first that finds anything decides.
TAGGED: tuple[Callable[[str, Reader], list[Span]], ...] = (_harmony, _wrapped, _marked, _python_start)
