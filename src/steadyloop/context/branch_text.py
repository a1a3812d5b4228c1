"""A branch left behind, written as text a summariser can read (sans I/O).

Given a transcript in its own shape (role tags, a call's JSON, a tool result or an unfinished answer
last), a small model reads a conversation to carry on, not one to summarise: asked so, the bundled 1.5B
model answered nothing. ``branch_request`` writes the branch as an account instead, one entry per
message: what the user asked (images named), what the assistant answered, each call as a person reads it
(``list_dir(path=".")``), each result in a few words, an answer that was cut off marked as such; and the
request to summarise comes after the branch, so the prompt ends in what the model is asked to do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from ..messages import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Message,
    SystemMessage,
    ToolResultMessage,
    text_of,
)

__all__ = ["RESULT_CHARS", "branch_request", "message_lines"]

#: The most characters of a tool result the account keeps: what it found, not all of it.
RESULT_CHARS = 300
_ARGUMENT_CHARS = 80
_URL_CHARS = 80
_SPACE = re.compile(r"\s+")
_NOT_RUN = {
    "blocked": "was not run (it was refused)",
    "skipped": "was not run (skipped)",
    "aborted": "was stopped before it finished",
    "timeout": "took too long and was stopped",
}


def branch_request(
    messages: Sequence[Message], *, cut_off: Collection[int] = (), instructions: str | None = None
) -> str:
    """The summariser's question: the branch as an account, then what to write.

    Args:
        messages: the branch's messages, oldest first.
        cut_off: indexes into ``messages`` of answers that were cut off before they finished.
        instructions: the host's own words on what the summary should focus on.
    """
    lines = [
        "Here is a branch of a conversation that is being left for another, oldest first.",
        "",
        "<branch>",
    ]
    for index, message in enumerate(messages):
        lines.extend(message_lines(message, cut_off=index in cut_off))
    lines += ["</branch>", ""]
    if instructions and instructions.strip():
        lines.append(f"The user asks the account to focus on this: {instructions.strip()}")
    lines.append("Write the account of this branch now: what was attempted, and what was found or decided.")
    return "\n".join(lines)


def message_lines(message: Message, *, cut_off: bool = False) -> list[str]:
    """One message of a branch as the lines of the account; ``cut_off`` marks an unfinished answer."""
    if isinstance(message, ToolResultMessage):
        return [_result_line(message)]
    if isinstance(message, AssistantMessage):
        return _assistant_lines(message, cut_off)
    who = "System" if isinstance(message, SystemMessage) else "User"
    return [f"{who}: {_indented(_content(message.content)) or '(nothing)'}"]


def _assistant_lines(message: AssistantMessage, cut_off: bool) -> list[str]:
    lines: list[str] = []
    text = _indented(message.content.strip())
    if cut_off:
        lines.append(
            f"Assistant (cut off before it finished): {text}"
            if text
            else "Assistant (cut off before it wrote anything)."
        )
    elif text:
        lines.append(f"Assistant: {text}")
    lines += [f"Assistant called {_call(call.name, call.arguments)}." for call in message.tool_calls]
    return lines or ["Assistant: (nothing)"]


def _result_line(message: ToolResultMessage) -> str:
    name = message.name or f"the call {message.call_id}"
    said = _shortened(_content(message.content))
    outcome = _NOT_RUN.get(message.disposition or "")
    if outcome is not None:
        return f"{name} {outcome}" + (f": {said}" if said else ".")
    if message.is_error:
        return f"{name} failed: {said}" if said else f"{name} failed."
    return f"{name} returned: {said}" if said else f"{name} returned nothing."


def _call(name: str, arguments: dict[str, Any]) -> str:
    shown = []
    for key, value in arguments.items():
        text = json.dumps(value, ensure_ascii=False)
        if len(text) > _ARGUMENT_CHARS:
            text = text[: _ARGUMENT_CHARS - 1] + "…"
        shown.append(f"{key}={text}")
    return f"{name}({', '.join(shown)})"


def _content(content: str | Sequence[ContentPart]) -> str:
    """A message's text with its images named where they were."""
    if isinstance(content, str):
        return content.strip()
    text = text_of(content).strip()
    images = [_image(part) for part in content if isinstance(part, ImagePart)]
    return " ".join([text, *images]).strip()


def _image(part: ImagePart) -> str:
    if part.mime_type is not None or part.url.startswith("data:"):
        return f"[an image ({part.mime_type or 'inline'})]"
    url = part.url if len(part.url) <= _URL_CHARS else part.url[: _URL_CHARS - 1] + "…"
    return f"[an image: {url}]"


def _shortened(text: str) -> str:
    """A tool result in a few words: on one line, and cut with how much was left out."""
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= RESULT_CHARS:
        return flat
    return f"{flat[:RESULT_CHARS].rstrip()} … ({len(flat) - RESULT_CHARS:,} more characters)"


def _indented(text: str) -> str:
    """Text whose later lines are indented, so each entry of the account still starts its own line."""
    return "\n  ".join(text.splitlines())
