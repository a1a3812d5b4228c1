"""Opening a run: the window and its keeper, and what the host's lifecycle hooks add to the question.

Lifecycle blocks are gathered once, before the first request, and ride on the run's question in every
request; ``after_turn`` hooks are told the reply at the end without the run waiting on them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..context.folding import memory_flush, summariser
from ..context.keeper import ContextKeeper
from ..events import Notice
from ..hooks import ContextBlock, HookEvent, HookNote, gather, notify, turn_index, turn_messages, with_context
from ..messages import AssistantMessage, Message, UserMessage, text_of
from ..request_body import ToolBlock, build_body, order_tools
from ..tools.definition import Tool
from ..tools.execution import run_tool_calls
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities
from ..turn.request import TurnRequest
from ..turn.send import send_turn
from ..wire.endpoints import with_resolved_key
from ..wire.windows import context_limit_for
from .config import RunConfig
from .state import RunState

__all__ = ["keeper_for", "open_run", "tell_after_turn", "with_hook_context"]


async def open_run(run: RunState) -> None:
    """What a run settles before its first request: the window and its keeper, and the lifecycle blocks."""
    config = run.config
    policy = config.policy
    if policy.context is not None:
        run.limit = run.limit or await context_limit_for(config.endpoint, config.params.model)
        if run.limit:
            run.keeper = keeper_for(run, run.limit)
        else:
            run.events.say(
                Notice,
                text="context management is on but the window is unknown; set context_limit",
                name="compaction",
            )
    run.question, run.blocks = await _gather(run)


async def _gather(run: RunState) -> tuple[Message | None, list[ContextBlock]]:
    """The run's question and what the lifecycle hooks add to it."""
    lifecycle = run.config.hooks.lifecycle
    transcript = run.transcript
    question: Message | None = None
    for message in reversed(transcript):
        if isinstance(message, UserMessage):
            question = message
            break
    if lifecycle is None or question is None:
        return question, []
    first = not any(isinstance(m, AssistantMessage) for m in transcript)
    events: list[HookEvent] = ["session_start", "before_turn"] if first else ["before_turn"]
    context = replace(
        lifecycle.context, prompt=text_of(question.content), turn_index=turn_index(transcript) - 1
    )
    emit = run.events.emit

    def note(found: HookNote) -> None:
        emit(Notice(text=found.error or found.text or "", name=found.hook_id or "hooks"))

    gathered = await gather(
        lifecycle.run, events, context, cancel=run.cancel, max_tokens=lifecycle.max_tokens, on_note=note
    )
    return question, list(gathered.context)


def with_hook_context(run: RunState, wire: list[Message]) -> list[Message]:
    """The wire with the lifecycle blocks on the question (found by identity; a fold may have taken it)."""
    lifecycle = run.config.hooks.lifecycle
    question, blocks = run.question, run.blocks
    if not blocks or question is None or lifecycle is None:
        return wire
    index = next((i for i, m in enumerate(wire) if m is question), None)
    return wire if index is None else with_context(wire, index, blocks, lifecycle.preface)


_after_turn_tasks: set[asyncio.Task[None]] = set()


def tell_after_turn(run: RunState) -> None:
    """Tell the ``after_turn`` hooks the reply, without waiting for them."""
    lifecycle = run.config.hooks.lifecycle
    if lifecycle is None:
        return
    transcript, question = run.transcript, run.question
    start = next((i for i, m in enumerate(transcript) if m is question), 0)
    context = replace(
        lifecycle.context,
        reply=run.last_turn.content,
        turn_messages=tuple(turn_messages(lifecycle.context.session_id or "", transcript, start)),
    )
    # The run does not wait for it, and leaving does not un-remember: the task is kept until it ends.
    task = asyncio.ensure_future(notify(lifecycle.run, "after_turn", context))
    _after_turn_tasks.add(task)
    task.add_done_callback(_after_turn_tasks.discard)


def keeper_for(run: RunState, limit: int) -> ContextKeeper:
    """The run's context keeper over its ``ContextState``, its memory flush running silent turns."""
    config = run.config
    context = config.policy.context
    assert context is not None
    emit = run.events.emit
    memory_tools = context.memory_tools

    async def one_turn(wire: list[Message], offered: Sequence[Tool]) -> list[Message]:
        return await _silent_turn(config, wire, offered)

    async def flush(messages: Sequence[Message]) -> None:
        await memory_flush(
            messages,
            memory_tools,
            one_turn,
            on_note=lambda text: emit(Notice(text=text, name="memory_flush")),
        )

    return ContextKeeper(
        context,
        limit=limit,
        summarise=summariser(
            config.endpoint,
            config.params.model,
            reasoning_effort=config.params.side_effort,
            on_event=emit,
            api_key=config.api_key,  # called per request, like the run's own requests
            interceptors=config.wire_interceptors,
        ),
        emit=emit,
        flush=flush,
        state=run.context,
    )


async def _silent_turn(config: RunConfig, wire: list[Message], offered: Sequence[Tool]) -> list[Message]:
    """One request and its calls, outside the run's transcript and events (the memory flush)."""
    tools = order_tools(offered)
    block = ToolBlock()
    params, system, policy = config.params, config.system, config.policy

    def build(c: EndpointCapabilities, m: ModelCapabilities) -> dict[str, Any]:
        return build_body(params, system, wire, tools, c, m, block=block)

    request = TurnRequest(
        endpoint=await with_resolved_key(config.endpoint, config.api_key),
        body=build,
        model=params.model,
        policy=policy.retry,
        fences=policy.fences,
        interceptors=config.wire_interceptors,
    )
    turn = await send_turn(request)
    message = AssistantMessage(
        content=turn.content, tool_calls=tuple(turn.tool_calls), thinking=turn.thinking
    )
    if not turn.tool_calls:
        return [message]
    batch = await run_tool_calls(turn.tool_calls, {t.name: t for t in tools}, policy=policy.tools)
    return [message, *batch.results]
