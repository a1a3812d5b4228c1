"""Reading a chat-completions stream back into a ``Turn``, sans I/O.

``StreamAssembler`` is fed the parsed JSON of each SSE event and knows nothing of sockets, so every server's
quirk is tested here without a network. It is on the hot path of every streamed token: the common chunk
(one content delta) takes a handful of dict lookups and one fence check.

Nothing in a chunk is trusted to have the shape the API documents. A part of a chunk with the wrong shape
(an event that is not an object, ``choices`` that are not a list, a ``delta`` that is a string, content
that is a number, a fragment whose ``function`` is text) is skipped and counted in ``skipped``, so the
caller can say so once; what is kept is coerced to the type a ``Turn`` declares.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..arguments import parse_tool_arguments
from ..errors import ToolArgumentsError
from ..messages import SignedThinking, ToolCall, Turn
from ..usage import Usage
from .fences import DEFAULT_FENCES, Fence, FenceSplitter
from .repetition import ArgumentsWatch, RepetitionWatch

__all__ = ["Produced", "StreamAssembler", "stopped_short", "usage_from"]

TextCallback = Callable[[str], object]


class Produced:
    """One box per attempt: set once a listener has been shown something.

    "Shown" means text or reasoning released to ``on_output``/``on_thinking`` (whether or not one is
    attached). A tool-call header or arguments streaming in are not shown to anyone and start nothing, so
    a failure after them leaves the request free to be sent again. A caller with its own retry budget
    reads the box after a failure: output already shown cannot be redone, so a request that produced
    something must not be sent again.
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
        produced: the box set once anything has been shown (see ``Produced``).
        fences: thinking fences to take out of content; ``()`` reads content as all answer.
        start_in_reasoning: the prompt opened a thinking block, so content starts as reasoning.
        guessed_reasoning_start: ``start_in_reasoning`` is a guess from earlier replies (a latch), not the
            caller's word: a reply with no closing tag at all was answer after all, and is kept as such.
        output_held: ``on_output`` shows nothing until the turn is whole, so answer text sets no
            ``produced`` (reasoning still does).

    Attributes:
        active: something arrived that carries the turn (text, reasoning or a piece of a call); it need
            not have been shown yet.
        skipped: parts of chunks skipped for their shape, by what they were.
        opened_before_reply: a closing thinking tag came with no opening one: the reply began inside a
            thinking block the prompt opened, and the content released before the tag was reasoning.
        guess_was_wrong: ``guessed_reasoning_start`` was set and no closing tag ever came.
        looping: the answer or the thinking fell into a loop (``repetition.py``): the length of the piece
            it repeats; ``None`` until then.
        enough: why the answer has said enough, as the ``enough`` watch given read it; ``None`` until then.
    """

    def __init__(
        self,
        *,
        on_output: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
        produced: Produced | None = None,
        fences: Sequence[Fence] = DEFAULT_FENCES,
        start_in_reasoning: bool = False,
        guessed_reasoning_start: bool = False,
        output_held: bool = False,
        enough: Callable[[str], str | None] | None = None,
    ) -> None:
        self._on_output = on_output
        self._enough = enough
        self.enough: str | None = None
        self._output_held = output_held
        self._on_thinking = on_thinking
        self.produced = produced if produced is not None else Produced()
        self._splitter = FenceSplitter(
            fences, start_in_reasoning=start_in_reasoning or guessed_reasoning_start
        )
        self._guessed = guessed_reasoning_start and not start_in_reasoning
        self._field_reasoning: list[str] = []
        self._signed: list[SignedThinking] = []
        self._calls: list[_CallBuffer] = []
        self.finish_reason = ""
        # The reply's id and the model the server says answered, as chunks carry them (``id``, ``model``).
        self.response_id = ""
        self.response_model = ""
        self._usage: Mapping[str, Any] | None = None
        self._timings: Mapping[str, Any] | None = None
        self.error: Mapping[str, Any] | None = None
        # What the model said in declining (OpenAI's ``delta.refusal``), kept apart from the answer.
        self.refusal: list[str] = []
        self.active = False
        self.skipped: Counter[str] = Counter()
        self.opened_before_reply = False
        self.guess_was_wrong = False
        # Content held while a batch is fed: run through the fences and told once, at the batch's end.
        self._held: list[str] | None = None
        # The answer and the thinking, each watched for a loop (``repetition.py``): ``looping`` is then the
        # length of the piece repeated, and the attempt stops reading.
        self._answer_loop = RepetitionWatch()
        self._thinking_loop = RepetitionWatch()
        # So are the calls' arguments, as a server streams them: asked for ten burgers in Chinese, the 1.5B
        # model wrote the burger's name into a call's list of items for 800 s, until the window was full.
        # Arguments may hold a file's text, which may repeat itself where an answer would not (``ArgumentsWatch``).
        self._calls_loop = ArgumentsWatch()
        self.looping: int | None = None

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
                if type(chunk) is dict:
                    choices = chunk.get("choices")
                    if (
                        choices
                        and type(choices) is list
                        and not chunk.get("usage")
                        and "timings" not in chunk
                        and "error" not in chunk
                    ):
                        choice = choices[0]
                        delta = choice.get("delta") if type(choice) is dict else None
                        if type(delta) is dict and len(delta) <= 2 and not choice.get("finish_reason"):
                            content = delta.get("content")
                            if type(content) is str and (len(delta) == 1 or "role" in delta):
                                if content:
                                    self.active = True
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

    def feed(self, chunk: Any) -> None:
        """Take one parsed chunk (the JSON of one ``data:`` line), whatever its shape."""
        if not isinstance(chunk, Mapping):
            self._skip("events that are not JSON objects")
            return
        if chunk.get("error"):
            # An error inside the stream, with or without choices: a router sends it as a chunk whose
            # choice finishes with "error" and an empty delta, which read as a chunk is a blank reply.
            self.error = chunk
            return
        self._identity(chunk)
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            self._skip("choices that are not a list")
            choices = None
        if choices:
            choice = choices[0]
            if isinstance(choice, Mapping):
                self._choice(choice)
            else:
                self._skip("choices that are not objects")
            # llama.cpp puts timings on the finish chunk when usage is not asked for.
            if "timings" in chunk:
                self._take_timings(chunk["timings"])
        usage = chunk.get("usage")
        if usage:
            if isinstance(usage, Mapping):
                self._usage = usage
            else:
                self._skip("usage that is not an object")
            if "timings" in chunk:
                self._take_timings(chunk["timings"])

    def _identity(self, chunk: Mapping[str, Any]) -> None:
        # Read off the chunks that take the general path: a finish or usage chunk carries both on every
        # server that sends them, so the fast path of plain text pieces need not look. The first said wins.
        if not self.response_id:
            ident = chunk.get("id")
            if ident and isinstance(ident, str):
                self.response_id = ident
        if not self.response_model:
            model = chunk.get("model")
            if model and isinstance(model, str):
                self.response_model = model

    def _choice(self, choice: Mapping[str, Any]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            if delta:
                self._delta(delta)
        elif delta is not None:
            self._skip("deltas that are not objects")
        reason = choice.get("finish_reason")
        if reason:
            if isinstance(reason, str):
                self.finish_reason = reason
            else:
                self._skip("finish reasons that are not text")

    def _delta(self, delta: Mapping[str, Any]) -> None:
        content = delta.get("content")
        if content:
            text = _text_of(content)
            if text is None:
                self._skip("content that is not text")
            elif text:
                self.active = True
                self._content(text)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            text = _text_of(reasoning)
            if text is None:
                self._skip("reasoning that is not text")
            elif text:
                self._reasoning(text)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self.active = True
            self.refusal.append(refusal)
        calls = delta.get("tool_calls")
        if calls:
            if isinstance(calls, list):
                self._tool_calls(calls)
            else:
                self._skip("tool_calls that are not a list")
        blocks = delta.get("thinking_blocks")
        if blocks:
            signed = [SignedThinking.from_dict(b) for b in blocks] if isinstance(blocks, list) else [None]
            for block in signed:
                if block is None:
                    self._skip("thinking blocks of the wrong shape")
                else:
                    self.active = True
                    self._signed.append(block)

    def _take_timings(self, timings: Any) -> None:
        if isinstance(timings, Mapping):
            self._timings = timings
        elif timings is not None:
            self._skip("timings that are not an object")

    def _skip(self, what: str) -> None:
        self.skipped[what] += 1

    def _content(self, text: str) -> None:
        if self._held is not None:
            self._held.append(text)
            return
        splitter = self._splitter
        was_orphan = splitter.orphan_closed
        split = splitter.feed(text)
        reasoning = split.reasoning
        if splitter.orphan_closed and not was_orphan:
            # The content released before this closing tag was reasoning. It was told as answer already;
            # telling it again as reasoning would show it twice.
            self.opened_before_reply = True
            reasoning = reasoning[len(splitter.moved) :]
        self._tell(split.content, reasoning)

    def _tell(self, content: str, reasoning: str) -> None:
        if reasoning:
            self.produced.value = True
            self.looping = self.looping or self._thinking_loop.feed(reasoning)
            if self._on_thinking is not None:
                self._on_thinking(reasoning)
        if content:
            self.produced.value = self.produced.value or not self._output_held
            self.looping = self.looping or self._answer_loop.feed(content)
            if self._enough is not None and self.enough is None:
                self.enough = self._enough(content)
            if self._on_output is not None:
                self._on_output(content)

    def _reasoning(self, text: str) -> None:
        self.active = True
        self.produced.value = True
        # Content held before this reasoning is told first, so the order of the two is kept.
        self._tell_held()
        self._field_reasoning.append(text)
        self.looping = self.looping or self._thinking_loop.feed(text)
        if self._on_thinking is not None:
            self._on_thinking(text)

    def _tool_calls(self, fragments: Sequence[Any]) -> None:
        for fragment in fragments:
            if not isinstance(fragment, Mapping):
                self._skip("tool-call fragments that are not objects")
                continue
            fn = fragment.get("function")
            if fn is None:
                fn = {}
            elif not isinstance(fn, Mapping):
                self._skip("tool-call functions that are not objects")
                continue
            call_id = _identifier(fragment.get("id"))
            name = fn.get("name")
            if name is not None and not isinstance(name, str):
                self._skip("tool names that are not text")
                name = None
            name = name or ""
            if call_id is None:
                self._skip("tool-call ids that are not text")
                call_id = ""
            arguments = fn.get("arguments")
            index = fragment.get("index")
            call = self._target(index if type(index) is int else None, call_id, name)
            if name and not call.name:
                call.name = name
            if call_id and not call.id:
                call.id = call_id
            if arguments:
                if not isinstance(arguments, str):
                    # A few servers send the arguments already parsed.
                    arguments = _dumped(arguments)
                    if arguments is None:
                        self._skip("tool arguments that cannot be written as JSON")
                        continue
                call.arguments.append(arguments)
                self.looping = self.looping or self._calls_loop.feed(arguments)
            if arguments or name or call_id:
                self.active = True

    def _target(self, index: int | None, call_id: str, name: str) -> _CallBuffer:
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
            current = _CallBuffer(index, call_id, name)
            calls.append(current)
        return current

    def finish(self, *, first_token_ms: float | None = None) -> Turn:
        """The turn as read so far (call once, at the end of the stream)."""
        splitter = self._splitter
        tail = splitter.finish()
        self._tell(tail.content, tail.reasoning)
        content = splitter.content
        fenced = splitter.reasoning
        if self._guessed and splitter.never_left_start:
            # The guess that this model starts inside a thinking block was wrong for this reply: there was
            # no closing tag, so all of it was answer. It was shown as it came (as reasoning); the turn
            # keeps it as the answer, and the caller may stop guessing.
            self.guess_was_wrong = True
            content, fenced = fenced, ""
        reasoning = "".join(self._field_reasoning)
        if fenced:
            reasoning = reasoning + fenced if reasoning else fenced
        # A call stopped in a loop is as incomplete as one cut at the ceiling: its arguments are not healed.
        truncated = stopped_short(self.finish_reason)
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
            thinking=tuple(self._signed),
            response_id=self.response_id,
            response_model=self.response_model,
        )

    def skipped_notice(self) -> str:
        """One sentence saying what was skipped, or ``""`` when nothing was."""
        if not self.skipped:
            return ""
        parts = ", ".join(f"{count} × {what}" for what, count in sorted(self.skipped.items()))
        return f"skipped parts of the stream that did not have the shape of a chat-completions chunk: {parts}"


def stopped_short(finish_reason: str | None) -> bool:
    """Whether a turn that ended for ``finish_reason`` was stopped before it was done: at its token
    ceiling, or in a loop (``repetition.py``). A call it was writing then is incomplete."""
    return finish_reason in ("length", "repetition")


def _text_of(value: Any) -> str | None:
    """Content as text: a string, or content parts (``[{"type": "text", "text": ...}]``) joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, Mapping) for part in value):
        texts = [part.get("text") for part in value]
        if all(isinstance(text, str) for text in texts):
            return "".join(texts)
    return None


def _identifier(value: Any) -> str | None:
    """An id as text: a string as it is, a number written out; ``None`` for anything else."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _dumped(value: Any) -> str | None:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None


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


# A count past this is no count a server means (and int() of an infinity raises).
_MAX_COUNT = 10**15


def _int(value: Any) -> int | None:
    """A token count: a finite, non-negative number below any real count; ``None`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value) if 0 <= value < _MAX_COUNT else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


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
    u = usage if isinstance(usage, Mapping) else {}
    t = timings if isinstance(timings, Mapping) else {}
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
    written = _int(u.get("cache_creation_input_tokens"))
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
        cache_write_tokens=written,
        reasoning_tokens=reasoning,
        prompt_ms=_float(t.get("prompt_ms")),
        prompt_tokens_per_second=_float(t.get("prompt_per_second")),
        predicted_ms=_float(t.get("predicted_ms")),
        tokens_per_second=_float(t.get("predicted_per_second")),
        draft_total=_int(t.get("draft_n")),
        draft_accepted=_int(t.get("draft_n_accepted")),
        first_token_ms=first_token_ms,
    )
