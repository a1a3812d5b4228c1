"""Reading a chat body's messages, sans I/O: the text of a message, the last request and what came after it.

The routed step's readers (the gates, the grounding check, the answer's watch) take the body as it is sent:
a list of OpenAI-shaped messages, any of which may be malformed; what is no mapping is passed over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["before_request", "chat_text", "last_request", "request_and_result_texts"]


def chat_text(content: Any) -> str:
    """The text parts of a chat message's ``content`` (a string, or a list of parts), one per line."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def last_request(messages: Sequence[Any]) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """The last user message of a chat body's ``messages`` (None if there is none), and the messages after
    it in order (every message, if there is none); what is no mapping is not a message and is passed over."""
    after: list[Mapping[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "user":
            return message, after[::-1]
        after.append(message)
    return None, after[::-1]


def request_and_result_texts(messages: Sequence[Any]) -> tuple[str, list[str]]:
    """The last user message of a chat body's ``messages``, and the tool results after it, as text."""
    user, after = last_request(messages)
    request = "" if user is None else chat_text(user.get("content"))
    return request, [chat_text(message.get("content")) for message in after if message.get("role") == "tool"]


def before_request(messages: Sequence[Any]) -> str:
    """The text of every message before the last user message (the system prompt, earlier requests,
    answers and tool results), one per line; all of them if there is no user message."""
    last = max(
        (i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"),
        default=None,
    )
    earlier = messages if last is None else messages[:last]
    return "\n".join(chat_text(m.get("content")) for m in earlier if isinstance(m, Mapping))
