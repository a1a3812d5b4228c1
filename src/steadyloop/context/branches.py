"""Summarising the branch a session leaves when it moves to another point of its tree.

For hosts whose sessions are trees of entries (each with a parent): moving from the current leaf to
another entry leaves a branch behind, and what it did — the decisions, the files it read and changed —
would be lost with it. ``collect_branch`` finds the entries being left, ``prepare_branch`` keeps the newest
of them under a token budget (``branch_budget``: the window less a reserve for the prompt and the reply)
and records the files their tool calls touched, carrying forward the files of summaries already in the
branch, and ``summarise_branch`` writes the summary the new position starts from, with the host's own
instructions if it has any, from the branch written as an account (``branch_text.py``: calls and results
as lines, answers that were cut off marked, images named). A summary that was aborted or failed says so
(``aborted``, ``error``), and the move is then the host's to call off. ``branch_summary_message`` is the
message the summary travels in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from .._cancel import CANCELLED, unless_cancelled
from ..errors import InvalidInput, SteadyloopError
from ..events import Event, SideTask
from ..messages import AssistantMessage, Message, UserMessage
from ..sizing.tokens import CHARS_PER_TOKEN
from ..turn.side_tasks import ask
from ..wire.endpoints import ApiKeyResolver, Endpoint, with_resolved_key
from ..wire.interceptors import Interceptors
from .branch_text import branch_request
from .compaction import transcript_tokens
from .folding import Summarise

__all__ = [
    "BRANCH_SUMMARY_LEAD",
    "BRANCH_SUMMARY_PROMPT",
    "DEFAULT_RESERVE_TOKENS",
    "BranchCollection",
    "BranchFiles",
    "BranchMove",
    "BranchPreparation",
    "BranchSummary",
    "Entry",
    "branch_budget",
    "branch_summariser",
    "branch_summary_message",
    "collect_branch",
    "file_operations",
    "prepare_branch",
    "summarise_branch",
]

#: Tokens kept back from the window for the summary request's own prompt and its reply.
DEFAULT_RESERVE_TOKENS = 16384

#: What a branch summary opens with in the transcript, so a reader (and the model) knows what it is.
BRANCH_SUMMARY_LEAD = "[The conversation came back here from another branch. What that branch did:]"

BRANCH_SUMMARY_PROMPT = """\
You write a short account of a branch of a conversation that is being left for another. The conversation \
carries on from an earlier point without that branch's messages, so your account is all that remains of it.

Write, briefly and concretely:
- what was attempted, and what was found or decided;
- what worked and what did not, with the reason where it was given;
- anything the user asked for in that branch that still matters.

Do not continue the work and do not address the user. Plain text, no preamble."""

_PATH_ARGUMENTS = ("path", "file", "file_path", "filename")
# Checked first: a tool named "open_and_edit" changes the file it opens.
_MODIFY_WORDS = ("write", "edit", "create", "patch", "delete", "move")
_READ_WORDS = ("read", "cat", "view", "open")


@dataclass(frozen=True, slots=True)
class BranchFiles:
    """The files a branch read and changed, kept on the entry that summarises it.

    Attributes:
        read_files: paths read and not changed, sorted.
        modified_files: paths changed, sorted.
    """

    read_files: tuple[str, ...] = ()
    modified_files: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Entry:
    """One node of a session tree.

    Attributes:
        id: the entry's id.
        parent_id: its parent's id; ``None`` for a root.
        message: what it holds.
        files: on an entry that summarises a branch left behind, the files that branch read and changed
            (carried forward into the next summary of a branch that contains this entry).
    """

    id: str
    parent_id: str | None
    message: Message
    files: BranchFiles | None = None


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
        cut_off: indexes into ``messages`` of answers that were cut off before they finished (a run
            aborted, timed out or failed while they streamed).
    """

    messages: tuple[Message, ...]
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]
    total_tokens: int
    cut_off: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class BranchSummary:
    """The summary of a branch left behind, with the files it touched.

    Attributes:
        summary: the summary, the files listed after it; when the summariser gave nothing, a note saying
            how much was left behind; ``""`` when aborted.
        read_files: paths the branch read and did not change.
        modified_files: paths the branch changed.
        summarised: ``False`` when the summary is only that note (or nothing).
        aborted: the summary was cancelled before it came back.
        error: why the summariser gave no summary (it failed, or answered nothing), in words.
    """

    summary: str
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]
    summarised: bool = True
    aborted: bool = False
    error: str | None = None

    @property
    def files(self) -> BranchFiles:
        """The files, as an entry keeps them."""
        return BranchFiles(self.read_files, self.modified_files)


