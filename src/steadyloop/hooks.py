"""The host's side of lifecycle hooks: gather context before a request, notify after, within a budget (public).

``session_start`` and ``before_turn`` hooks can add context to the request; ``after_turn``,
``before_compact`` (which may veto), ``session_end`` and ``session_delete`` only read. What runs is the
host's ``HookRunner`` (an MCP pool, say). What hooks add shares one budget per request, each hook held to its
own cap inside it, so a generous hook cannot crowd out the conversation it was meant to inform; a hook that
fails, or a runner that raises, is noted once and costs only its own context.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal, Protocol, TypeAlias

from .errors import InvalidInput
from .messages import ContentPart, Message, TextPart, UserMessage, text_of
from .sizing.tokens import CHARS_PER_TOKEN, estimate_tokens

__all__ = [
    "HOOK_CONTEXT_TOKENS",
    "HOOK_PREFACE",
    "INJECTING_EVENTS",
    "ContextBlock",
    "Gathered",
    "HookContext",
    "HookEvent",
    "HookNote",
    "HookOutcome",
    "HookRunner",
    "HookSettings",
    "TurnMessage",
    "configure_hooks",
    "gather",
    "notify",
    "reset_hooks",
    "turn_index",
    "turn_messages",
    "with_context",
]

HookEvent: TypeAlias = Literal[
    "session_start", "before_turn", "after_turn", "before_compact", "session_end", "session_delete"
]

#: The events whose hooks' text can reach the request; the others only read.
INJECTING_EVENTS: frozenset[HookEvent] = frozenset({"session_start", "before_turn"})

#: Tokens every injecting hook shares per request unless configured otherwise.
HOOK_CONTEXT_TOKENS = 2000

#: Said above the blocks on the question, so the model does not take them for the user's words.
HOOK_PREFACE = "Context added by the host's hooks (background for this turn, not the user's words):"

# Part of the block, so the model knows there was more and the cut counts against the cap it was cut to.
_CUT_MARK = "\n[… cut to fit the hook context budget]"
# A stable namespace, so a message's id is the same in every process and every release.
_TURN_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://steadyloop.dev/hooks/turn-message")


@dataclass(frozen=True, slots=True)
class TurnMessage:
    """One message of a turn as a hook reads it.

    Attributes:
        id: stable across folds and processes (see ``turn_messages``).
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        text: the message's text; images and tool-call arguments are left out.
    """

    id: str
    role: Literal["system", "user", "assistant", "tool"]
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class HookContext:
    """What a hook is told about the point in the session it runs at; every field is optional.

    Attributes:
        session_id: the session's id.
        host: the host's name.
        prompt: what the user asked this turn.
        turn_index: how many user turns came before this one (``turn_index``).
        turn_messages: the turn's messages, for ``after_turn`` (``turn_messages``).
        reply: the answer, for ``after_turn``.
        extra: anything else the host wants its hooks to see.
    """

    session_id: str | None = None
    host: str | None = None
    prompt: str | None = None
    turn_index: int | None = None
    turn_messages: tuple[TurnMessage, ...] = ()
    reply: str | None = None
    extra: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True, kw_only=True)
class HookOutcome:
    """What one hook did.

    Attributes:
        hook_id: which hook.
        text: context it adds (only ``INJECTING_EVENTS`` reach the request).
        max_tokens: the hook's own cap on its text, inside the shared budget.
        veto: for ``before_compact``, the hook asks that the transcript not be folded now.
        error: the hook failed, in words; its text and veto are then ignored.
    """

    hook_id: str
    text: str | None = None
    max_tokens: int | None = None
    veto: bool = False
    error: str | None = None


class HookRunner(Protocol):
    """Runs whatever hooks the host has for an event and says what each did."""

    async def __call__(
        self, event: HookEvent, context: HookContext, *, cancel: asyncio.Event | None
    ) -> Sequence[HookOutcome]: ...


@dataclass(frozen=True, slots=True)
class HookNote:
    """Something to tell a person about a hook: it failed, or its context was cut or left out.

    Attributes:
        hook_id: which hook; ``None`` when the runner itself raised for the whole event.
        event: the event it ran for.
        error: what went wrong, when something did.
        text: what happened otherwise.
    """

    hook_id: str | None
    event: HookEvent
    error: str | None = None
    text: str | None = None


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """One hook's context as it goes on the question: the runner's text exactly, or a cut of it."""

    hook_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Gathered:
    """What ``gather`` found.

    Attributes:
        context: the blocks to put on the question, in the order the events and the runner gave them.
        tokens: what the blocks weigh, as ``estimate_tokens`` counts.
        vetoes: the ``before_compact`` hooks that asked not to fold now.
        notes: every note also handed to ``on_note``.
        cancelled: the cancel event fired, so events after it were not run.
    """

    context: list[ContextBlock] = field(default_factory=list)
    tokens: int = 0
    vetoes: list[str] = field(default_factory=list)
    notes: list[HookNote] = field(default_factory=list)
    cancelled: bool = False


@dataclass(frozen=True, slots=True)
class HookSettings:
    """The hook settings in force for the process.

    Attributes:
        context_tokens: the budget every injecting hook shares per request.
        preface: said above the blocks; ``""`` says nothing.
    """

    context_tokens: int = HOOK_CONTEXT_TOKENS
    preface: str = HOOK_PREFACE


_DEFAULTS = HookSettings()
_settings = _DEFAULTS


def _whole_positive(value: object) -> int | None:
    # A 0 threaded through for "no opinion" must not switch recall off, so it keeps what was there.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 1:
        return None
    return math.floor(value)


def configure_hooks(*, context_tokens: float | None = None, preface: str | None = None) -> HookSettings:
    """Move the hook defaults for this process; returns every setting in force.

    Args:
        context_tokens: the shared budget; anything not a finite number of at least one token keeps what
            was there. A fraction is rounded down.
        preface: the words above the blocks; ``""`` is a preface of nothing, and anything not a string
            keeps what was there.
    """
    global _settings
    tokens = _whole_positive(context_tokens)
    if tokens is not None:
        _settings = replace(_settings, context_tokens=tokens)
    if isinstance(preface, str):
        _settings = replace(_settings, preface=preface)
    return _settings


def reset_hooks() -> None:
    """Put the default budget and preface back."""
    global _settings
    _settings = _DEFAULTS


def _fit(text: str, tokens: int) -> str | None:
    """``text`` cut to weigh at most ``tokens``, saying so; ``None`` when not even a line fits."""
    if estimate_tokens(text) <= tokens:
        return text
    room = tokens * CHARS_PER_TOKEN - len(_CUT_MARK)
    head = text[: max(room, 0)]
    # Ending on a line or word boundary reads better, as long as that does not throw away half the room.
    boundary = max(head.rfind("\n"), head.rfind(" "))
    if boundary >= room // 2:
        head = head[:boundary]
    head = head.rstrip()
    return head + _CUT_MARK if head else None


async def _call(
    run: HookRunner, event: HookEvent, context: HookContext, cancel: asyncio.Event | None
) -> Sequence[HookOutcome] | None:
    """The runner's outcomes, or ``None`` when ``cancel`` fired first; whatever the runner raises passes."""
    if cancel is None:
        return list(await run(event, context, cancel=None))
    if cancel.is_set():
        return None
    # Raced against the cancel event so the caller leaves promptly even if the runner ignores it.
    task = asyncio.ensure_future(run(event, context, cancel=cancel))
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, waiter):
            pending.cancel()
        # Awaited so neither task outlives this call and the runner's exception is always retrieved.
        await asyncio.gather(task, waiter, return_exceptions=True)
    if cancel.is_set():
        return None
    if task.cancelled():
        # Not our cancel and not the caller's (that would have raised above): the runner gave up on itself.
        raise RuntimeError("the hook runner was cancelled")
    return list(task.result())


