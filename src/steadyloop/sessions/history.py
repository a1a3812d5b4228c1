"""A stored transcript turned back into one a server accepts; no I/O.

A store keeps messages exactly as they were appended, thinking included, so the record is faithful. What
was appended is not always a transcript a server takes: the history cap may have cut a tool-use turn in
half, leaving results whose call is gone, and a process that died between writing an assistant's calls and
their results leaves a turn that was never answered. ``reconstruct`` drops both, and any other call group
that is not answered in full, because inventing results for calls nobody saw finish would fabricate
history. Thinking is not replayed: a provider may bind its reasoning to the request that produced it and
refuse it elsewhere, and the calls and results already carry what was done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..messages import AssistantMessage, Message, ToolResultMessage

__all__ = ["is_balanced", "reconstruct"]


def reconstruct(messages: Sequence[Message], *, replay_reasoning: bool = False) -> list[Message]:
    """The request transcript for a stored history: every call answered by exactly one result right after it.

    Drops tool results with no open call before them (the leading orphans a history cap leaves, or
    duplicates), and every assistant message whose calls are not all answered before the next other
    message, together with the partial results it has (an interrupted tool-use turn, at the end or, when a
    later run went on after one, in the middle). A call id used twice keeps only its first group.

    Args:
        messages: the stored messages, oldest first.
        replay_reasoning: keep assistant messages' thinking; off by default, so an assistant message left
            with nothing but thinking is dropped too.

    Returns:
        A new list; ``messages`` is not changed.
    """
    out: list[Message] = []
    used_ids: set[str] = set()
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        i += 1
        if isinstance(message, ToolResultMessage):
            continue  # no call is open here: its assistant message was trimmed, dropped or never written
        if not isinstance(message, AssistantMessage):
            out.append(message)
            continue
        if not replay_reasoning and message.reasoning:
            message = replace(message, reasoning="")
        if not message.tool_calls:
            if message.content or message.reasoning:
                out.append(message)
            continue
        ids = [call.id for call in message.tool_calls]
        answers: dict[str, ToolResultMessage] = {}
        while i < n and isinstance(result := messages[i], ToolResultMessage):
            if result.call_id in ids and result.call_id not in answers:
                answers[result.call_id] = result
            i += 1
        fresh = len(set(ids)) == len(ids) and used_ids.isdisjoint(ids)
        if fresh and len(answers) == len(ids):
            used_ids.update(ids)
            out.append(message)
            out.extend(answers.values())
    return out


def is_balanced(messages: Sequence[Message]) -> bool:
    """Whether every call is answered by exactly one result right after its message, and nothing else is.

    Results within a group may come in any order; a call id may not be used twice in the transcript.
    """
    used_ids: set[str] = set()
    open_ids: set[str] = set()
    for message in messages:
        if isinstance(message, ToolResultMessage):
            if message.call_id not in open_ids:
                return False
            open_ids.discard(message.call_id)
            continue
        if open_ids:
            return False
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [call.id for call in message.tool_calls]
            if len(set(ids)) != len(ids) or not used_ids.isdisjoint(ids):
                return False
            used_ids.update(ids)
            open_ids.update(ids)
    return not open_ids
