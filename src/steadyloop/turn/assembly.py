"""Reading a chat-completions stream back into a ``Turn``, sans I/O.

``StreamAssembler`` is fed the parsed JSON of each SSE event and knows nothing of sockets, so every server's
quirk is tested here without a network. It is on the hot path of every streamed token: the common chunk
(one content delta) takes a handful of dict lookups and one fence check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ToolArgumentsError
from ..messages import ToolCall, Turn
from ..tools.arguments import parse_tool_arguments
from ..usage import Usage
from .fences import DEFAULT_FENCES, Fence, FenceSplitter

__all__ = ["Produced", "StreamAssembler", "usage_from"]

TextCallback = Callable[[str], object]


class Produced:
    """One box per attempt: set on the first chunk that carries text, reasoning or a piece of a call.

    A caller with its own retry budget reads it after a failure: output already shown cannot be redone,
    so a request that produced something must not be sent again.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = False

    def __bool__(self) -> bool:
        return self.value

    def __repr__(self) -> str:
        return f"Produced({self.value})"


class _CallBuffer:
    __slots__ = ("arguments", "id", "index", "name")

    def __init__(self, index: int | None, call_id: str, name: str) -> None:
        self.index = index
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []


class StreamAssembler:
    """Accumulates one streamed turn from parsed chunks.

    Args:
        on_output: told each piece of answer text as soon as it is known to be answer.
        on_thinking: told each piece of reasoning (reasoning fields and fenced scratchpad).
        produced: the box set on the first chunk that carries something.
        fences: thinking fences to take out of content; ``()`` reads content as all answer.
        start_in_reasoning: the prompt opened a thinking block, so content starts as reasoning.
    """

    def __init__(
        self,
        *,
        on_output: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
        produced: Produced | None = None,
        fences: Sequence[Fence] = DEFAULT_FENCES,
        start_in_reasoning: bool = False,
    ) -> None:
        self._on_output = on_output
        self._on_thinking = on_thinking
        self.produced = produced if produced is not None else Produced()
        self._splitter = FenceSplitter(fences, start_in_reasoning=start_in_reasoning)
        self._field_reasoning: list[str] = []
        self._calls: list[_CallBuffer] = []
        self.finish_reason = ""
        self._usage: Mapping[str, Any] | None = None
        self._timings: Mapping[str, Any] | None = None
        self.error: Mapping[str, Any] | None = None
        # Content held while a batch is fed: run through the fences and told once, at the batch's end.
        self._held: list[str] | None = None

    def feed_many(self, chunks: Sequence[Any]) -> None:
        """Take the chunks one read of the socket completed, telling their text once rather than per chunk.

        What is told adds up to the same text as feeding them one by one (the fences read text the same
        however it is cut); only the number of calls differs, and within one read fenced reasoning is told
        before the answer text that came with it. It stops at an error chunk, as ``feed`` callers do.
        """
        held: list[str] = []
        self._held = held
        try:
            for chunk in chunks:
                # Most chunks carry one piece of answer and nothing else: take those without the general
                # walk through every field a chunk might have.
                choices = chunk.get("choices")
                if choices and type(choices) is list and not chunk.get("usage") and "timings" not in chunk:
                    choice = choices[0]
                    delta = choice.get("delta") if type(choice) is dict else None
                    if type(delta) is dict and len(delta) <= 2 and not choice.get("finish_reason"):
                        content = delta.get("content")
                        if type(content) is str and (len(delta) == 1 or "role" in delta):
                            if content:
                                self.produced.value = True
                                held.append(content)
                            continue
                self.feed(chunk)
                if self.error is not None:
                    break
        finally:
            self._tell_held()
            self._held = None

    def _tell_held(self) -> None:
        """Tell the content held so far in this batch, and go on holding (in the same list)."""
        held = self._held
        if held:
            self._held = None  # so _content tells it rather than holding it again
            self._content("".join(held))
            held.clear()
            self._held = held

    def feed(self, chunk: Mapping[str, Any]) -> None:
        """Take one parsed chunk (the JSON of one ``data:`` line)."""
        choices = chunk.get("choices")
        if choices:
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content:
                    self._content(content)
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning and isinstance(reasoning, str):
                    self._reasoning(reasoning)
                calls = delta.get("tool_calls")
                if calls:
                    self._tool_calls(calls)
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = reason
            # llama.cpp puts timings on the finish chunk when usage is not asked for.
            if "timings" in chunk:
                self._timings = chunk["timings"]
        else:
            if chunk.get("error"):
                self.error = chunk
        usage = chunk.get("usage")
        if usage:
            self._usage = usage
            if "timings" in chunk:
                self._timings = chunk["timings"]

    def _content(self, text: str) -> None:
        self.produced.value = True
        if self._held is not None:
            self._held.append(text)
            return
        split = self._splitter.feed(text)
        if split.reasoning and self._on_thinking is not None:
            self._on_thinking(split.reasoning)
        if split.content and self._on_output is not None:
            self._on_output(split.content)

    def _reasoning(self, text: str) -> None:
        self.produced.value = True
        # Content held before this reasoning is told first, so the order of the two is kept.
        self._tell_held()
        self._field_reasoning.append(text)
        if self._on_thinking is not None:
            self._on_thinking(text)

    def _tool_calls(self, fragments: Sequence[Any]) -> None:
        for fragment in fragments:
            if not isinstance(fragment, Mapping):
                continue
            fn = fragment.get("function") or {}
            call_id = fragment.get("id") or ""
            name = fn.get("name") or ""
            arguments = fn.get("arguments")
            index = fragment.get("index")
            call = self._target(index, call_id, name)
            if name and not call.name:
                call.name = name
            if call_id and not call.id:
                call.id = call_id
            if arguments:
                if not isinstance(arguments, str):
                    # A few servers send the arguments already parsed.
                    arguments = json.dumps(arguments, ensure_ascii=False)
                call.arguments.append(arguments)
                self.produced.value = True
            elif name or call_id:
                self.produced.value = True

    def _target(self, index: Any, call_id: str, name: str) -> _CallBuffer:
        """Which call a fragment continues, or a new one.

        Servers disagree: some put every call at index 0, some send no index at all, some repeat the id or
        the name on every fragment. A new id is always a new call; otherwise the latest call at that index
        (or the latest call, when there is no index) is continued unless the fragment names another tool.
        """
        calls = self._calls
        current: _CallBuffer | None = None
        if calls:
            if index is None:
                current = calls[-1]
            else:
                for candidate in reversed(calls):
                    if candidate.index == index:
                        current = candidate
                        break
        if current is not None and _starts_another(current, call_id, name):
            current = None
        if current is None:
            current = _CallBuffer(index if isinstance(index, int) else None, call_id, name)
            calls.append(current)
        return current

    def finish(self, *, first_token_ms: float | None = None) -> Turn:
        """The turn as read so far (call once, at the end of the stream)."""
        tail = self._splitter.finish()
        if tail.reasoning and self._on_thinking is not None:
            self._on_thinking(tail.reasoning)
        if tail.content and self._on_output is not None:
            self._on_output(tail.content)
        content = self._splitter.content
        reasoning = "".join(self._field_reasoning)
        if self._splitter.reasoning:
            reasoning = reasoning + self._splitter.reasoning if reasoning else self._splitter.reasoning
        truncated = self.finish_reason == "length"
        calls: list[ToolCall] = []
        for n, buf in enumerate(self._calls):
            raw = "".join(buf.arguments)
            if not buf.name and not raw.strip():
                continue  # a fragment that never became a call
            calls.append(_tool_call(buf, raw, n, truncated))
        usage = usage_from(self._usage, self._timings, first_token_ms=first_token_ms)
        return Turn(
            content=content,
            reasoning=reasoning,
            tool_calls=calls,
            usage=usage,
            finish_reason=self.finish_reason,
        )