def _describe(exc: Exception) -> str:
    words = str(exc)
    return f"{type(exc).__name__}: {words}" if words else type(exc).__name__


class _Notes:
    """At most one note per hook and event per call, each kept and handed to the caller's sink."""

    def __init__(self, sink: Callable[[HookNote], object] | None) -> None:
        self.sink = sink
        self.kept: list[HookNote] = []
        self._seen: set[tuple[HookEvent, str | None]] = set()

    def add(self, note: HookNote) -> None:
        key = (note.event, note.hook_id)
        if key in self._seen:
            return
        self._seen.add(key)
        self.kept.append(note)
        if self.sink is not None:
            # A broken note sink must not cost the turn its context.
            with contextlib.suppress(Exception):
                self.sink(note)


async def gather(
    run: HookRunner,
    events: Sequence[HookEvent],
    context: HookContext,
    *,
    cancel: asyncio.Event | None = None,
    max_tokens: float | None = None,
    on_note: Callable[[HookNote], object] | None = None,
) -> Gathered:
    """Run the hooks for ``events`` in order and keep what they add within the shared budget.

    Blocks are taken in runner order. Each is first cut to its hook's own ``max_tokens``; a block the
    shared budget can no longer hold whole is cut to what is left, and once that has happened the budget
    is spent and later blocks are left out (and noted). Text from events outside ``INJECTING_EVENTS`` is
    ignored; vetoes count only for ``before_compact``. Never raises for a hook or a runner.

    Args:
        run: the host's runner.
        events: the events to run, in order (``["session_start", "before_turn"]`` on a first turn).
        context: what the hooks are told.
        cancel: once set, the runner is asked to stop and gather returns what it has.
        max_tokens: the shared budget for this request; wins over ``configure_hooks`` when it is a number of
            at least one token.
        on_note: told once per hook and event about a failure, a cut or a block left out.
    """
    budget = _whole_positive(max_tokens) or _settings.context_tokens
    notes = _Notes(on_note)
    blocks: list[ContextBlock] = []
    vetoes: list[str] = []
    remaining = budget
    spent = False
    for event in events:
        try:
            outcomes = await _call(run, event, context, cancel)
        except Exception as exc:
            notes.add(HookNote(None, event, error=_describe(exc)))
            continue
        if outcomes is None:
            return Gathered(blocks, budget - remaining, vetoes, notes.kept, cancelled=True)
        for outcome in outcomes:
            if outcome.error is not None:
                notes.add(HookNote(outcome.hook_id, event, error=outcome.error))
                continue
            if outcome.veto and event == "before_compact":
                vetoes.append(outcome.hook_id)
            text = outcome.text
            if event not in INJECTING_EVENTS or text is None or not text.strip():
                continue
            if spent or remaining <= 0:
                spent = True
                notes.add(
                    HookNote(outcome.hook_id, event, text="left out: the hook context budget was spent")
                )
                continue
            own = _whole_positive(outcome.max_tokens)
            cap = remaining if own is None else min(own, remaining)
            fitted = _fit(text, cap)
            # Only the shared budget binding ends the gathering; a hook held to its own cap leaves the rest.
            if fitted != text and cap == remaining:
                spent = True
            if fitted is None:
                notes.add(HookNote(outcome.hook_id, event, text=f"left out: it did not fit in {cap} tokens"))
                continue
            if fitted != text:
                notes.add(HookNote(outcome.hook_id, event, text=f"cut to fit in {cap} tokens"))
            blocks.append(ContextBlock(outcome.hook_id, fitted))
            remaining -= estimate_tokens(fitted)
    return Gathered(blocks, budget - remaining, vetoes, notes.kept)