@dataclass(frozen=True, slots=True)
class BranchMove:
    """What a move to another entry of a session's tree did.

    Attributes:
        moved: the session now continues from ``target`` (``False`` when the summary was aborted or
            failed: the session stayed where it was).
        target: the entry the session continues from (``None``: from the start, before any entry).
        leaf: the session's current leaf: the summary's entry when one was written, else ``target``
            (the old leaf when nothing moved).
        left: how many entries the move left behind.
        summary: the summary of what was left, when one was asked for and there was something to leave.
    """

    moved: bool
    target: str | None
    leaf: str | None
    left: int = 0
    summary: BranchSummary | None = None


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
    entries: Sequence[Entry],
    token_budget: int = 0,
    chars_per_token: float = CHARS_PER_TOKEN,
    *,
    cut_off: Collection[str] = (),
) -> BranchPreparation:
    """The newest of the branch's messages that fit ``token_budget``, and the files the whole branch touched.

    Messages are taken newest first and stop at the first that does not fit, so what is kept is the end
    of the branch with no gaps in it; file operations are read from every entry, kept or not, and from
    the files of summaries already in the branch (so a summary of a summary still lists them).

    Args:
        entries: the branch, in chronological order (``collect_branch``'s ``entries``).
        token_budget: the most tokens the messages may weigh; ``0`` means no limit.
        chars_per_token: the ratio they are weighed at.
        cut_off: ids of the entries holding answers that were cut off before they finished.
    """
    messages = [entry.message for entry in entries]
    kept: list[Entry] = []
    total = 0
    for entry in reversed(entries):
        tokens = transcript_tokens([entry.message], chars_per_token)
        if token_budget > 0 and total + tokens > token_budget:
            break
        kept.append(entry)
        total += tokens
    kept.reverse()
    read, modified = file_operations(messages)
    carried = [entry.files for entry in entries if entry.files is not None]
    if carried:
        changed = set(modified).union(*(f.modified_files for f in carried))
        seen = set(read).union(*(f.read_files for f in carried))
        read, modified = tuple(sorted(seen - changed)), tuple(sorted(changed))
    return BranchPreparation(
        messages=tuple(entry.message for entry in kept),
        read_files=read,
        modified_files=modified,
        total_tokens=total,
        cut_off=tuple(i for i, entry in enumerate(kept) if entry.id in cut_off),
    )


def _file_lists(read: Sequence[str], modified: Sequence[str]) -> str:
    lines = []
    if read:
        lines.append("Files read: " + ", ".join(read))
    if modified:
        lines.append("Files modified: " + ", ".join(modified))
    return "\n".join(lines)


