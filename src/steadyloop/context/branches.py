"""Summarising the branch a session leaves when it moves to another point of its tree.

For hosts whose sessions are trees of entries (each with a parent): moving from the current leaf to
another entry leaves a branch behind, and what it did — the decisions, the files it read and changed —
would be lost with it. ``collect_branch`` finds the entries being left, ``prepare_branch`` keeps the newest
of them under a token budget and records the files their tool calls touched, and ``summarise_branch``
writes the summary the new position starts from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import InvalidInput
from ..messages import AssistantMessage, Message
from .compaction import serialize_for_summary, transcript_tokens
from .folding import Summarise
from .tokens import CHARS_PER_TOKEN

__all__ = [
    "BranchCollection",
    "BranchPreparation",
    "BranchSummary",
    "Entry",
    "collect_branch",
    "file_operations",
    "prepare_branch",
    "summarise_branch",
]

_PATH_ARGUMENTS = ("path", "file", "file_path", "filename")
# Checked first: a tool named "open_and_edit" changes the file it opens.
_MODIFY_WORDS = ("write", "edit", "create", "patch", "delete", "move")
_READ_WORDS = ("read", "cat", "view", "open")


@dataclass(frozen=True, slots=True)
class Entry:
    """One node of a session tree.

    Attributes:
        id: the entry's id.
        parent_id: its parent's id; ``None`` for a root.
        message: what it holds.
    """

    id: str
    parent_id: str | None
    message: Message


@dataclass(frozen=True, slots=True)
class BranchCollection:
    """The entries a move leaves behind.

    Attributes:
        entries: from just after the common ancestor to the old leaf, in chronological order.
        common_ancestor: the newest entry both positions descend from; ``None`` when they share none.
    """

    entries: tuple[Entry, ...]
    common_ancestor: str | None


@dataclass(frozen=True, slots=True)
class BranchPreparation:
    """What a branch summary is written from.

    Attributes:
        messages: the newest messages that fit the budget, in chronological order.
        read_files: paths the whole branch read and did not change, sorted.
        modified_files: paths the whole branch changed, sorted.
        total_tokens: the estimate of ``messages``.
    """

    messages: tuple[Message, ...]
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]
    total_tokens: int


@dataclass(frozen=True, slots=True)
class BranchSummary:
    """The summary of a branch left behind, with the files it touched.

    Attributes:
        summary: the summary; when the summariser gave nothing, a note saying how much was left behind.
        read_files: paths the branch read and did not change.
        modified_files: paths the branch changed.
        summarised: ``False`` when the summary is only that note.
    """

    summary: str
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]
    summarised: bool = True


def _path_to_root(entries: Mapping[str, Entry], start: str) -> list[str]:
    """Ids from ``start`` up to its root, stopping at a missing parent or a cycle."""
    path: list[str] = []
    seen: set[str] = set()
    current: str | None = start
    while current is not None and current in entries and current not in seen:
        seen.add(current)
        path.append(current)
        current = entries[current].parent_id
    return path


def collect_branch(entries: Mapping[str, Entry], old_leaf: str | None, target: str) -> BranchCollection:
    """The entries left behind by moving from ``old_leaf`` to ``target``.

    Walks up from the old leaf until it reaches an entry ``target`` descends from (``target`` itself
    included). Moving down the same branch leaves nothing behind.

    Raises:
        InvalidInput: ``target`` or ``old_leaf`` is not an entry.
    """
    for name, value in (("target", target), ("old_leaf", old_leaf)):
        if value is not None and value not in entries:
            raise InvalidInput(f"{name} {value!r} is not an entry of the session")
    ancestors = set(_path_to_root(entries, target))
    if old_leaf is None:
        return BranchCollection(entries=(), common_ancestor=None)
    left: list[Entry] = []
    common: str | None = None
    for entry_id in _path_to_root(entries, old_leaf):
        if entry_id in ancestors:
            common = entry_id
            break
        left.append(entries[entry_id])
    return BranchCollection(entries=tuple(reversed(left)), common_ancestor=common)


def file_operations(messages: Sequence[Message]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The paths the messages' tool calls read and modified, as ``(read_only, modified)``, each sorted.

    A path comes from an argument named ``path``, ``file``, ``file_path`` or ``filename``; the tool's name
    says what was done with it. A path both read and changed counts as changed.
    """
    read: set[str] = set()
    modified: set[str] = set()
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            name = call.name.lower()
            into = (
                modified
                if any(w in name for w in _MODIFY_WORDS)
                else read
                if any(w in name for w in _READ_WORDS)
                else None
            )
            if into is None:
                continue
            for argument in _PATH_ARGUMENTS:
                value = call.arguments.get(argument)
                if isinstance(value, str) and value:
                    into.add(value)
    return tuple(sorted(read - modified)), tuple(sorted(modified))


def prepare_branch(
    entries: Sequence[Entry], token_budget: int = 0, chars_per_token: float = CHARS_PER_TOKEN
) -> BranchPreparation:
    """The newest of the branch's messages that fit ``token_budget``, and the files the whole branch touched.

    Messages are taken newest first and stop at the first that does not fit, so what is kept is the end
    of the branch with no gaps in it; file operations are read from every entry, kept or not.

    Args:
        entries: the branch, in chronological order (``collect_branch``'s ``entries``).
        token_budget: the most tokens the messages may weigh; ``0`` means no limit.
        chars_per_token: the ratio they are weighed at.
    """
    messages = [entry.message for entry in entries]
    kept: list[Message] = []
    total = 0
    for message in reversed(messages):
        tokens = transcript_tokens([message], chars_per_token)
        if token_budget > 0 and total + tokens > token_budget:
            break
        kept.append(message)
        total += tokens
    read, modified = file_operations(messages)
    return BranchPreparation(
        messages=tuple(reversed(kept)), read_files=read, modified_files=modified, total_tokens=total
    )


def _file_lists(read: Sequence[str], modified: Sequence[str]) -> str:
    lines = []
    if read:
        lines.append("Files read: " + ", ".join(read))
    if modified:
        lines.append("Files modified: " + ", ".join(modified))
    return "\n".join(lines)


async def summarise_branch(preparation: BranchPreparation, summarise: Summarise) -> BranchSummary:
    """The summary of a branch being left, with the files it touched listed after it.

    Never raises (cancellation aside): when the summariser fails or gives nothing, the summary says how
    many messages were left behind, so the move still records that a branch was there.
    """
    files = _file_lists(preparation.read_files, preparation.modified_files)
    text: str | None = None
    if preparation.messages:
        request = (
            "This branch of the conversation is being left for another; summarise what it did and found.\n\n"
            + serialize_for_summary(preparation.messages)
        )
        try:
            reply = await summarise(request)
        except Exception:
            reply = None
        text = reply.strip() if isinstance(reply, str) and reply.strip() else None
    count = len(preparation.messages)
    body = text or f"[branch summary unavailable: {count} message{'s' if count != 1 else ''} left behind]"
    return BranchSummary(
        summary=f"{body}\n\n{files}" if files else body,
        read_files=preparation.read_files,
        modified_files=preparation.modified_files,
        summarised=text is not None,
    )
