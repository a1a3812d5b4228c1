"""Making a fold: the summary, the ``before_compact`` hooks that may veto it, and the memory flush before it.

``run_compaction`` is the one summariser and the one cut; ``compact_transcript`` is it followed by
``apply_compaction``, for hosts whose transcript is an array. A fold never loses the run: when no summary
comes back, the fold says how many messages went rather than failing. Only a hook's veto, and only when
the caller asked for vetoes to count, keeps the transcript as it was; a fold forced by an overflow goes
ahead regardless, since keeping the transcript would only trade the summary for a ``ContextOverflow``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..events import Event, Notice
from ..messages import AssistantMessage, Message, UserMessage
from ..tools.definition import Tool
from ..turn.side_tasks import ask
from ..wire.endpoints import ApiKeyResolver, Endpoint, with_resolved_key
from ..wire.interceptors import Interceptors
from .compaction import CompactionPlan, Fold, apply_compaction, serialize_for_summary

__all__ = [
    "MEMORY_FLUSH_PROMPT",
    "SUMMARY_PROMPT",
    "CompactionHooks",
    "CompactionInfo",
    "HookVerdict",
    "Summarise",
    "compact_transcript",
    "fallback_summary",
    "memory_flush",
    "run_compaction",
    "summariser",
    "summary_request",
]

Summarise = Callable[[str], Awaitable[str | None]]
Note = Callable[[str], object]

SUMMARY_PROMPT = """\
You write the working notes an agent continues from after the oldest part of its conversation is removed \
to free space. The agent will see only your notes and the messages after them, so anything you leave out \
is gone.

Keep:
- the task as the user set it, and every constraint or preference they stated;
- decisions made, and why, including approaches that were tried and dropped;
- exact file paths, names, commands, identifiers and values that were used or found;
- errors met, verbatim where short, and whether each was resolved;
- the state of the work: what is done, what is in progress, what comes next;
- open questions and anything the user is still waiting on.

Leave out pleasantries, repeated tool output and reasoning that led nowhere. Write terse notes under short \
headings, in the conversation's language. When earlier notes are given, continue them: carry forward what \
still holds, update what changed, and drop what is finished and no longer matters. Answer with the notes \
only."""

MEMORY_FLUSH_PROMPT = (
    "The oldest part of this conversation is about to be removed to free context space. If there are "
    "decisions, file paths, errors or task state worth keeping, save them now with the memory tools. "
    "Reply without calling a tool when there is nothing to save."
)


@dataclass(frozen=True, slots=True)
class CompactionInfo:
    """What a fold is about to take out, as ``before_compact`` hooks are told.

    Attributes:
        start: the first folded index (stored numbering).
        through: the index of the first kept message.
        count: how many messages go.
        tokens_before: the estimate of the whole transcript.
        tokens_kept: the estimate of what stays, before the summary is added.
        forced: the fold follows an overflow and goes ahead whatever a hook says.
    """

    start: int
    through: int
    count: int
    tokens_before: int
    tokens_kept: int
    forced: bool = False


@dataclass(frozen=True, slots=True)
class HookVerdict:
    """A hook runner's answer about a fold.

    Attributes:
        veto: a hook asked for the fold not to happen.
        hook: the name of the hook that vetoed, for the note that says so.
    """

    veto: bool = False
    hook: str = ""


class CompactionHooks(Protocol):
    """Whatever runs the host's ``before_compact`` hooks and folds their answers into one verdict."""

    async def before_compact(self, info: CompactionInfo) -> HookVerdict:
        """Tell the hooks what is going; the verdict says whether any vetoed."""
        ...


def summary_request(stretch: Sequence[Message], previous: str | None) -> str:
    """What the summariser is sent: the earlier notes, if any, then the messages being folded."""
    conversation = serialize_for_summary(stretch)
    if not previous:
        return f"Conversation to summarise:\n\n{conversation}"
    return f"Earlier notes, to continue:\n\n{previous}\n\nConversation since those notes:\n\n{conversation}"


def fallback_summary(count: int, previous: str | None) -> str:
    """The summary of a fold whose summariser gave nothing: what was dropped, after the earlier notes."""
    were = "messages were" if count != 1 else "message was"
    dropped = f"[summary unavailable: {count} {were} removed to free context space]"
    return f"{previous}\n\n{dropped}" if previous else dropped


def _noter(on_note: Note | None) -> Note:
    return on_note if on_note is not None else (lambda _text: None)


async def _consult(hooks: CompactionHooks, info: CompactionInfo, note: Note) -> HookVerdict:
    try:
        return await hooks.before_compact(info)
    except Exception as error:
        # A hook that failed said nothing, so it vetoes nothing.
        note(f"a before_compact hook failed and vetoes nothing: {error!r}")
        return HookVerdict()


async def _summarise(summarise: Summarise, request: str, note: Note) -> str | None:
    try:
        text = await summarise(request)
    except Exception as error:
        note(f"the summariser failed: {error!r}")
        return None
    return text.strip() if isinstance(text, str) and text.strip() else None


