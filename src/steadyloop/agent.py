"""``Agent``: a stateful agent around the loop, with queues, listeners, abort, and a memory of its own (public).

State lives on the agent (system prompt, model, tools, transcript, what is streaming, what is pending,
the last error, the fold that keeps a long conversation inside its window) and each ``prompt()`` is one
run of the loop over it. The transcript grows from the run's ``MessageEnd`` events, so a listener that
builds one from them holds exactly ``agent.state.messages``.

Listeners are awaited in the order they subscribed, one event at a time, and they are a barrier: a step's
tools start only once every listener has handled the message that asked for them. ``prompt()`` and
``wait_for_idle()`` return only once every listener has seen the run's ``AgentEnd``, so a listener that
persists the session finishes before the caller moves on. Bound to a session (``session=``), the agent
loads its history and fold from it and keeps every message there as it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal

from .context.branches import DEFAULT_RESERVE_TOKENS, BranchMove, branch_budget, branch_summariser
from .context.keeper import ContextState
from .context.prefix import StablePrefix
from .errors import InvalidInput, RunCancelled, RunError, SteadyloopError
from .events import (
    AgentEnd,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    QueuedMessage,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from .loop import (
    BeforeLlmCall,
    LifecycleHooks,
    LoopPolicy,
    LoopResult,
    RunConfig,
    RunHooks,
    RunQueues,
    ToolChoiceFn,
    run_loop,
)
from .messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolResultMessage,
    Turn,
    UserMessage,
)
from .request_body import ModelParams
from .run.config import StopAfterTurn
from .sessions.bound import AgentSession
from .sizing.calibration import chars_per_token_for
from .telemetry import trace_side_tasks
from .tools.approvals import ApprovalBroker, ApprovalPolicy
from .tools.definition import Tool
from .tools.execution import ToolHooks
from .tools.recorder import StepRecorder
from .wire.endpoints import Endpoint
from .wire.interceptors import Interceptors, wire_only
from .wire.windows import context_limit_for

__all__ = ["Agent", "AgentBusy", "AgentState", "AgentStream", "QueueClosed"]

Listener = Callable[[Event], object]
QueueMode = Literal["one-at-a-time", "all"]

_LLM_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


class AgentBusy(InvalidInput):
    """``prompt()`` was called while the agent is running; steer or follow up instead."""


class QueueClosed(InvalidInput):
    """``steer()`` or ``follow_up()`` came after the run under way ended (its listeners are still handling
    its end): that run cannot take the message, and it is never carried into the next one."""


@dataclass(slots=True)
class AgentState:
    """What the agent holds between and during runs.

    Attributes:
        system_prompt: sent first on every request.
        params: the model and what to ask of it (``thinking_level`` is its reasoning effort).
        tools: the tools the model may call.
        messages: the transcript; may hold custom message types, filtered by ``convert_to_llm``.
        is_streaming: a run is under way (until its ``AgentEnd`` listeners have finished).
        streaming_message: the assistant message as it streams.
        pending_tool_calls: ids of calls dispatched and not yet finished.
        error: the last run's error text, ``None`` after a run that completed.
    """

    system_prompt: str
    params: ModelParams
    tools: list[Tool] = field(default_factory=list)
    messages: list[Any] = field(default_factory=list)
    is_streaming: bool = False
    streaming_message: AssistantMessage | None = None
    pending_tool_calls: set[str] = field(default_factory=set)
    error: str | None = None

    @property
    def model(self) -> str:
        return self.params.model

    @property
    def thinking_level(self) -> str | None:
        return self.params.reasoning_effort


def _default_convert(messages: Sequence[Any]) -> list[Message]:
    return [m for m in messages if isinstance(m, _LLM_TYPES)]


class _Run:
    """One run as the agent holds it: its events on their way to the listeners, its task, its end."""

    __slots__ = (
        "cancel",
        "closed",
        "dispatcher",
        "entered",
        "events",
        "forced",
        "queues_closed",
        "taken",
        "task",
    )

    def __init__(self) -> None:
        self.cancel = asyncio.Event()
        self.closed = False  # the run's end was queued: what it says after that is late
        # The queues: what the run took from them, which of those entered its transcript, and whether its
        # end has passed (then nothing more may be queued until the agent is idle).
        self.taken: list[tuple[Literal["steering", "follow_up"], Message]] = []
        self.entered: set[int] = set()
        self.queues_closed = False
        self.events: asyncio.Queue[Event | asyncio.Future[None] | None] = asyncio.Queue()
        self.forced: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[LoopResult] | None = None
        self.dispatcher: asyncio.Task[None] | None = None

    async def barrier(self) -> None:
        """Return once the listeners have handled every event queued so far."""
        reached: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.events.put_nowait(reached)
        await reached


class Agent:
    """A stateful agent: prompt it, steer it, follow up, abort, and listen to everything it does.

    Args:
        endpoint: where to send requests.
        model: the model name, or full ``ModelParams``.
        system: the system prompt.
        tools: the tools the model may call.
        messages: a transcript to start from (with ``session``: after the session's history, and written
            to the session with its first write).
        thinking: the reasoning effort (``none`` .. ``high``, or ``"off"``).
        policy: loop policy (tool iterations, parallelism, continuations, retries, window).
        hooks: before/after tool calls, arguments transform.
        approvals: the broker gated calls wait on.
        approval_policy: which effect classes and tools need approval.
        convert_to_llm: custom message types to what the model reads, once per request, after
            ``transform_context`` (default: keep only transcript messages); may be async.
        transform_context: rewrite the transcript before every request (pruning, injected context).
        should_stop_after_turn: ``True`` (or an awaitable of it) ends the run after the current step.
        max_turns: requests one run may make (``RunLimitReached`` past it).
        run_timeout: seconds a run may take before it is cancelled (``RunTimedOut``, reason ``"timeout"``).
        session_id: sent as ``prompt_cache_key`` where the endpoint takes it (default: the session's id).
        api_key: called before every request for the key to use (for expiring tokens); may be async.
        tool_choice: ``"auto"``, ``"required"``, ``"none"``, a named function, or a function deciding it per
            request from the transcript about to be sent.
        steering_mode: deliver queued steering one message per step or all at once.
        follow_up_mode: the same for follow-ups.
        interrupt_mode: ``"immediate"`` skips calls not yet started when steering arrives; ``"wait"`` lets
            the step finish first.
        lifecycle: the host's lifecycle hooks, gathered onto each prompt's question and told each reply.
        before_llm_call: told each request before it is sent; a block ends the run (``ModelCallDenied``).
        session: the session the agent lives in (``await store.session(...)``): its history and fold are
            loaded, and every message, event and usage record goes back to it as the agent runs.
        prefix: holds the system prompt and tools still and the transcript append-only across prompts,
            so the prompt cache keeps matching (default: a fresh ``StablePrefix``). Setting
            ``state.system_prompt`` or ``state.tools`` (or changing that list) takes effect on the next
            request, during a run too, as a new version of the prefix told in a ``Notice``; a call to a
            tool no longer in ``state.tools`` is answered as an unknown tool and never runs.
        interceptors: the host's code at the edges of every request (``on_payload``, ``on_response``,
            ``on_sse_event``) and before listeners hear each streamed assistant event
            (``on_assistant_event``); ``agent.interceptors`` may be set again, and a run uses what was set
            when it started.
        recorder: runs each model request and each tool execution, and may give back what an earlier run
            of them returned instead (a durable host's ``StepRecorder``); ``agent.recorder`` may be set
            again, and a run uses what was set when it started.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        model: str | ModelParams,
        *,
        system: str = "",
        tools: Sequence[Tool] = (),
        messages: Sequence[Any] = (),
        thinking: str | None = None,
        policy: LoopPolicy | None = None,
        hooks: ToolHooks | None = None,
        approvals: ApprovalBroker | None = None,
        approval_policy: ApprovalPolicy | None = None,
        convert_to_llm: Callable[[Sequence[Any]], Sequence[Message] | Awaitable[Sequence[Message]]]
        | None = None,
        transform_context: Callable[[list[Any]], Awaitable[Sequence[Any]]] | None = None,
        should_stop_after_turn: StopAfterTurn | None = None,
        max_turns: int | None = None,
        run_timeout: float | None = None,
        session_id: str | None = None,
        api_key: Callable[[], str | Awaitable[str]] | None = None,
        tool_choice: str | dict[str, Any] | ToolChoiceFn | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        interrupt_mode: Literal["immediate", "wait"] = "immediate",
        lifecycle: LifecycleHooks | None = None,
        before_llm_call: BeforeLlmCall | None = None,
        session: AgentSession | None = None,
        prefix: StablePrefix | None = None,
        interceptors: Interceptors | None = None,
        recorder: StepRecorder | None = None,
    ) -> None:
        params = model if isinstance(model, ModelParams) else ModelParams(model=model)
        if thinking is not None:
            params = replace(params, reasoning_effort=thinking)
        self.tool_choice: ToolChoiceFn | None = None
        if callable(tool_choice):
            self.tool_choice = tool_choice
        elif tool_choice is not None:
            params = replace(params, tool_choice=tool_choice)
        if max_turns is not None and max_turns <= 0:
            raise InvalidInput("max_turns must be a positive number of requests")
        if run_timeout is not None and not run_timeout > 0:
            raise InvalidInput("run_timeout must be a positive number of seconds")
        self.endpoint = endpoint
        history = [*(session.messages if session is not None else ()), *messages]
        if session is not None and messages:
            session.adopt(messages)  # everything the agent holds is in its session
        self.state = AgentState(system_prompt=system, params=params, tools=list(tools), messages=history)
        self.policy = policy or LoopPolicy()
        self.hooks = hooks
        self.approvals = approvals
        self.approval_policy = approval_policy
        self.convert_to_llm = convert_to_llm or _default_convert
        self.transform_context = transform_context
        self.should_stop_after_turn = should_stop_after_turn
        self.max_turns = max_turns
        self.run_timeout = run_timeout
        self.session = session
        self.session_id = session_id or (session.session_id if session is not None else None)
        self.api_key = api_key
        self.steering_mode: QueueMode = steering_mode
        self.follow_up_mode: QueueMode = follow_up_mode
        self.interrupt_mode = interrupt_mode
        self.lifecycle = lifecycle
        self.before_llm_call = before_llm_call
        self.interceptors = interceptors
        self.recorder = recorder
        self.context = session.context if session is not None else ContextState()
        """The conversation's fold and pruning, kept from one prompt to the next."""
        self.prefix = prefix if prefix is not None else StablePrefix()
        """The versioned system prompt and tools and the append-only record of what was sent."""
        self.last_result: LoopResult | None = None
        self._listeners: list[Listener] = []
        self._steering: list[Message] = []
        self._follow_ups: list[Message] = []
        self._run: _Run | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._loaded: list[str] = []
        self._late: deque[Event] = deque()
        self._late_delivery: asyncio.Future[None] | None = None
        self._branching: asyncio.Event | None = None

    # -- listening --------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Hear every event, in order; an async listener is awaited before the next event is delivered.

        Returns:
            a function that unsubscribes.
        """
        self._listeners.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return unsubscribe

    # -- queues -----------------------------------------------------------------------------------------

    def steer(self, message: str | Message) -> None:
        """Queue a message for the model to read after the current step (skipping calls not yet started in
        ``immediate`` interrupt mode); queued while idle, the next run reads it.

        Raises:
            QueueClosed: the run under way has ended; ``prompt()`` with the message once it is idle.
        """
        self._queue(self._steering, message, "steer")

    def follow_up(self, message: str | Message) -> None:
        """Queue a message for when the model would otherwise stop; queued while idle, for the next run.

        Raises:
            QueueClosed: the run under way has ended; ``prompt()`` with the message once it is idle.
        """
        self._queue(self._follow_ups, message, "follow up")

    def _queue(self, queue: list[Message], message: str | Message, verb: str) -> None:
        run = self._run
        if run is not None and run.queues_closed:
            raise QueueClosed(
                f"the run has ended and takes no more messages: nothing to {verb}; "
                "prompt() with it once the agent is idle"
            )
        queue.append(_as_message(message))

    def clear_queues(self) -> None:
        """Drop queued steering and follow-up messages."""
        self._steering.clear()
        self._follow_ups.clear()

    def has_queued_messages(self) -> bool:
        return bool(self._steering or self._follow_ups)

    def _take(self, queue: list[Message], mode: QueueMode) -> list[Message]:
        if not queue:
            return []
        taken = list(queue) if mode == "all" else [queue[0]]
        del queue[: len(taken)]
        run = self._run
        if run is not None:
            name: Literal["steering", "follow_up"] = "steering" if queue is self._steering else "follow_up"
            run.taken.extend((name, message) for message in taken)
        return taken  # the run announces them; they enter state.messages with their MessageEnd

    def _close_queues(self, run: _Run) -> tuple[QueuedMessage, ...]:
        """The run's end: what its queues held and what became of it; nothing queued is left for later."""
        run.queues_closed = True
        held = [
            QueuedMessage(queue=queue, message=m, fate="delivered" if id(m) in run.entered else "dropped")
            for queue, m in run.taken
        ]
        held.sort(key=lambda item: item.fate != "delivered")
        held += [QueuedMessage(queue="steering", message=m, fate="dropped") for m in self._steering]
        held += [QueuedMessage(queue="follow_up", message=m, fate="dropped") for m in self._follow_ups]
        self.clear_queues()
        return tuple(held)

    # -- running ----------------------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return not self._idle.is_set()

    async def prompt(
        self, input: str | Message | Sequence[Message], *, images: Sequence[bytes | ImagePart] = ()
    ) -> Turn:
        """Add the user's input and run until the model stops asking for tools.

        Raises:
            AgentBusy: a run is already under way (use ``steer`` or ``follow_up``).
            RunError: the run stopped early; the agent keeps the transcript so far.
        """
        if self.is_running:
            raise AgentBusy("the agent is already running: use steer() or follow_up() to add to it")
        return await self._go(_input_messages(input, images))

    async def continue_(self) -> Turn:
        """Run again from the transcript as it is; its last message must be a user message or a tool result."""
        if self.is_running:
            raise AgentBusy("the agent is already running")
        # The host's convert_to_llm is not called to check: it runs once per request, after transform_context.
        # A host message at the end is the hook's to turn into something to answer.
        messages = self.state.messages
        hooked = self.convert_to_llm is not _default_convert
        last = (messages if hooked else _default_convert(messages))[-1:]
        if not last or (
            isinstance(last[0], _LLM_TYPES) and not isinstance(last[0], UserMessage | ToolResultMessage)
        ):
            raise InvalidInput("continue_() needs the transcript to end in a user message or a tool result")
        return await self._go([])

    def stream(
        self, input: str | Message | Sequence[Message], *, images: Sequence[bytes | ImagePart] = ()
    ) -> AgentStream:
        """``prompt()`` as an async iterator of its events::

            async for event in agent.stream("What changed?"):
                ...

        The consumer is a listener like any other (a barrier, after those subscribed); see ``AgentStream``.
        """
        return AgentStream(self, _input_messages(input, images))

    def abort(self) -> None:
        """Stop the run (the request in flight is closed and running tools are stopped), or the branch
        summary ``branch_to`` is waiting for. Never raises."""
        if self._run is not None:
            self._run.cancel.set()
        if self._branching is not None:
            self._branching.set()

    def force_abort(self, reason: str = "forced") -> bool:
        """Take the agent out of its run at once, when ``abort()`` did not drain it (a tool or a listener
        that ignores cancellation).

        The run is cancelled and left to settle on its own: ``prompt()`` raises ``RunCancelled`` (reason
        ``"forced"``) without waiting for it, and nothing that run emits afterwards reaches the listeners
        or the state. A run that had already ended while a listener held its ``AgentEnd`` keeps its
        outcome: the listeners are left, and ``prompt()`` returns its answer (or raises its error).
        Never raises.

        Returns:
            ``False`` when no run was under way.
        """
        run = self._run
        if run is None:
            return False
        run.cancel.set()
        if not run.forced.done():
            run.forced.set_result(reason)
        return True

    async def wait_for_idle(self) -> None:
        """Wait until no run is under way and every listener has seen its end."""
        await self._idle.wait()

    def reset(self, *, session: AgentSession | None = None) -> None:
        """Forget the transcript, the fold, the queues and the last error (not the configuration).

        Args:
            session: the session to live in from now on (its history and fold are taken up); without
                one, an agent that had a session leaves it.
        """
        self.abort()
        self.state.messages.clear()
        self.state.error = None
        self.state.streaming_message = None
        self.state.pending_tool_calls.clear()
        self.clear_queues()
        self._loaded.clear()
        self.prefix.forget_messages()
        if self.session is not None and self.session_id == self.session.session_id:
            self.session_id = None
        self.session = session
        if session is None:
            self.context = ContextState()
        else:
            self.context = session.context
            self.state.messages.extend(session.messages)
            self.session_id = session.session_id

    async def branch_to(
        self,
        entry_id: str | int | None,
        *,
        summarise: bool = True,
        instructions: str | None = None,
        reserve_tokens: int = DEFAULT_RESERVE_TOKENS,
    ) -> BranchMove:
        """Continue the conversation from an entry of its session's tree (``None``: from the start).

        The branch left behind stays in the store, and with ``summarise`` it is summarised by the agent's
        model into an entry under ``entry_id`` that the conversation continues from, listing the files
        the branch read and changed. The summary request weighs the newest of the branch's messages up
        to the window less ``reserve_tokens`` (at most half the window). ``abort()`` cancels it; a summary
        that was aborted or failed leaves everything where it was (``moved`` is ``False`` and the
        summary says why; ``summarise=False`` moves without one).

        Raises:
            AgentBusy: a run or another move is under way.
            InvalidInput: the agent has no session, or ``entry_id`` is not one of its entries.
        """
        if self.is_running:
            raise AgentBusy("the agent is running: branch after the run ends")
        session = self.session
        if session is None:
            raise InvalidInput("branch_to needs an agent that lives in a session (Agent(session=...))")
        self._idle.clear()
        cancel = self._branching = asyncio.Event()
        try:
            model = self.state.model
            summariser = None
            budget = 0
            if summarise:
                window = self.policy.context_limit or await context_limit_for(self.endpoint, model)
                budget = branch_budget(window, reserve_tokens)
                summariser = branch_summariser(
                    self.endpoint,
                    model,
                    reasoning_effort=self.state.params.side_effort,
                    # Outside any run, so traced under whatever span the host has current.
                    on_event=trace_side_tasks(self.endpoint),
                    api_key=self.api_key,
                    interceptors=wire_only(self.interceptors),
                )
            move = await session.branch_to(
                entry_id,
                summarise=summariser,
                budget=budget,
                chars_per_token=chars_per_token_for(self.endpoint, model),
                instructions=instructions,
                cancel=cancel,
            )
            if move.moved:
                self.state.messages = list(session.messages)
                self.state.error = None
                self.prefix.forget_messages()  # a new position: the next request is a new baseline
            return move
        finally:
            self._branching = None
            self._idle.set()

    async def request_messages(self) -> list[Message]:
        """The messages the next request would send after the system prompt: the transcript through
        ``transform_context`` and ``convert_to_llm``, pruned results as stubs, the kept fold applied."""
        working: Sequence[Any] = list(self.state.messages)
        if self.transform_context is not None:
            working = await self.transform_context(list(working))
        llm = self.convert_to_llm(working)
        wire = list(await llm if inspect.isawaitable(llm) else llm)
        placement = self.policy.context.placement if self.policy.context is not None else "user"
        return self.context.folded(self.context.stubbed(wire), self.context.locate(wire), placement)

    def run_config(self) -> RunConfig:
        """The ``RunConfig`` the next run will use, from the agent's state and settings."""
        policy = self.policy
        if self.max_turns is not None:
            policy = replace(policy, max_turns=self.max_turns)
        if self.run_timeout is not None:
            policy = replace(policy, run_timeout=self.run_timeout)
        return RunConfig(
            endpoint=self.endpoint,
            params=self.state.params,
            system=self.state.system_prompt or None,
            tools=self.state.tools,
            policy=policy,
            hooks=RunHooks(
                tools=self.hooks,
                lifecycle=self.lifecycle,
                before_llm_call=self.before_llm_call,
                should_stop_after_turn=self.should_stop_after_turn,
                tool_choice=self.tool_choice,
                transform_context=self.transform_context,
                # The default keeps the loop's own view, which the prefix can admit without re-reading it.
                convert_to_llm=None if self.convert_to_llm is _default_convert else self.convert_to_llm,
                recorder=self.recorder,
            ),
            queues=RunQueues(
                steering=lambda: self._take(self._steering, self.steering_mode),
                follow_up=lambda: self._take(self._follow_ups, self.follow_up_mode),
                interrupt=(lambda: bool(self._steering)) if self.interrupt_mode == "immediate" else None,
            ),
            approvals=self.approvals,
            approval_policy=self.approval_policy,
            carried=self._loaded,
            api_key=self.api_key,
            session_id=self.session_id,
            context=self.context,
            prefix=self.prefix,
            interceptors=self.interceptors,
            head=self._head,
        )

    def _head(self) -> tuple[str | None, list[Tool]]:
        """The system prompt and tools in force: what ``state`` holds now."""
        return self.state.system_prompt or None, self.state.tools

    async def _go(self, new: list[Message]) -> Turn:
        self._idle.clear()
        state = self.state
        state.is_streaming = True
        state.error = None
        run = self._run = _Run()
        run.dispatcher = asyncio.create_task(self._dispatch(run))
        run.task = asyncio.create_task(
            run_loop(
                self.run_config(),
                [*state.messages, *new],
                on_event=lambda event: self._observe(run, event),
                cancel=run.cancel,
                new_messages=len(new),
                barrier=run.barrier,
            )
        )
        try:
            try:
                first: set[asyncio.Future[Any]] = {run.task, run.forced}
                done, _ = await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                # Whoever awaited prompt() was cancelled: the run goes with it, and ends before we leave.
                run.task.cancel()
                await asyncio.wait({run.task})
                raise
            if run.task not in done:
                raise self._forced(run)
            result = run.task.result()
            self.last_result = result
            self._loaded = result.loaded
            return result.turn
        except SteadyloopError as error:
            if not isinstance(error, RunCancelled) or error.reason != "forced":
                state.error = str(error)
            raise
        finally:
            await self._settle(run)

    def _forced(self, run: _Run) -> RunCancelled:
        """Leave a run that did not drain: the error ``prompt()`` raises, the run left to settle alone."""
        reason = run.forced.result()
        assert run.task is not None
        run.task.cancel()
        _orphans.add(run.task)
        run.task.add_done_callback(_forget)
        if run.dispatcher is not None:
            run.dispatcher.cancel()
        self.state.error = f"the run was force-aborted: {reason}"
        return RunCancelled(
            f"the run was force-aborted: {reason}", reason="forced", messages=list(self.state.messages)
        )

    async def _settle(self, run: _Run) -> None:
        state = self.state
        run.closed = True
        if run.dispatcher is not None and not run.dispatcher.done():
            run.events.put_nowait(None)
            waiter = asyncio.ensure_future(asyncio.shield(run.dispatcher))
            either: set[asyncio.Future[Any]] = {waiter, run.forced}
            done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if waiter not in done:  # forced while a listener held the run's end
                waiter.cancel()
                run.dispatcher.cancel()
                if run.task is not None and not run.task.done():
                    self._forced(run)
        state.is_streaming = False
        state.streaming_message = None
        state.pending_tool_calls.clear()
        if not run.queues_closed:  # no AgentEnd reached the agent (forced out, or refused at its start)
            self._close_queues(run)
        if self._run is run:
            self._run = None
        self._idle.set()

    def _observe(self, run: _Run, event: Event) -> None:
        # State is updated as events happen, so a listener reading agent.state sees the run's present. A
        # run that was forced out is no longer the agent's: what it says afterwards is dropped.
        if run.forced.done():
            return
        if isinstance(event, AgentEnd) and not run.queues_closed:
            # Closed as the run says it ended, with no await since its last look at the queues: a message
            # queued from here on is refused rather than left for the next run.
            event = replace(event, queued=self._close_queues(run))
        state = self.state
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            state.streaming_message = AssistantMessage()
        elif isinstance(event, MessageUpdate) and state.streaming_message is not None:
            current = state.streaming_message
            if event.kind == "text":
                state.streaming_message = replace(current, content=current.content + event.delta)
            else:
                state.streaming_message = replace(current, reasoning=current.reasoning + event.delta)
        elif isinstance(event, MessageEnd):
            state.messages.append(event.message)
            if run.taken:
                run.entered.add(id(event.message))
            if isinstance(event.message, AssistantMessage):
                state.streaming_message = None
        elif isinstance(event, ToolExecutionStart):
            state.pending_tool_calls.add(event.call_id)
        elif isinstance(event, ToolExecutionEnd):
            state.pending_tool_calls.discard(event.call_id)
        if run.closed:
            self._deliver_late(run, event)
            return
        run.events.put_nowait(event)

    def _deliver_late(self, run: _Run, event: Event) -> None:
        """An event a run sends after it ended (a tool that settled late), to the listeners all the same,
        after everything the run said before it."""
        self._late.append(event)
        if self._late_delivery is None or self._late_delivery.done():
            self._late_delivery = asyncio.ensure_future(self._drain_late(run.dispatcher))

    async def _drain_late(self, after: asyncio.Task[None] | None) -> None:
        if after is not None and not after.done():
            await asyncio.wait({after})
        while self._late:
            await self._hand(self._late.popleft())

    async def _dispatch(self, run: _Run) -> None:
        while True:
            item = await run.events.get()
            if item is None:
                return
            if isinstance(item, asyncio.Future):
                if not item.done():
                    item.set_result(None)
                continue
            await self._hand(item)

    async def _hand(self, event: Event) -> None:
        """One event to the session (first, so a listener reading the store finds it) and every listener."""
        if self.session is not None:
            await self.session.observe(event, self.endpoint)
        for listener in list(self._listeners):
            try:
                outcome = listener(event)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # a listener's failure is its own; the run and other listeners go on
                continue


