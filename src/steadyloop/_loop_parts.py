"""The parts ``run_agent_loop`` is made of: its events, each step's body, hooks, cancellation.

Kept apart so the loop itself reads as the order of things. Per-run state lives in slotted objects
rather than closures: with a thousand runs in flight, every cell a run holds is something the cyclic
collector scans on each of its passes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from .context.folding import memory_flush, summariser
from .context.keeper import ContextKeeper, ContextPolicy
from .errors import RunCancelled, RunError, SteadyloopError
from .events import Event, MessageUpdate, Notice
from .hooks import ContextBlock, HookEvent, HookNote, gather, notify, turn_index, turn_messages, with_context
from .messages import AssistantMessage, Message, Turn, UserMessage, text_of
from .request_body import ModelParams, ToolBlock, build_body, order_tools
from .tools.definition import Tool
from .tools.execution import run_tool_calls
from .tools.loading import ToolLoader
from .turn.capabilities import EndpointCapabilities, ModelCapabilities
from .turn.run import run_turn
from .usage import Usage
from .wire.endpoints import Endpoint

if TYPE_CHECKING:
    from .loop import LifecycleHooks, LoopPolicy, ToolChoiceFn

T = TypeVar("T")


class ToolResolver(Mapping[str, Tool]):
    """The loop's tools as ``run_tool_calls`` sees them: a lookup goes through the on-demand loader, which
    loads a catalogued tool the model called without loading it first."""

    def __init__(self, loader: ToolLoader, names: Sequence[str]) -> None:
        self._loader = loader
        self._names = sorted(set(names))

    def __getitem__(self, key: str) -> Tool:
        found = self._loader.resolve(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


async def silent_turn(
    endpoint: Endpoint,
    params: ModelParams,
    system: str | None,
    wire: list[Message],
    offered: Sequence[Tool],
    policy: LoopPolicy,
) -> list[Message]:
    """One request and its calls, outside the run's transcript and events (the memory flush)."""
    tools = order_tools(offered)
    block = ToolBlock()

    def build(c: EndpointCapabilities, m: ModelCapabilities) -> dict[str, Any]:
        return build_body(params, system, wire, tools, c, m, block=block)

    turn = await run_turn(endpoint, build, model=params.model, policy=policy.retry, fences=policy.fences)
    message = AssistantMessage(content=turn.content, tool_calls=tuple(turn.tool_calls))
    if not turn.tool_calls:
        return [message]
    batch = await run_tool_calls(turn.tool_calls, {t.name: t for t in tools}, policy=policy.tools)
    return [message, *batch.results]


_after_turn_tasks: set[asyncio.Task[None]] = set()


async def gather_hooks(
    lifecycle: LifecycleHooks | None,
    transcript: list[Message],
    cancel: asyncio.Event | None,
    emit: Callable[[Event], None],
) -> tuple[Message | None, list[ContextBlock]]:
    """The run's question and what the lifecycle hooks add to it."""
    question = next((m for m in reversed(transcript) if isinstance(m, UserMessage)), None)
    if lifecycle is None or question is None:
        return question, []
    first = not any(isinstance(m, AssistantMessage) for m in transcript)
    events: list[HookEvent] = ["session_start", "before_turn"] if first else ["before_turn"]
    context = replace(
        lifecycle.context, prompt=text_of(question.content), turn_index=turn_index(transcript) - 1
    )

    def note(found: HookNote) -> None:
        emit(Notice(text=found.error or found.text or "", name=found.hook_id or "hooks"))

    gathered = await gather(
        lifecycle.run, events, context, cancel=cancel, max_tokens=lifecycle.max_tokens, on_note=note
    )
    return question, list(gathered.context)


def with_hook_context(
    wire: list[Message],
    question: Message | None,
    blocks: list[ContextBlock],
    lifecycle: LifecycleHooks | None,
) -> list[Message]:
    if not blocks or question is None or lifecycle is None:
        return wire
    # Found by identity: a fold may have moved the question, or folded it away (then nothing is added).
    index = next((i for i, m in enumerate(wire) if m is question), None)
    return wire if index is None else with_context(wire, index, blocks, lifecycle.preface)


def tell_after_turn(
    lifecycle: LifecycleHooks, transcript: list[Message], question: Message | None, turn: Turn
) -> None:
    start = next((i for i, m in enumerate(transcript) if m is question), 0)
    context = replace(
        lifecycle.context,
        reply=turn.content,
        turn_messages=tuple(turn_messages(lifecycle.context.session_id or "", transcript, start)),
    )
    # The run does not wait for it, and leaving does not un-remember: the task is kept until it ends.
    task = asyncio.ensure_future(notify(lifecycle.run, "after_turn", context))
    _after_turn_tasks.add(task)
    task.add_done_callback(_after_turn_tasks.discard)


