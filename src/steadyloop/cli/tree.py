"""A session's tree drawn for the terminal: what ``/tree`` in the chat prints.

Each entry is one line: its number (what ``/branch N`` takes), who said it, and its first words. A run of
entries without a fork stays at one indentation, so a long conversation reads top to bottom; where an entry
has more than one child, each child's branch is drawn under it with ``├─`` and ``└─``. The entry the
conversation continues from is marked.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..context import BRANCH_SUMMARY_LEAD, Entry
from ..messages import AssistantMessage, ToolResultMessage, UserMessage, text_of

__all__ = ["HERE", "entry_label", "tree_lines"]

#: Put after the entry the conversation continues from.
HERE = "  ← here"

_FORK, _LAST, _PIPE, _GAP = "├─ ", "└─ ", "│  ", "   "


def _words(text: str, width: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def entry_label(entry: Entry, width: int = 60) -> str:
    """``N role: first words`` for one entry."""
    message = entry.message
    if isinstance(message, UserMessage):
        text = text_of(message.content)
        if entry.files is not None or text.startswith(BRANCH_SUMMARY_LEAD):
            return f"{entry.id} summary: {_words(text.removeprefix(BRANCH_SUMMARY_LEAD), width)}"
        return f"{entry.id} user: {_words(text, width)}"
    if isinstance(message, AssistantMessage):
        calls = ", ".join(f"{call.name}()" for call in message.tool_calls)
        text = " ".join(part for part in (message.content.strip(), f"→ {calls}" if calls else "") if part)
        return f"{entry.id} assistant: {_words(text, width)}"
    if isinstance(message, ToolResultMessage):
        name = f" {message.name}" if message.name else ""
        return f"{entry.id} tool{name}: {_words(text_of(message.content), width)}"
    return f"{entry.id} {message.role}: {_words(text_of(message.content), width)}"


def tree_lines(entries: Sequence[Entry], leaf: str | None, width: int = 60) -> list[str]:
    """The entries as lines of a tree, oldest first, ``leaf`` marked with ``HERE``.

    An entry whose parent is not among ``entries`` (trimmed by the history cap) is drawn as a root, at the
    left edge like the first.
    """
    known = {entry.id for entry in entries}
    children: dict[str | None, list[Entry]] = {}
    for entry in entries:
        parent = entry.parent_id if entry.parent_id in known else None
        children.setdefault(parent, []).append(entry)
    lines: list[str] = []
    # (entry, what its own line starts with, what the lines under it start with); a stack, not recursion,
    # because a conversation is one long chain.
    stack: list[tuple[Entry, str, str]] = []

    def push(kids: list[Entry], prefix: str) -> None:
        if len(kids) == 1:
            stack.append((kids[0], prefix, prefix))
            return
        for index in range(len(kids) - 1, -1, -1):
            last = index == len(kids) - 1
            stack.append(
                (kids[index], prefix + (_LAST if last else _FORK), prefix + (_GAP if last else _PIPE))
            )

    for root in reversed(children.get(None, [])):  # roots side by side at the left edge, oldest first
        stack.append((root, "", ""))
    while stack:
        entry, first, rest = stack.pop()
        lines.append(first + entry_label(entry, width) + (HERE if entry.id == leaf else ""))
        push(children.get(entry.id, []), rest)
    return lines