async def run_compaction(
    messages: Sequence[Message],
    plan: CompactionPlan,
    summarise: Summarise,
    *,
    hooks: CompactionHooks | None = None,
    honour_veto: bool = False,
    forced: bool = False,
    on_note: Note | None = None,
) -> Fold | None:
    """The fold a plan describes, for a host that stores it beside append-only messages.

    The messages themselves are not touched; ``apply_compaction`` turns them and the fold into a request.

    Args:
        messages: the transcript the plan was made over (pruned or not: pruning keeps indexes).
        plan: from ``plan_compaction``.
        summarise: text in, summary out (``summariser`` builds one); a failure or an empty answer gives a
            fold whose summary says how many messages were dropped.
        hooks: told what is going before anything goes. Without ``honour_veto`` they run beside the
            summary, so a slow hook costs nothing, and cannot stop it.
        honour_veto: run the hooks first; a veto keeps the transcript (``None``, with a note naming the hook).
        forced: the last request overflowed; the fold goes ahead whatever the hooks say.
        on_note: told, in words, about vetoes, failures and folds with nothing in them.

    Returns:
        The fold, or ``None`` when a hook vetoed it or the plan folds nothing.
    """
    note = _noter(on_note)
    if not plan.foldable:
        note(f"compaction skipped: {plan.reason or 'the plan folds nothing'}")
        return None
    info = CompactionInfo(
        start=plan.start,
        through=plan.through,
        count=plan.folded,
        tokens_before=plan.tokens_before,
        tokens_kept=plan.tokens_kept,
        forced=forced,
    )
    request = summary_request(messages[plan.start : plan.through], plan.previous)
    if hooks is not None and honour_veto and not forced:
        verdict = await _consult(hooks, info, note)
        if verdict.veto:
            note(f"compaction vetoed by hook {verdict.hook or '(unnamed)'}; the transcript is kept as it was")
            return None
        text = await _summarise(summarise, request, note)
    elif hooks is not None:
        verdict, text = await asyncio.gather(
            _consult(hooks, info, note), _summarise(summarise, request, note)
        )
        if verdict.veto and forced and honour_veto:
            note(f"hook {verdict.hook or '(unnamed)'} vetoed the compaction; folded anyway after an overflow")
    else:
        text = await _summarise(summarise, request, note)
    if text is None:
        note(f"no summary came back; {plan.folded} messages are dropped with a note saying so")
    return Fold(
        summary=text if text is not None else fallback_summary(plan.folded, plan.previous),
        through=plan.through,
        at=time.time(),
        folded=plan.folded,
        summarised=text is not None,
        head=plan.head,
    )


async def compact_transcript(
    messages: Sequence[Message],
    plan: CompactionPlan,
    summarise: Summarise,
    *,
    hooks: CompactionHooks | None = None,
    honour_veto: bool = False,
    forced: bool = False,
    on_note: Note | None = None,
) -> list[Message]:
    """The transcript with the plan's stretch folded into a summary, for a host whose transcript is an array.

    ``run_compaction`` followed by ``apply_compaction``; see ``run_compaction`` for the arguments. A veto, or
    a plan that folds nothing, hands back the messages as they were (in a new list).
    """
    fold = await run_compaction(
        messages, plan, summarise, hooks=hooks, honour_veto=honour_veto, forced=forced, on_note=on_note
    )
    return apply_compaction(messages, fold)


def summariser(
    endpoint: Endpoint,
    model: str,
    *,
    max_tokens: int = 1024,
    reasoning_effort: str | None = None,
    on_event: Callable[[Event], object] | None = None,
    kind: str = "summary",
    api_key: ApiKeyResolver | None = None,
    interceptors: Interceptors | None = None,
) -> Summarise:
    """A summariser that asks ``model`` at ``endpoint`` with ``SUMMARY_PROMPT``, as a side task.

    The function it returns never raises (cancellation aside): a failure is a notice and ``None``.
    ``reasoning_effort`` is sent through the model's latches, as the run's own effort is; ``kind`` names
    the task on its ``SideTask`` event (``"branch_summary"`` for ``summarise_branch``). ``api_key`` is
    called before each summary request for the key to send, as a run calls it before each of its own;
    ``interceptors`` see the request as they see the run's.
    """

    async def summarise(text: str) -> str | None:
        try:
            return await ask(
                await with_resolved_key(endpoint, api_key),
                model,
                SUMMARY_PROMPT,
                text,
                max_tokens=max_tokens,
                reasoning_effort=reasoning_effort,
                on_event=on_event,
                kind=kind,
                interceptors=interceptors,
            )
        except Exception as error:
            if on_event is not None:
                on_event(Notice(text=f"the summariser failed: {error!r}", name="compaction"))
            return None

    return summarise


Run = Callable[[list[Message], Sequence[Tool]], Awaitable[list[Message]]]


async def memory_flush(
    messages: Sequence[Message],
    memory_tools: Sequence[Tool],
    run: Run,
    *,
    max_turns: int = 3,
    on_note: Note | None = None,
) -> None:
    """A silent turn before a fold, in which the model may save what matters with the memory tools.

    Best effort: the turns are not added to the transcript, and any failure ends the flush with a note
    rather than failing the run.

    Args:
        messages: the transcript about to be folded.
        memory_tools: the only tools offered; with none, there is nothing to do.
        run: one model turn with its tool calls executed: given the transcript and the tools, the messages
            the turn added (the assistant message, then its tool results).
        max_turns: the most turns; the flush ends sooner when the model stops calling tools.
        on_note: told, in words, when the flush is skipped or fails.
    """
    note = _noter(on_note)
    if not memory_tools:
        note("memory flush skipped: no memory tools")
        return
    transcript: list[Message] = [*messages, UserMessage(content=MEMORY_FLUSH_PROMPT)]
    for _ in range(max_turns):
        try:
            added = await run(list(transcript), memory_tools)
        except Exception as error:
            note(f"memory flush stopped: {error!r}")
            return
        transcript.extend(added)
        if not any(isinstance(m, AssistantMessage) and m.tool_calls for m in added):
            return