class Cancelled(Exception):
    """The run's cancel was set while a request was in flight."""


class RunEvents:
    """A run's events: kept for its metrics, stamped with the run, handed to the caller's callback.

    Slotted methods rather than closures in ``run_agent_loop``: with a thousand runs in flight, every cell
    a run holds is something the cyclic collector scans on each of its passes.
    """

    __slots__ = ("events", "on_event", "partial", "run_id", "step")

    def __init__(self, run_id: str, on_event: Callable[[Event], object] | None) -> None:
        self.run_id = run_id
        self.on_event = on_event
        self.events: list[Event] = []
        self.partial: list[str] = []  # the answer streamed so far in this step
        self.step = 0

    def emit(self, event: Event) -> None:
        stamped = event if event.run_id else with_run(event, self.run_id)
        self.events.append(stamped)
        if self.on_event is not None:
            self.on_event(stamped)

    # Stamped with the run here rather than by emit: these are most of a run's events, and copying a
    # frozen event to add the run costs more than the rest of its handling.
    def on_output(self, text: str) -> None:
        self.partial.append(text)
        self.emit(MessageUpdate(kind="text", delta=text, step=self.step, run_id=self.run_id))

    def on_thinking(self, text: str) -> None:
        self.emit(MessageUpdate(kind="thinking", delta=text, step=self.step, run_id=self.run_id))


class StepBody:
    """Builds one step's request body from the latches (again on every attempt); keeps the last built."""

    __slots__ = (
        "block",
        "blocks",
        "declared",
        "last",
        "lifecycle",
        "params",
        "prompt",
        "question",
        "session_id",
        "tool_choice",
        "wire",
    )

    def __init__(
        self,
        params: ModelParams,
        prompt: str | None,
        declared: list[Tool],
        wire: list[Message],
        question: Message | None,
        blocks: list[ContextBlock],
        lifecycle: LifecycleHooks | None,
        block: ToolBlock,
        session_id: str | None,
        tool_choice: ToolChoiceFn | None,
    ) -> None:
        self.params = params
        self.prompt = prompt
        self.declared = declared
        self.wire = wire
        self.question = question
        self.blocks = blocks
        self.lifecycle = lifecycle
        self.block = block
        self.session_id = session_id
        self.tool_choice = tool_choice
        self.last: dict[str, Any] = {}

    def __call__(self, c: EndpointCapabilities, m: ModelCapabilities) -> dict[str, Any]:
        wire = self.wire
        asked = self.params
        if self.tool_choice is not None:
            asked = replace(asked, tool_choice=self.tool_choice(wire))
        sent = with_hook_context(wire, self.question, self.blocks, self.lifecycle)
        self.last = build_body(
            asked, self.prompt, sent, self.declared, c, m, block=self.block, prompt_cache_key=self.session_id
        )
        return self.last


def keeper_for(
    endpoint: Endpoint,
    params: ModelParams,
    system: str | None,
    policy: LoopPolicy,
    context: ContextPolicy,
    limit: int,
    emit: Callable[[Event], None],
) -> ContextKeeper:
    """The run's context keeper, its memory flush running silent turns outside the transcript."""
    memory_tools = context.memory_tools

    async def one_turn(wire: list[Message], offered: Sequence[Tool]) -> list[Message]:
        return await silent_turn(endpoint, params, system, wire, offered, policy)

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
        summarise=summariser(endpoint, params.model, on_event=emit),
        emit=emit,
        flush=flush,
    )


_INIT_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def with_run(event: Event, run_id: str) -> Event:
    """A copy of an event made elsewhere (a turn, a tool), stamped with the run it belongs to."""
    kind = type(event)
    names = _INIT_FIELDS.get(kind)
    if names is None:
        names = _INIT_FIELDS[kind] = tuple(f.name for f in fields(kind) if f.init and f.name != "run_id")
    return kind(**{name: getattr(event, name) for name in names}, run_id=run_id)


def cancelled_error(transcript: list[Message], usage: Usage, steps: int) -> RunCancelled:
    return RunCancelled(
        "the run was cancelled", reason="cancelled", messages=transcript, usage=usage, steps=steps
    )


def stopped_error(
    exc: Exception, reason: str, transcript: list[Message], usage: Usage, steps: int
) -> RunError:
    return RunError(f"the run stopped: {exc}", reason=reason, messages=transcript, usage=usage, steps=steps)


async def cancellable(work: Awaitable[T], cancel: asyncio.Event | None) -> T:
    """Await a request, closing it at once when ``cancel`` is set (the HTTP response is closed with it)."""
    if cancel is None:
        return await work
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        waiter.cancel()
        raise
    if task in done:
        waiter.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, SteadyloopError):
        await task
    raise Cancelled
