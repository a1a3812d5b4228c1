"""Finding tool calls a model wrote into its reply as text.

A server whose tool-call parser was written for another chat template passes the model's call through as
plain text, and the run would end on a reply that is nothing but a call nobody made. ``recover_tool_calls``
reads the spellings open-weight models use:

- tagged, and so taken at their word (the spellings are listed in ``_call_tags``): Hermes/Qwen
  ``<tool_call>`` and its wrapper variants, Qwen3-Coder markup, Mistral ``[TOOL_CALLS]``, Llama
  ``<|python_tag|>`` and ``<|python_start|>``, GigaChat and Inkling special tokens, Nemotron ``<TOOLCALL>``,
  gpt-oss harmony served raw;
- untagged, and only then: a reply that is nothing but a JSON call (or a list of them), bare or in one
  code fence; Command R+'s ``Action:`` and a fenced list of ``{"tool_name", "parameters"}`` after its plan;
  a reply that is nothing but a Python-style list of calls ``[f(x=1), g(y="z")]``.

Only a declared tool becomes a call, however it is spelled; prose that mentions a tool, or shows JSON in
passing, is never a call: words around JSON, bare or fenced (a "Sure!" before a fenced call included),
make it an example. Only the text after the last closing thinking tag is read. Every spelling is
found in time linear in the reply, and what it costs to repair almost-JSON is bounded per reply, because
this runs on the event loop.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from itertools import islice

from ..messages import ToolCall
from ._call_tags import TAGGED, python_calls
from ._call_text import MAX_BLOCKS, Reader, Span

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


# Closing tags of a scratchpad; gpt-oss's analysis channel runs from its header to <|end|>.
_THINK_CLOSERS = ("</think>", "</thinking>", "</reasoning>", "◁/think▷", "[/THINK]")
_ANALYSIS = "<|channel|>analysis<|message|>"
_ANALYSIS_MARK = re.compile(r"(<\|channel\|>analysis<\|message\|>)|<\|end\|>")
_FENCE = re.compile(r"```")
_FENCE_HEAD = re.compile(r"```([\w-]*)[ \t]*\n")
_FENCE_LANGS = frozenset({"", "json", "xml", "tool_call", "tool_code", "javascript", "js"})
_ACTION = re.compile(r"\bAction:\s*\Z")


def recover_tool_calls(text: str, tool_names: Collection[str]) -> RecoveredCalls:
    """Find the tool calls a model wrote as text.

    Args:
        text: the reply's content.
        tool_names: the tools the model was given; a call to any other name is not a call.

    Returns:
        The calls found, and the text left once they are taken out. A tagged call whose arguments cannot
        be read is kept with ``{}`` and its text in ``raw_arguments``; an untagged one is not a call.
    """
    if not isinstance(text, str):
        return RecoveredCalls([], "")
    cut = _after_thinking(text)
    head, body = text[:cut], text[cut:]
    # Most replies are prose: none of the characters any call spelling starts with means nothing to find.
    if not any(mark in body for mark in "<[{`") and "function call" not in body:
        return RecoveredCalls([], text.strip())
    reader = Reader(name for name in tool_names if isinstance(name, str))
    if not reader.names:
        return RecoveredCalls([], text.strip())
    spans: list[Span] = []
    for finder in TAGGED:
        spans = finder(body, reader)
        if spans:
            break
    if not spans:
        spans = _untagged(body, reader)
    if not spans:
        return RecoveredCalls([], text.strip())
    pieces: list[str] = []
    calls: list[ToolCall] = []
    position = 0
    for start, end, found in sorted(spans, key=lambda span: span[0]):
        start = max(start, position)  # a span widened over a fence may reach into the one before
        pieces.append(body[position:start])
        position = max(position, end)
        for name, arguments, raw in found:
            calls.append(ToolCall(f"call_recovered_{len(calls)}", name, arguments, raw))
    pieces.append(body[position:])
    return RecoveredCalls(calls, (head + "".join(pieces)).strip())


def _after_thinking(text: str) -> int:
    """Where the answer starts: after the last closing thinking tag or analysis message, or 0."""
    cut = 0
    for closer in _THINK_CLOSERS:
        at = text.rfind(closer)
        if at != -1:
            cut = max(cut, at + len(closer))
    if _ANALYSIS in text:
        in_analysis = False
        for mark in _ANALYSIS_MARK.finditer(text):
            if mark.group(1) is not None:
                in_analysis = True
            elif in_analysis:
                cut, in_analysis = max(cut, mark.end()), False
    return cut


# Untagged spellings -------------------------------------------------------------------------------------


def _untagged(body: str, reader: Reader) -> list[Span]:
    stripped = body.strip()
    start = len(body) - len(body.lstrip())
    if stripped.startswith(("{", "[")):
        found = reader.json_calls(stripped, tagged=False)
        if not found and stripped.startswith("["):
            found = python_calls(stripped, reader)
        if found:
            return [(start, start + len(stripped), found)]
    with_calls: list[Span] = []
    for fence_start, inner_start, inner_end, fence_end in _fences(body):
        found = reader.json_calls(body[inner_start:inner_end].strip(), tagged=False)
        if found:
            with_calls.append((fence_start, fence_end, found))
            if len(with_calls) > 1:
                return []  # two fenced calls: examples, or a plan, not one call
    if len(with_calls) == 1:
        fence_start, fence_end, found = with_calls[0]
        if body[fence_end:].strip():
            return []  # words after it: the fence shows a call, it does not make one
        if not body[:fence_start].strip():
            return [(fence_start, fence_end, found)]
        # Command R+ writes its plan, then ``Action:`` and the fenced calls: the format's own marker.
        action = _ACTION.search(body, max(0, fence_start - 40), fence_start)
        if action is not None:
            return [(action.start(), fence_end, found)]
    return []


def _fences(body: str) -> list[tuple[int, int, int, int]]:
    """Closed code fences of the languages a call may be written in: start, body start, body end, end.

    Fence marks pair up in order, found in one pass, so an unclosed fence costs nothing.
    """
    marks = [m.start() for m in islice(_FENCE.finditer(body), 2 * MAX_BLOCKS)]
    fences: list[tuple[int, int, int, int]] = []
    for opening, closing in zip(marks[::2], marks[1::2], strict=False):
        head = _FENCE_HEAD.match(body, opening, closing)
        if head is None or head.group(1).lower() not in _FENCE_LANGS:
            continue
        fences.append((opening, head.end(), closing, closing + 3))
    return fences
