"""The agent loop: a turn, the tools it asked for, repeat, until the model stops asking (public).

``run_loop`` is the order of a run's phases and nothing else; each phase is a module of
``steadyloop.run`` named after it. Everything that makes one request survive a real endpoint is in
``run_turn``; everything that runs a step's calls is in ``run_tool_calls``. ``stream_loop`` is the same
run as an async iterator of its events, and ``run_agent_loop`` the same run spelled with keywords.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, TypedDict, Unpack

from .context.keeper import ContextState
from .context.prefix import StablePrefix
from .errors import RunError
from .events import AgentStart, Event, Notice
from .messages import Message, Turn
from .metrics import RunMetrics, run_metrics
from .request_body import ModelParams
from .run.calls import run_calls, stop_if_looping
from .run.config import (
    ApiKey,
    BeforeLlmCall,
    BeforeStep,
    ConvertToLlm,
    HeadSource,
    LifecycleHooks,
    LoopPolicy,
    MessageSource,
    ModelCall,
    RunConfig,
    RunHooks,
    RunQueues,
    StopAfterTurn,
    ToolChoiceFn,
    TransformContext,
)
from .run.decide import go_on
from .run.ending import announce_end, stop_for
from .run.lifecycle import open_run, tell_after_turn
from .run.prefix import hold_prefix
from .run.prepare import prepare_request
from .run.reply import step_reply
from .run.state import Cancelled, RunEvents, RunState, check_start
from .telemetry import trace_run
from .tools.approvals import ApprovalBroker, ApprovalPolicy
from .tools.definition import Tool
from .tools.execution import ToolHooks
from .tools.loading import CatalogEntry
from .usage import Usage
from .wire.endpoints import Endpoint
from .wire.interceptors import Interceptors

__all__ = [
    "BeforeLlmCall",
    "BeforeStep",
    "LifecycleHooks",
    "LoopOptions",
    "LoopPolicy",
    "LoopResult",
    "LoopStream",
    "MessageSource",
    "ModelCall",
    "RunConfig",
    "RunHooks",
    "RunQueues",
    "ToolChoiceFn",
    "run_agent_loop",
    "run_loop",
    "stream_agent_loop",
    "stream_loop",
]

Barrier = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class LoopResult:
    """A finished run.

    Attributes:
        turn: the last turn (the answer).
        messages: the whole transcript, the given messages first; never rewritten by a fold.
        usage: tokens the run spent.
        steps: requests made.
        loaded: tools loaded on demand, to carry into the next turn of the conversation.
        metrics: what the run cost, added up from its events.
        output: the answer read as the response schema asked (``params.response_format``), else ``None``.
        context: the fold and pruning in force at the end; pass it as ``RunConfig.context`` (or
            ``run_agent_loop(context=...)``) with ``messages`` to carry the conversation on without folding
            it again.
    """

    turn: Turn
    messages: list[Message]
    usage: Usage
    steps: int
    loaded: list[str]
    metrics: RunMetrics
    output: Any = None
    context: ContextState | None = None


async def run_loop(
    config: RunConfig,
    messages: Sequence[Message],
    *,
    on_event: Callable[[Event], object] | None = None,
    cancel: asyncio.Event | None = None,
    run_id: str | None = None,
    new_messages: int = 1,
    barrier: Barrier | None = None,
) -> LoopResult:
    """Run the model and its tools over ``messages`` until it stops asking for tools.

    Args:
        config: what the run is.
        messages: the transcript so far, ending in what to answer (a user message or a tool result);
            never written to.
        on_event: every event of the run, in order, numbered by ``seq``.
        cancel: set to abort: the request in flight is closed and running tools are stopped.
        run_id: stamped on every event (default: a fresh id).
        new_messages: how many trailing messages are new this run (announced as message events).
        barrier: awaited before each step's tool calls start; the host returns once its listeners have
            handled every event so far (the ``Agent`` does, so no store sees a result before its call).

    Raises:
        InvalidInput: the transcript is empty or ends in an assistant message (nothing is emitted).
        RunError: the run stopped early, carrying the transcript so far, usage and steps; its subclass
            says why (``RunCancelled``, ``RunTimedOut``, ``RunLimitReached``, ``ToolLoopDetected``,
            ``ModelCallDenied``, ``OutputInvalid``, or a ``RunEndpointError`` that is also the endpoint's
            error: ``except ContextOverflow`` catches an overflow that stopped a run).
    """
    run_id = run_id or uuid.uuid4().hex
    config, held = hold_prefix(config)
    traced = trace_run(
        on_event,
        endpoint=config.endpoint,
        params=config.params,
        run_id=run_id,
        session_id=config.session_id,
    )
    events = RunEvents(run_id, traced)
    run = RunState(config, messages, events, cancel=cancel, new_messages=new_messages, barrier=barrier)
    check_start(run.transcript, converted=config.hooks.convert_to_llm is not None)
    run.start_timer()
    events.say(AgentStart)
    for note in held:
        events.say(Notice, text=note, name="prefix")
    try:
        _start_step(run)
        await open_run(run)
        while True:
            request = await prepare_request(run)
            turn = await step_reply(run, request)
            batch = await run_calls(run, turn, request)
            events.end_turn(turn.finish_reason)
            if run.stopping:
                raise Cancelled
            stop_if_looping(run, batch)
            if not await go_on(run, batch):
                break
            _start_step(run)
        if run.outcome == "completed":
            tell_after_turn(run)
    except asyncio.CancelledError:
        run.outcome, run.error_text = "cancelled", "cancelled"
        raise
    except Exception as exc:
        error = stop_for(run, exc)
        if error is exc:
            raise
        raise error from (None if isinstance(exc, Cancelled) else exc)
    finally:
        announce_end(run)
    return LoopResult(
        turn=run.last_turn,
        messages=run.transcript,
        usage=run.totals,
        steps=run.steps,
        loaded=run.loader.carry_over(),
        metrics=run_metrics(events.events, context_length=config.policy.context_limit, loads=run.loader),
        output=run.output,
        context=run.context,
    )


def _start_step(run: RunState) -> None:
    """A new step: its ``TurnStart``, then the messages entering the transcript with it."""
    if run.stopping:
        raise Cancelled
    events = run.events
    events.start_turn(run.steps + 1)
    for message in run.announce:
        events.announce(message)
    run.announce = []


class LoopStream:
    """A run as an async iterator of its events: ``async for event in stream_loop(...)``.

    The run starts on the first ``__anext__`` and its events come in order; after its ``AgentEnd`` the
    iteration ends, or raises the run's ``RunError``. ``result`` is the ``LoopResult`` once it completed.
    The consumer is the run's barrier: a step's tools start only after the consumer has taken every event
    before them. Leaving early (``break``, or ``aclose()``; ``async with`` does it for you) aborts the run
    and waits for it to end.
    """

    def __init__(
        self,
        config: RunConfig,
        messages: Sequence[Message],
        *,
        cancel: asyncio.Event | None = None,
        run_id: str | None = None,
        new_messages: int = 1,
    ) -> None:
        self.result: LoopResult | None = None
        self._events = self._run(config, messages, cancel or asyncio.Event(), run_id, new_messages)

    def __aiter__(self) -> LoopStream:
        return self

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Abort the run if it is still going and wait for it to end."""
        await self._events.aclose()

    async def __aenter__(self) -> LoopStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(
        self,
        config: RunConfig,
        messages: Sequence[Message],
        cancel: asyncio.Event,
        run_id: str | None,
        new_messages: int,
    ) -> AsyncGenerator[Event, None]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        task = asyncio.ensure_future(
            run_loop(
                config,
                messages,
                on_event=queue.put_nowait,
                cancel=cancel,
                run_id=run_id,
                new_messages=new_messages,
                barrier=queue.join,
            )
        )
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                try:
                    yield event
                finally:
                    queue.task_done()  # the consumer came back for more: this one is handled
            self.result = task.result()
        finally:
            if not task.done():
                cancel.set()
                with contextlib.suppress(RunError, asyncio.CancelledError):
                    await task
            elif not task.cancelled():
                task.exception()  # retrieved: raised above, or ignored because the consumer left


