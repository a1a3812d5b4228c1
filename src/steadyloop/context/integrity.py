"""Transcript integrity: the rules a server enforces on tool calls and results, checked before a request.

Every call an assistant message makes must be answered by exactly one result, and the results must come
right after it, before anything else. A transcript missing only some results at the end of a call group is
repaired with synthetic results (what happened to those calls is known: they never ran, or were stopped);
anything ambiguous (a duplicate call id, an orphan or duplicate result, a message wedged between a call
and its result) fails closed with a ``TranscriptError``, because guessing would fabricate history.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import TranscriptError
from ..messages import AssistantMessage, Message, ToolCall, ToolResultMessage

__all__ = ["NOT_RUN", "STOPPED", "check_transcript", "unique_call_ids"]

#: The answer given to a call that never started.
NOT_RUN = "Not run: the run stopped first."
#: The answer given to a call that was interrupted.
STOPPED = "Stopped before this call finished."


def check_transcript(
    messages: Sequence[Message], *, interrupted: frozenset[str] = frozenset()
) -> list[Message]:
    """The transcript with missing results repaired, or a ``TranscriptError`` when it is ambiguous.

    Args:
        messages: the transcript.
        interrupted: ids of calls that started and were stopped (answered ``STOPPED``); any other missing
            call is answered ``NOT_RUN``.

    Raises:
        TranscriptError: duplicate call ids, an orphan or duplicate result, or a message between a call
            and its result.
    """
    out: list[Message] = []
    seen_calls: set[str] = set()
    open_calls: dict[str, ToolCall] = {}  # calls of the current group still waiting for a result
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            call_id = message.call_id
            if call_id in answered:
                raise TranscriptError(f"message {index}: a second result for call {call_id!r}", index=index)
            if call_id not in open_calls:
                raise TranscriptError(
                    f"message {index}: a result for call {call_id!r}, which no preceding assistant message made",
                    index=index,
                )
            del open_calls[call_id]
            answered.add(call_id)
            out.append(message)
            continue
        if open_calls:
            if _answered_later(messages, index, open_calls):
                raise TranscriptError(
                    f"message {index} ({message.role}) comes between tool calls and their results "
                    f"({', '.join(sorted(open_calls))})",
                    index=index,
                )
            _close(out, open_calls, interrupted)
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                if call.id in seen_calls:
                    raise TranscriptError(f"message {index}: call id {call.id!r} is used twice", index=index)
                seen_calls.add(call.id)
                open_calls[call.id] = call
        out.append(message)
    if open_calls:
        _close(out, open_calls, interrupted)
    return out


def _answered_later(messages: Sequence[Message], start: int, open_calls: dict[str, ToolCall]) -> bool:
    # A result for an open call further on means something was wedged in: ambiguous, not a missing tail.
    for later in messages[start + 1 :]:
        if isinstance(later, ToolResultMessage) and later.call_id in open_calls:
            return True
    return False


def _close(out: list[Message], open_calls: dict[str, ToolCall], interrupted: frozenset[str]) -> None:
    for call_id, call in open_calls.items():
        text = STOPPED if call_id in interrupted else NOT_RUN
        out.append(ToolResultMessage(call_id=call_id, content=text, is_error=True, name=call.name))
    open_calls.clear()


def unique_call_ids(calls: Sequence[ToolCall], taken: set[str]) -> list[ToolCall]:
    """The calls with ids made unique against ``taken`` (which is updated).

    Some servers number calls ``call_0`` afresh on every turn; renaming at the source keeps every later
    request unambiguous.
    """
    out: list[ToolCall] = []
    for call in calls:
        new_id = call.id or "call"
        if new_id in taken:
            n = 2
            while f"{new_id}_{n}" in taken:
                n += 1
            new_id = f"{new_id}_{n}"
        taken.add(new_id)
        out.append(
            call if new_id == call.id else ToolCall(new_id, call.name, call.arguments, call.raw_arguments)
        )
    return out