def _starts_another(current: _CallBuffer, call_id: str, name: str) -> bool:
    # A new id is always a new call; without one, a different tool's name is.
    if call_id:
        return bool(current.id) and call_id != current.id
    return bool(name) and bool(current.name) and name != current.name


def _tool_call(buf: _CallBuffer, raw: str, n: int, truncated: bool) -> ToolCall:
    text = raw.strip()
    # Some servers open every call with an empty "{}" and then stream the real arguments after it.
    if text.startswith("{}") and len(text) > 2:
        text = text[2:].lstrip()
    try:
        arguments = parse_tool_arguments(text, truncated=truncated)
    except ToolArgumentsError:
        # The transcript replays unreadable arguments as {}; the raw text goes to the loop, which tells
        # the model what was wrong.
        arguments = {}
    return ToolCall(id=buf.id or f"call_{n}", name=buf.name, arguments=arguments, raw_arguments=raw)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def usage_from(
    usage: Mapping[str, Any] | None,
    timings: Mapping[str, Any] | None,
    *,
    first_token_ms: float | None = None,
) -> Usage:
    """Normalise a server's ``usage`` and llama.cpp's ``timings`` into one ``Usage``.

    Counts the server did not send are 0; measured fields nobody reported are ``None``. ``timings``
    stands in for the counts (and for the cached count, as ``cache_n``) where ``usage`` is missing them.
    """
    u = usage or {}
    t = timings or {}
    prompt = _int(u.get("prompt_tokens"))
    if prompt is None:
        prompt = _int(u.get("input_tokens"))
    completion = _int(u.get("completion_tokens"))
    if completion is None:
        completion = _int(u.get("output_tokens"))
    cache_n = _int(t.get("cache_n"))
    if prompt is None and t:
        prompt_n = _int(t.get("prompt_n"))
        if prompt_n is not None:
            prompt = prompt_n + (cache_n or 0)
    if completion is None and t:
        completion = _int(t.get("predicted_n"))
    details = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
    cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is None:
        cached = _int(u.get("cached_tokens"))
    if cached is None:
        cached = _int(u.get("cache_read_input_tokens"))
    if cached is None:
        cached = cache_n
    completion_details = u.get("completion_tokens_details") or u.get("output_tokens_details") or {}
    reasoning = (
        _int(completion_details.get("reasoning_tokens")) if isinstance(completion_details, Mapping) else None
    )
    prompt = prompt or 0
    completion = completion or 0
    total = _int(u.get("total_tokens"))
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        cached_tokens=cached or 0,
        uncached_tokens=max(prompt - cached, 0) if cached is not None else None,
        reasoning_tokens=reasoning,
        prompt_ms=_float(t.get("prompt_ms")),
        prompt_tokens_per_second=_float(t.get("prompt_per_second")),
        predicted_ms=_float(t.get("predicted_ms")),
        tokens_per_second=_float(t.get("predicted_per_second")),
        draft_total=_int(t.get("draft_n")),
        draft_accepted=_int(t.get("draft_n_accepted")),
        first_token_ms=first_token_ms,
    )