def stream_loop(
    config: RunConfig,
    messages: Sequence[Message],
    *,
    cancel: asyncio.Event | None = None,
    run_id: str | None = None,
    new_messages: int = 1,
) -> LoopStream:
    """``run_loop`` as an async iterator of its events; see ``LoopStream``."""
    return LoopStream(config, messages, cancel=cancel, run_id=run_id, new_messages=new_messages)


class LoopOptions(TypedDict, total=False):
    """``run_agent_loop``'s keywords for what a run is; each one is a field of ``RunConfig`` (``hooks``
    here is ``RunHooks.tools``, and ``max_turns`` overrides ``policy.max_turns``)."""

    system: str | None
    tools: Sequence[Tool]
    policy: LoopPolicy | None
    catalog: Sequence[CatalogEntry] | None
    preselected: Sequence[str] | None
    carried: Sequence[str]
    hooks: ToolHooks | None
    approvals: ApprovalBroker | None
    approval_policy: ApprovalPolicy | None
    before_step: BeforeStep | None
    session_id: str | None
    steering: MessageSource | None
    follow_up: MessageSource | None
    interrupt: Callable[[], bool] | None
    should_stop_after_turn: StopAfterTurn | None
    max_turns: int | None
    tool_choice: ToolChoiceFn | None
    lifecycle: LifecycleHooks | None
    before_llm_call: BeforeLlmCall | None
    transform_context: TransformContext | None
    convert_to_llm: ConvertToLlm | None
    api_key: ApiKey | None
    context: ContextState | None
    prefix: StablePrefix | None
    interceptors: Interceptors | None
    head: HeadSource | None