async def notify(
    run: HookRunner,
    event: HookEvent,
    context: HookContext,
    *,
    on_note: Callable[[HookNote], object] | None = None,
) -> None:
    """Run the hooks for a read-only event; never raises for a hook or a runner.

    There is no cancel: a caller who leaves once the turn is answered has not asked for it to be
    forgotten. A host that must not wait on it runs it as a task it owns. Any text is ignored.
    """
    notes = _Notes(on_note)
    try:
        outcomes = await _call(run, event, context, None)
    except Exception as exc:
        notes.add(HookNote(None, event, error=_describe(exc)))
        return
    for outcome in outcomes or ():  # never None without a cancel event; this satisfies the type
        if outcome.error is not None:
            notes.add(HookNote(outcome.hook_id, event, error=outcome.error))


def with_context(
    messages: Sequence[Message],
    index: int,
    blocks: Sequence[ContextBlock],
    preface: str | None = None,
) -> list[Message]:
    """A new list of ``messages`` with ``blocks`` put on the user question at ``index``.

    The preface, then the blocks, then the user's text, blank lines between (for parts content, a leading
    text part). The system prompt is never touched, so the prompt cache keeps it, nor is the list passed
    in, so a host storing what the user typed never stores the context as their words. Blocks go in
    exactly as the runner gave them, not fenced.

    Args:
        messages: the request's messages.
        index: the question's position; negative counts from the end.
        blocks: from ``Gathered.context``; none gives back a plain copy.
        preface: wins over the configured preface for this request; ``""`` lets the blocks lead on their
            own. Anything not a string uses the configured one.

    Raises:
        InvalidInput: ``index`` is not the position of a user message.
    """
    out = list(messages)
    question = out[index] if -len(out) <= index < len(out) else None
    if not isinstance(question, UserMessage):
        raise InvalidInput(f"with_context: index {index} is not the position of a user message")
    if not blocks:
        return out
    said = preface if isinstance(preface, str) else _settings.preface
    head = "\n\n".join([*([said] if said else []), *(block.text for block in blocks)])
    content = question.content
    if isinstance(content, str):
        out[index] = replace(question, content=f"{head}\n\n{content}" if content else head)
    else:
        parts: tuple[ContentPart, ...] = (TextPart(head), *content)
        out[index] = replace(question, content=parts)
    return out


def turn_messages(
    session_id: str, messages: Sequence[Message], start: int, *, offset: int = 0
) -> list[TurnMessage]:
    """The messages of one turn, from ``start`` to the end, with ids that survive folds.

    A message's id is a UUID (version 5) of the session id and its stored index, ``offset + position``,
    so it is the same before and after a fold moved it up the array, and a memory server deduping on it
    files the turn once.

    Args:
        session_id: the session the messages belong to.
        messages: the transcript as the host holds it (folded or not).
        start: where the turn starts in ``messages``.
        offset: the stored index of ``messages[0]``: how many messages a fold took out in front of it.

    Raises:
        InvalidInput: ``start`` or ``offset`` is negative.
    """
    if start < 0 or offset < 0:
        raise InvalidInput(f"turn_messages: start and offset must not be negative, got {start}, {offset}")
    return [
        TurnMessage(
            id=str(uuid.uuid5(_TURN_NAMESPACE, f"{session_id}/{offset + position}")),
            role=message.role,
            text=text_of(message.content),
        )
        for position, message in enumerate(messages[start:], start)
    ]


def turn_index(messages: Sequence[Message], *, offset_turns: int = 0) -> int:
    """How many user turns the session has had: the user messages here plus ``offset_turns`` folded away.

    Called before the new question is appended, this is the new turn's index, counting from 0.
    """
    if offset_turns < 0:
        raise InvalidInput(f"turn_index: offset_turns must not be negative, got {offset_turns}")
    return offset_turns + sum(1 for message in messages if isinstance(message, UserMessage))
