"""Holding the prefix still: the head a run declares and its versions, the dressed question, the check before sending.

A run declares the system prompt and tools in force (read from ``RunConfig.head`` where the host keeps
them, as the Agent does); with a ``StablePrefix`` on the config, a change of them is a new version of the
prefix, told with its reason. Its question is dressed with the lifecycle hooks' context once and sent that
way in every later request; and each request is admitted by the prefix before it is sent, so a rewrite of
what was already sent is told (or refused) with the index of the message that changed.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import TranscriptRewritten
from ..events import Notice, PrefixRewritten
from ..hooks import with_context
from ..messages import Message
from .config import RunConfig
from .lifecycle import with_hook_context
from .state import RunState

__all__ = ["admit", "dress", "hold_prefix"]


def hold_prefix(config: RunConfig) -> tuple[RunConfig, list[str]]:
    """The config a run starts with: the system prompt and tools in force (``RunConfig.head``, else its
    own), and what to tell about them (a new version of the prefix, and why)."""
    system, tools = config.head() if config.head is not None else (config.system, config.tools)
    system = system or None
    notes: list[str] = []
    prefix = config.prefix
    if prefix is not None:
        before = prefix.version
        snapshot = prefix.hold(system, tools)
        if snapshot.version != before and snapshot.version > 1:
            notes.append(snapshot.told())
    if system == config.system and tools is config.tools:
        return config, notes
    return replace(config, system=system, tools=tuple(tools)), notes


def dress(run: RunState, view: list[Message]) -> list[Message]:
    """The view with hook context on the run's question, and on every question a prefix remembers dressed."""
    prefix = run.config.prefix
    if prefix is None:
        return with_hook_context(run, view)
    lifecycle = run.config.hooks.lifecycle
    question, blocks = run.question, run.blocks
    if blocks and question is not None and lifecycle is not None and prefix.dressing(question) is None:
        # The question is the newest user message: found from the end, once per run.
        at = next((i for i in range(len(view) - 1, -1, -1) if view[i] is question), None)
        if at is not None:
            prefix.remember(question, with_context([question], 0, blocks, lifecycle.preface)[0], at)
    return prefix.dress(view)


def admit(run: RunState, messages: list[Message], *, sanctioned: bool) -> None:
    """Check a request's messages against the previous request's before sending them.

    Args:
        messages: what the request sends after the system prompt.
        sanctioned: the keeper pruned or folded for this request.

    Raises:
        TranscriptRewritten: they rewrote what was sent before and the prefix refuses that.
    """
    prefix = run.config.prefix
    if prefix is None:
        return
    hooks = run.config.hooks
    found = prefix.admit(
        messages,
        source=run.transcript,
        pure=hooks.transform_context is None and hooks.convert_to_llm is None,
        sanctioned=sanctioned,
    )
    if found is None:
        return
    events, step = run.events, run.events.step
    events.say(PrefixRewritten, index=found.index, role=found.role, step=step)
    if prefix.on_rewrite == "raise":
        raise TranscriptRewritten(found.describe(), index=found.index)
    events.say(Notice, text=found.describe(), name="prefix", step=step)