def loop_config(
    endpoint: Endpoint, params: ModelParams, *, caller: str = "loop_config", **options: Unpack[LoopOptions]
) -> RunConfig:
    """The ``RunConfig`` ``run_agent_loop``'s keywords describe.

    Raises:
        TypeError: a keyword is not one of ``LoopOptions`` (a misspelt ``sytem=`` must not run without a
            system prompt); ``caller`` names the function in the message, as Python's own error does.
    """
    _refuse_unknown(caller, options)
    policy = options.get("policy") or LoopPolicy()
    max_turns = options.get("max_turns")
    if max_turns is not None:
        policy = replace(policy, max_turns=max_turns)
    return RunConfig(
        endpoint=endpoint,
        params=params,
        system=options.get("system"),
        tools=options.get("tools", ()),
        policy=policy,
        hooks=RunHooks(
            tools=options.get("hooks"),
            lifecycle=options.get("lifecycle"),
            before_step=options.get("before_step"),
            before_llm_call=options.get("before_llm_call"),
            should_stop_after_turn=options.get("should_stop_after_turn"),
            tool_choice=options.get("tool_choice"),
            transform_context=options.get("transform_context"),
            convert_to_llm=options.get("convert_to_llm"),
        ),
        queues=RunQueues(
            steering=options.get("steering"),
            follow_up=options.get("follow_up"),
            interrupt=options.get("interrupt"),
        ),
        approvals=options.get("approvals"),
        approval_policy=options.get("approval_policy"),
        catalog=options.get("catalog"),
        preselected=options.get("preselected"),
        carried=options.get("carried", ()),
        api_key=options.get("api_key"),
        session_id=options.get("session_id"),
        context=options.get("context"),
        prefix=options.get("prefix"),
        interceptors=options.get("interceptors"),
        head=options.get("head"),
    )


def _refuse_unknown(caller: str, options: Mapping[str, object]) -> None:
    known = LoopOptions.__optional_keys__
    for name in options:
        if name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}{hint}")


async def run_agent_loop(
    endpoint: Endpoint,
    params: ModelParams,
    *,
    messages: Sequence[Message],
    on_event: Callable[[Event], object] | None = None,
    cancel: asyncio.Event | None = None,
    run_id: str | None = None,
    new_messages: int = 1,
    **config: Unpack[LoopOptions],
) -> LoopResult:
    """Run the model and its tools until it stops asking for tools: ``run_loop`` spelled with keywords.

    Args:
        endpoint: where to send requests.
        params: what to ask the model for.
        messages: the transcript so far, ending in the question; never written to.
        on_event: every event of the run, in order.
        cancel: set to abort: the request in flight is closed and running tools are stopped.
        run_id: stamped on every event (default: a fresh id).
        new_messages: how many trailing messages are new this run (announced as message events).
        **config: what the run is (``LoopOptions``: ``system``, ``tools``, ``policy``, ``hooks`` for
            tool calls, ``approvals``, ``steering``, ``max_turns``, ``before_llm_call``, ``context``, ...),
            each as ``RunConfig`` describes it.

    Raises:
        TypeError: a keyword is not one of ``LoopOptions`` (nothing is sent).
        InvalidInput: the transcript is empty or ends in an assistant message.
        RunError: the run stopped early; see ``run_loop``.
    """
    return await run_loop(
        loop_config(endpoint, params, caller="run_agent_loop", **config),
        messages,
        on_event=on_event,
        cancel=cancel,
        run_id=run_id,
        new_messages=new_messages,
    )


def stream_agent_loop(
    endpoint: Endpoint,
    params: ModelParams,
    *,
    messages: Sequence[Message],
    cancel: asyncio.Event | None = None,
    run_id: str | None = None,
    new_messages: int = 1,
    **config: Unpack[LoopOptions],
) -> LoopStream:
    """``run_agent_loop`` as an async iterator of its events::

    async with sl.stream_agent_loop(endpoint, params, messages=[sl.UserMessage("Hi")]) as run:
        async for event in run:
            ...
    print(run.result.turn.content)

    Raises:
        TypeError: a keyword is not one of ``LoopOptions`` (raised here, before the run starts).
    """
    return LoopStream(
        loop_config(endpoint, params, caller="stream_agent_loop", **config),
        messages,
        cancel=cancel,
        run_id=run_id,
        new_messages=new_messages,
    )