def branch_budget(window: int | None, reserve_tokens: int = DEFAULT_RESERVE_TOKENS) -> int:
    """Tokens a branch's messages may weigh in the summary request; ``0`` (no limit) when the window is
    unknown.

    The reserve is kept for the summary request's own prompt and its reply; it takes at most half the
    window, so a small local window still leaves the branch room.

    Raises:
        InvalidInput: the reserve is negative.
    """
    if reserve_tokens < 0:
        raise InvalidInput(f"reserve_tokens must be >= 0, got {reserve_tokens}")
    if not window or window <= 0:
        return 0
    return max(window - min(reserve_tokens, window // 2), 1)


def branch_summary_message(summary: BranchSummary) -> UserMessage:
    """The message a branch summary travels in: a user message led by ``BRANCH_SUMMARY_LEAD``."""
    return UserMessage(content=f"{BRANCH_SUMMARY_LEAD}\n\n{summary.summary}")


def branch_summariser(
    endpoint: Endpoint,
    model: str,
    *,
    max_tokens: int = 1024,
    reasoning_effort: str | None = None,
    on_event: Callable[[Event], object] | None = None,
    api_key: ApiKeyResolver | None = None,
    interceptors: Interceptors | None = None,
) -> Summarise:
    """A summariser that asks ``model`` with ``BRANCH_SUMMARY_PROMPT`` as a side task (``branch_summary``).

    Unlike the fold's summariser it raises when the request failed, so ``summarise_branch`` can say why.
    ``api_key`` is called before the request for the key to send; ``interceptors`` see it.
    """

    async def summarise(text: str) -> str | None:
        failure: str | None = None

        def relay(event: Event) -> None:
            nonlocal failure
            if isinstance(event, SideTask) and event.error:
                failure = event.error
            if on_event is not None:
                on_event(event)

        reply = await ask(
            await with_resolved_key(endpoint, api_key),
            model,
            BRANCH_SUMMARY_PROMPT,
            text,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            on_event=relay,
            kind="branch_summary",
            interceptors=interceptors,
        )
        if failure is not None:
            raise SteadyloopError(failure)
        return reply

    return summarise


async def _race(work: Summarise, text: str, cancel: asyncio.Event | None) -> tuple[str | None, bool]:
    """The summariser's reply, or ``(None, True)`` when ``cancel`` was set first (the request is closed)."""
    if cancel is None:
        return await work(text), False
    if cancel.is_set():
        return None, True
    reply = await unless_cancelled(work(text), cancel, ignore=(Exception,))
    return (None, True) if reply is CANCELLED else (reply, False)


async def summarise_branch(
    preparation: BranchPreparation,
    summarise: Summarise,
    *,
    instructions: str | None = None,
    cancel: asyncio.Event | None = None,
) -> BranchSummary:
    """The summary of a branch being left, with the files it touched listed after it.

    Never raises (cancellation of the caller aside): a summariser that fails or gives nothing leaves a
    note saying how many messages were left behind, with ``error`` saying why; ``cancel`` set before the
    summary came back gives ``aborted``.

    Args:
        preparation: what to summarise (``prepare_branch``).
        summarise: writes the summary from the request text (``branch_summariser``, or the host's).
        instructions: the host's own words on what the summary should focus on.
        cancel: set to abort the summary; its request is closed.
    """
    files = _file_lists(preparation.read_files, preparation.modified_files)
    text: str | None = None
    error: str | None = None
    if preparation.messages:
        try:
            asked = branch_request(
                preparation.messages, cut_off=preparation.cut_off, instructions=instructions
            )
            reply, aborted = await _race(summarise, asked, cancel)
        except Exception as exc:
            reply, aborted = None, False
            error = f"the summariser failed: {type(exc).__name__}: {exc}"
        if aborted:
            return BranchSummary(
                summary="",
                read_files=preparation.read_files,
                modified_files=preparation.modified_files,
                summarised=False,
                aborted=True,
            )
        text = reply.strip() if isinstance(reply, str) and reply.strip() else None
        if text is None and error is None:
            error = "the summariser answered nothing"
    count = len(preparation.messages)
    body = text or f"[branch summary unavailable: {count} message{'s' if count != 1 else ''} left behind]"
    return BranchSummary(
        summary=f"{body}\n\n{files}" if files else body,
        read_files=preparation.read_files,
        modified_files=preparation.modified_files,
        summarised=text is not None,
        error=error,
    )
