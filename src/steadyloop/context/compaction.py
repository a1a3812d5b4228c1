"""Folding the oldest stretch of a transcript into a summary: where to cut, and the way back (sans-I/O).

``plan_compaction`` says where to fold once the window is three quarters full; ``apply_compaction`` turns a
stored ``Fold`` into the request a model sees; ``request_index`` maps a stored position onto that request.
Writing the summary (a model call, and hooks that may veto it) lives in ``folding``.

Two hosts share one cut. A host whose transcript is an array rewrites it (``compact_transcript``); the
summary then sits in the array as a system message led by ``SUMMARY_LEAD``, and the next plan reads it back
and continues it. A host whose transcript is append-only rows stores the ``Fold`` beside them and passes
``from_`` and ``previous`` to the next plan, so nothing has to be read back out of the messages.

Where the summary goes in a request is a choice (``SummaryPlacement``). As a second system message
(``"system"``) it is what an array host can read back. Many chat templates take one system message and
only at the start (Qwen3.5's raises "System message must be at the beginning"; Gemma's and older
Mistral's insist that user and assistant alternate), so a host that keeps its fold beside the messages
puts it at the start of the first kept user message instead (``"user"``): the request then has the one
leading system prompt and alternates as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import TypeAdapter, ValidationError

from ..errors import InvalidInput
from ..messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolResultMessage,
    UserMessage,
    text_of,
    to_openai,
)
from ..sizing.tokens import CHARS_PER_TOKEN, IMAGE_TOKENS, context_chars

__all__ = [
    "SERIALIZED_MAX_CHARS",
    "SUMMARY_END",
    "SUMMARY_LEAD",
    "TAIL_SHARE",
    "CompactionPlan",
    "Fold",
    "SummaryPlacement",
    "apply_compaction",
    "fold_from_json",
    "fold_to_json",
    "plan_compaction",
    "request_index",
    "serialize_for_summary",
    "summary_message",
    "summary_on_question",
    "transcript_tokens",
]

#: How every summary message begins; ``plan_compaction`` finds an earlier summary by it.
SUMMARY_LEAD = "[Summary of the earlier conversation, folded to free context space]"

#: What separates the summary from the user's own words when it rides on their message.
SUMMARY_END = "[End of summary; the conversation continues]"

SummaryPlacement: TypeAlias = Literal["system", "user"]
"""Where ``apply_compaction`` puts a summary: a system message after the leading ones, or the start of the
first kept user message."""

#: The most of the window the kept tail may fill.
TAIL_SHARE = 0.35

#: How much serialized conversation a summariser is sent; the rest is marked as cut off.
SERIALIZED_MAX_CHARS = 50_000


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """Where to fold: ``messages[start:through]`` goes into the summary, ``messages[through:]`` stays.

    Attributes:
        head: ``messages[:head]`` (the leading system messages) stay ahead of the summary.
        start: the first folded index. ``start == through`` when there is nothing to fold.
        through: the index of the first kept message, always a user message when something is folded.
        previous: the earlier summary the new one continues, if there is one.
        tokens_before: the estimate of the whole transcript.
        tokens_kept: the estimate of what stays (head and tail), before the summary is added.
        reason: why nothing can be folded; ``""`` when something can.
    """

    head: int
    start: int
    through: int
    previous: str | None
    tokens_before: int
    tokens_kept: int
    reason: str = ""

    @property
    def foldable(self) -> bool:
        """Whether the plan folds anything; when not, pruning is what can still make room."""
        return self.start < self.through

    @property
    def folded(self) -> int:
        """How many messages the plan folds."""
        return self.through - self.start


@dataclass(frozen=True, slots=True, kw_only=True)
class Fold:
    """A fold as an append-only host stores it: what replaced ``messages[head:through]``.

    Attributes:
        summary: the summary text, without ``SUMMARY_LEAD``.
        through: the stored index of the first message kept after the summary.
        at: when the fold was made, in seconds since the epoch.
        folded: how many messages the summary took the place of (an earlier summary not counted).
        summarised: ``False`` when the summariser gave nothing and the summary only says what was dropped.
        head: ``messages[:head]`` (the leading system messages) stay ahead of the summary.
    """

    summary: str
    through: int
    at: float
    folded: int
    summarised: bool = True
    head: int = 0


_FOLD = TypeAdapter(Fold)


def fold_to_json(fold: Fold) -> str:
    """The fold as JSON text, for storing on a session."""
    return _FOLD.dump_json(fold).decode()


def fold_from_json(text: str | bytes) -> Fold:
    """A fold back from ``fold_to_json``'s output.

    Raises:
        InvalidInput: the text is not a fold.
    """
    try:
        return _FOLD.validate_json(text)
    except ValidationError as exc:
        raise InvalidInput(f"not a steadyloop fold: {exc}") from None


def _is_summary(message: Message) -> bool:
    return isinstance(message, SystemMessage) and message.content.startswith(SUMMARY_LEAD)


def _summary_text(message: SystemMessage) -> str:
    return message.content.removeprefix(SUMMARY_LEAD).strip()


def summary_message(summary: str) -> SystemMessage:
    """The system message a summary travels in, led by ``SUMMARY_LEAD`` so the next plan can find it."""
    return SystemMessage(content=f"{SUMMARY_LEAD}\n\n{summary}")


def _head(messages: Sequence[Message]) -> int:
    # An earlier summary ends the head: it is replaced by the new one, not kept ahead of it.
    head = 0
    while (
        head < len(messages) and isinstance(messages[head], SystemMessage) and not _is_summary(messages[head])
    ):
        head += 1
    return head


def _weights(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """Characters (framing included) and images per message, weighed as the request sizing weighs them."""
    out = []
    for message in messages:
        parts = context_chars({"messages": [to_openai(message)]})
        out.append((parts.total, parts.images))
    return out


def _tokens(weights: Sequence[tuple[int, int]], ratio: float) -> int:
    chars = sum(c for c, _ in weights)
    images = sum(i for _, i in weights)
    return (math.ceil(chars / ratio) if chars > 0 else 0) + images * IMAGE_TOKENS


def _check_ratio(chars_per_token: float) -> float:
    if isinstance(chars_per_token, bool) or not isinstance(chars_per_token, int | float):
        raise InvalidInput(f"chars_per_token must be a number above zero, got {chars_per_token!r}")
    if not math.isfinite(chars_per_token) or chars_per_token <= 0:
        raise InvalidInput(f"chars_per_token must be a number above zero, got {chars_per_token!r}")
    return float(chars_per_token)


def transcript_tokens(messages: Sequence[Message], chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """The tokens messages are guessed to weigh in a request, counted the way request sizing counts them."""
    return _tokens(_weights(messages), _check_ratio(chars_per_token))


def _unsafe_cuts(messages: Sequence[Message]) -> list[bool]:
    """``unsafe[i]``: cutting before ``messages[i]`` would part a tool call from its result."""
    made_at: dict[str, int] = {}
    marks = [0] * (len(messages) + 1)
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                made_at[call.id] = index
        elif isinstance(message, ToolResultMessage) and message.call_id in made_at:
            # Every cut after the call and up to the result would leave the result answering nothing.
            marks[made_at[message.call_id] + 1] += 1
            marks[index + 1] -= 1
    unsafe, depth = [], 0
    for index in range(len(messages)):
        depth += marks[index]
        unsafe.append(depth > 0)
    return unsafe


def plan_compaction(
    messages: Sequence[Message],
    *,
    limit: int,
    used: int,
    chars_per_token: float = CHARS_PER_TOKEN,
    from_: int | None = None,
    previous: str | None = None,
) -> CompactionPlan | None:
    """Where to fold the oldest stretch, or ``None`` while the window is not yet three quarters full.

    The kept tail is as long as fits in ``TAIL_SHARE`` of the window and starts on a user message, since a
    request that resumes mid-exchange is one servers refuse; the cut never parts a tool call from its result.
    Should no cut leave a tail that small, the cut falls on the latest user message: everything before the
    question being worked on still goes. One long tool run under a single question has no cut at all, and
    the plan says so (``foldable`` is ``False``, ``reason`` says why); pruning is what keeps that run going.

    Args:
        messages: the transcript, as stored.
        limit: the model's window, in tokens; ``0`` (unknown) never plans.
        used: what the window holds now: the last prompt's tokens, or an estimate.
        chars_per_token: the ratio the tail is weighed at.
        from_: where the stored fold ended (an append-only host's ``Fold.through``); given, the earlier
            summary is not looked for among the messages. By default the fold starts after the leading
            system messages and after an earlier summary found among them.
        previous: the earlier summary to continue; given, it is not read out of the messages.

    Raises:
        InvalidInput: ``from_`` is outside the transcript, or the ratio is not a positive number.
    """
    ratio = _check_ratio(chars_per_token)
    if limit <= 0 or used * 4 <= limit * 3:
        return None
    head = _head(messages)
    if from_ is not None:
        if not 0 <= from_ <= len(messages):
            raise InvalidInput(
                f"from_ must be an index into the transcript (0..{len(messages)}), got {from_}"
            )
        start = max(from_, head)
    else:
        start = head
        if start < len(messages) and _is_summary(messages[start]):
            found = messages[start]
            assert isinstance(found, SystemMessage)
            if previous is None:
                previous = _summary_text(found)
            start += 1
    weights = _weights(messages)
    tokens_before = _tokens(weights, ratio)
    unsafe = _unsafe_cuts(messages)
    cuts = [
        i for i in range(start + 1, len(messages)) if isinstance(messages[i], UserMessage) and not unsafe[i]
    ]
    if not cuts:
        reason = (
            "nothing to fold: everything after the kept head is one run under a single question"
            if start < len(messages)
            else "nothing to fold: nothing follows the kept head"
        )
        return CompactionPlan(
            head=head,
            start=start,
            through=start,
            previous=previous,
            tokens_before=tokens_before,
            tokens_kept=tokens_before,
            reason=reason,
        )
    budget = math.floor(limit * TAIL_SHARE)
    # Cuts are in order, so the first that fits keeps the longest tail the budget allows.
    through = next((i for i in cuts if _tokens(weights[i:], ratio) <= budget), cuts[-1])
    return CompactionPlan(
        head=head,
        start=start,
        through=through,
        previous=previous,
        tokens_before=tokens_before,
        tokens_kept=_tokens(weights[:head] + weights[through:], ratio),
    )


def summary_on_question(summary: str, question: UserMessage) -> UserMessage:
    """A user message carrying the summary ahead of the user's own words (the ``"user"`` placement)."""
    lead = f"{SUMMARY_LEAD}\n\n{summary}\n\n{SUMMARY_END}"
    if isinstance(question.content, str):
        return UserMessage(content=f"{lead}\n\n{question.content}" if question.content else lead)
    return UserMessage(content=(TextPart(f"{lead}\n\n"), *question.content))


def _merges(messages: Sequence[Message], fold: Fold, placement: SummaryPlacement) -> bool:
    return (
        placement == "user"
        and fold.through < len(messages)
        and isinstance(messages[fold.through], UserMessage)
    )


def apply_compaction(
    messages: Sequence[Message], fold: Fold | None, *, placement: SummaryPlacement = "system"
) -> list[Message]:
    """The request a stored transcript stands for: its head, the summary, then everything from ``through``.

    Without a fold the messages are handed back as they are (in a new list).

    Args:
        messages: the stored transcript.
        fold: the fold in force.
        placement: ``"system"`` sends the summary as a system message after the head; ``"user"`` puts it
            at the start of the first kept message (a user message, where every cut lands), so the request
            keeps a single leading system prompt. See the module docstring.

    Raises:
        InvalidInput: the fold does not fit this transcript.
    """
    if fold is None:
        return list(messages)
    if not 0 <= fold.head <= fold.through <= len(messages):
        raise InvalidInput(
            f"the fold (head {fold.head}, through {fold.through}) does not fit "
            f"a transcript of {len(messages)} messages"
        )
    if _merges(messages, fold, placement):
        first = messages[fold.through]
        assert isinstance(first, UserMessage)
        return [
            *messages[: fold.head],
            summary_on_question(fold.summary, first),
            *messages[fold.through + 1 :],
        ]
    if placement == "user":  # nothing kept after the fold to carry it: the summary is the question
        lead = UserMessage(content=f"{SUMMARY_LEAD}\n\n{fold.summary}")
        return [*messages[: fold.head], lead, *messages[fold.through :]]
    return [*messages[: fold.head], summary_message(fold.summary), *messages[fold.through :]]


def request_index(index: int, fold: Fold | None, *, placement: SummaryPlacement = "system") -> int | None:
    """Where the stored message at ``index`` sits in ``apply_compaction``'s request; ``None`` if folded away.

    With the ``"user"`` placement the first kept message carries the summary and keeps its place (a fold
    made by ``plan_compaction`` always keeps a user message first).

    Raises:
        InvalidInput: a negative index.
    """
    if index < 0:
        raise InvalidInput(f"a stored index is never negative, got {index}")
    if fold is None or index < fold.head:
        return index
    if index < fold.through:
        return None
    extra = 0 if placement == "user" else 1
    return index - fold.through + fold.head + extra


def _content_text(content: str | Sequence[Any]) -> str:
    text = text_of(content)
    if isinstance(content, str):
        return text
    images = sum(isinstance(p, ImagePart) for p in content)
    return text + (f"\n[{images} image{'s' if images != 1 else ''}]" if images else "")


def _serialize(message: Message) -> str:
    if isinstance(message, SystemMessage):
        return f"[system]\n{message.content}"
    if isinstance(message, UserMessage):
        return f"[user]\n{_content_text(message.content)}"
    if isinstance(message, ToolResultMessage):
        label = message.name or message.call_id
        failed = " (error)" if message.is_error else ""
        return f"[tool result: {label}{failed}]\n{_content_text(message.content)}"
    lines = ["[assistant]"]
    if message.content:
        lines.append(message.content)
    for call in message.tool_calls:
        arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
        lines.append(f"[called: {call.name}({arguments})]")
    return "\n".join(lines)


def serialize_for_summary(messages: Sequence[Message], max_chars: int = SERIALIZED_MAX_CHARS) -> str:
    """The messages as role-tagged text for a summariser, tool calls and results marked.

    Reasoning is left out: it is the model's scratchpad, and the calls and answers carry what it decided.
    Past ``max_chars`` the text is cut, with a marker saying how much was left out.
    """
    text = "\n\n".join(_serialize(m) for m in messages)
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}\n[... truncated: {len(text) - max_chars:,} more characters ...]"
