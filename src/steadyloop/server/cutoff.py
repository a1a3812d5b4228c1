"""Closing, in its record, a run whose process stopped mid-way (sans-I/O).

A run's record opens things and closes them: ``agent_start``/``agent_end``, ``turn_start``/``turn_end``,
``message_start``/``message_end``, ``tool_execution_start``/``tool_execution_end``. A process killed mid-run
leaves some open, and a page or a client that draws the record would show them going for ever. Whoever
takes the run up next (the same node restarting, or another node resuming a durable run) closes each of
them, innermost first, stamped with the cut-off run's id: the message streaming, as far as it streamed;
each tool call that had started, with the result it is known to have had or an ``interrupted`` one; the
step; the run itself, ``cancelled`` with an ``interrupted`` error. ``closing`` computes those events from
the run's record; the callers write them.

A durable run resumed on another node is the same run going on: its closing ``agent_end`` says so
(``is_handover``), and a watcher following the run (``follow=run``) follows on to the resumed run's end.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from steadyloop import AssistantMessage, Message, ToolResultMessage
from steadyloop.events import (
    AgentEnd,
    AgentStart,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)

__all__ = [
    "HANDOVER",
    "INTERRUPTED",
    "closing",
    "cut_off_message",
    "handover_error",
    "is_handover",
    "last_open_run",
]

#: The error an interrupted run's closing ``agent_end`` carries after its node restarted.
INTERRUPTED = "interrupted: the server stopped while this run was going"
#: How the error of a durable run's closing ``agent_end`` begins when another node goes on with it.
HANDOVER = "interrupted, resumed elsewhere:"


def handover_error(dead: str, node: str) -> str:
    return f"{HANDOVER} {dead} stopped while this run was going, and {node} goes on with it"


def is_handover(event: Event) -> bool:
    """Whether ``event`` closes a run that another node goes on with (the resumed run follows it)."""
    return isinstance(event, AgentEnd) and (event.error or "").startswith(HANDOVER)


def last_open_run(events: Sequence[Event]) -> list[Event] | None:
    """The events of the record's last run from its ``agent_start``, if that run has no ``agent_end``."""
    opened = next((i for i in range(len(events) - 1, -1, -1) if isinstance(events[i], AgentStart)), None)
    if opened is None or any(isinstance(e, AgentEnd) for e in events[opened:]):
        return None
    return list(events[opened:])


def cut_off_message(run: Sequence[Event]) -> tuple[AssistantMessage, int] | None:
    """The assistant message a run's record left open, as far as it streamed, with its step.

    ``run`` is a run's recorded events from its ``agent_start``. ``None`` when no assistant message was
    open at the end, or the open one had recorded nothing.
    """
    text: list[str] = []
    thinking: list[str] = []
    step: int | None = None
    for event in run:
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            text, thinking, step = [], [], event.step
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            step = None
        elif isinstance(event, MessageUpdate) and step is not None:
            (text if event.kind == "text" else thinking).append(event.delta)
    if step is None or not (text or thinking):
        return None
    return AssistantMessage(content="".join(text), reasoning="".join(thinking)), step


def interrupted_call(call_id: str, name: str, why: str) -> ToolResultMessage:
    """The result closing, in the record, a call whose run stopped while it ran."""
    return ToolResultMessage(
        call_id=call_id,
        content=f"interrupted: {why}; whether it took effect is not known",
        is_error=True,
        name=name,
        disposition="aborted",
    )


def closing(
    run: Sequence[Event],
    *,
    error: str,
    message: Message | None = None,
    results: Mapping[str, ToolResultMessage] | None = None,
) -> list[Event]:
    """The events that close everything ``run`` left open, innermost first, ending with its ``agent_end``.

    Args:
        run: the run's recorded events from its ``agent_start``, with no ``agent_end``.
        error: the closing ``agent_end``'s error (``INTERRUPTED``, or ``handover_error(...)``).
        message: what closes the open message, if one is open (default: an assistant message as far as
            it streamed, any other as it started).
        results: results known for calls that had started (they completed where the run was cut off);
            any other open call is closed with an ``interrupted`` result.
    """
    start = run[0] if run else None
    run_id = start.run_id if isinstance(start, AgentStart) else ""
    seq = max((e.seq for e in run), default=0)
    out: list[Event] = []
    opened = _open_message(run)
    if opened is not None:
        if message is None and isinstance(opened.message, AssistantMessage):
            cut = cut_off_message(run)
            message = cut[0] if cut is not None else AssistantMessage()
        out.append(MessageEnd(message=message or opened.message, step=opened.step, run_id=run_id))
    ended = {e.call_id for e in run if isinstance(e, ToolExecutionEnd)}
    known = results or {}
    closed: list[ToolResultMessage] = []
    for begun in (e for e in run if isinstance(e, ToolExecutionStart) and e.call_id not in ended):
        ended.add(begun.call_id)
        result = known.get(begun.call_id) or interrupted_call(begun.call_id, begun.name, error)
        closed.append(result)
        out.append(
            ToolExecutionEnd(
                call_id=begun.call_id,
                name=begun.name,
                result=result,
                disposition=result.disposition or ("failed" if result.is_error else "completed"),
                effect=begun.effect,
                step=begun.step,
                run_id=run_id,
            )
        )
    turn = _open_turn(run)
    if turn is not None:
        answers = [e.message for e in run if isinstance(e, MessageEnd) and e.seq > turn.seq]
        last = next((m for m in reversed(answers) if isinstance(m, AssistantMessage)), None)
        out.append(
            TurnEnd(step=turn.step, message=last, tool_results=tuple(closed), error=error, run_id=run_id)
        )
    out.append(AgentEnd(outcome="cancelled", error=error, run_id=run_id, at=time.time()))
    return [replace(event, seq=seq + i) for i, event in enumerate(out, 1)]


def _open_message(run: Sequence[Event]) -> MessageStart | None:
    opened: MessageStart | None = None
    for event in run:
        if isinstance(event, MessageStart):
            opened = event
        elif isinstance(event, MessageEnd):
            opened = None
    return opened


def _open_turn(run: Sequence[Event]) -> TurnStart | None:
    opened: TurnStart | None = None
    for event in run:
        if isinstance(event, TurnStart):
            opened = event
        elif isinstance(event, TurnEnd):
            opened = None
    return opened