_orphans: set[asyncio.Task[LoopResult]] = set()


def _forget(task: asyncio.Task[LoopResult]) -> None:
    _orphans.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: the run was left, so its ending is nobody's to raise


class AgentStream:
    """A prompt as an async iterator of its events: ``async for event in agent.stream(...)``.

    The run starts with the first ``__anext__``. Events come in order, each taken by the consumer before
    the run's tools go on (the consumer is a listener, so it is part of the barrier). After the run's
    ``AgentEnd`` the iteration ends, or raises the run's ``RunError``; ``turn`` is the answer once it
    completed. Leaving early (``break``, ``aclose()``, or ``async with``) aborts the run and waits for it.
    """

    def __init__(self, agent: Agent, new: list[Message]) -> None:
        self.turn: Turn | None = None
        self._events = self._run(agent, new)

    def __aiter__(self) -> AgentStream:
        return self

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Abort the run if it is still going and wait for it to end."""
        await self._events.aclose()

    async def __aenter__(self) -> AgentStream:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self, agent: Agent, new: list[Message]) -> AsyncGenerator[Event, None]:
        if agent.is_running:
            raise AgentBusy("the agent is already running: use steer() or follow_up() to add to it")
        handed: asyncio.Queue[tuple[Event, asyncio.Future[None]] | None] = asyncio.Queue()

        async def listener(event: Event) -> None:
            taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            handed.put_nowait((event, taken))
            await taken  # the consumer came back for the next one

        unsubscribe = agent.subscribe(listener)
        task = asyncio.ensure_future(agent._go(new))
        task.add_done_callback(lambda _: handed.put_nowait(None))
        try:
            while (item := await handed.get()) is not None:
                event, taken = item
                try:
                    yield event
                finally:
                    if not taken.done():
                        taken.set_result(None)
                if isinstance(event, AgentEnd):
                    break
            self.turn = await task
        finally:
            unsubscribe()
            while not handed.empty():  # anything still handed over is released, so the run can end
                item = handed.get_nowait()
                if item is not None and not item[1].done():
                    item[1].set_result(None)
            if not task.done():
                agent.abort()
                with contextlib.suppress(RunError, asyncio.CancelledError):
                    await task
            elif not task.cancelled():
                task.exception()


def _input_messages(
    input: str | Message | Sequence[Message], images: Sequence[bytes | ImagePart]
) -> list[Message]:
    if isinstance(input, str):
        return [_user(input, images)]
    if isinstance(input, _LLM_TYPES):
        return [input]
    return list(input)


def _user(text: str, images: Sequence[bytes | ImagePart]) -> UserMessage:
    if not images:
        return UserMessage(content=text)
    parts: list[TextPart | ImagePart] = [TextPart(text)]
    for image in images:
        parts.append(image if isinstance(image, ImagePart) else ImagePart.from_bytes(image))
    return UserMessage(content=tuple(parts))


def _as_message(message: str | Message) -> Message:
    if isinstance(message, str):
        return UserMessage(content=message)
    if not isinstance(message, _LLM_TYPES):
        raise InvalidInput(f"not a message: {type(message).__name__}")
    return message
