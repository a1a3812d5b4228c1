"""The assistant message a run's record left open when its server stopped: read back to close it."""

from __future__ import annotations

from collections.abc import Sequence

from steadyloop import AssistantMessage, Event
from steadyloop.events import MessageEnd, MessageStart, MessageUpdate

__all__ = ["cut_off_message"]


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
