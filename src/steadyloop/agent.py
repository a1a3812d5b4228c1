"""``Agent``: a stateful agent around ``run_agent_loop``, with queues, listeners and abort.

State lives on the agent (system prompt, model, tools, transcript, what is streaming, what is pending,
the last error) and each ``prompt()`` is one run of the loop over it. Listeners are awaited in the order
they subscribed, one event at a time, and ``prompt()`` and ``wait_for_idle()`` return only once every
listener has seen the run's ``AgentEnd``, so a listener that persists the session finishes before the
caller moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .errors import InvalidInput, RunCancelled, RunError, SteadyloopError
from .events import (
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from .loop import LifecycleHooks, LoopPolicy, LoopResult, ToolChoiceFn, run_agent_loop
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
from .tools.approvals import ApprovalBroker, ApprovalPolicy
from .tools.definition import Tool
from .tools.execution import ToolHooks
from .wire.endpoints import Endpoint

__all__ = ["Agent", "AgentBusy", "AgentState"]

Listener = Callable[[Event], object]
QueueMode = Literal["one-at-a-time", "all"]

_LLM_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)


class AgentBusy(InvalidInput):
    """``prompt()`` was called while the agent is running; steer or follow up instead."""


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


class Agent:
    """A stateful agent: prompt it, steer it, follow up, abort, and listen to everything it does.

    Args:
        endpoint: where to send requests.
        model: the model name, or full ``ModelParams``.
        system: the system prompt.
        tools: the tools the model may call.
        messages: a transcript to start from.
        thinking: the reasoning effort (``none`` .. ``high``, or ``"off"``).
        policy: loop policy (tool iterations, parallelism, continuations, retries, window).
        hooks: before/after tool calls, arguments transform.
        approvals: the broker gated calls wait on.
        approval_policy: which effect classes and tools need approval.
        convert_to_llm: custom message types to what the model reads (default: keep only transcript messages).
        transform_context: rewrite the transcript before each run (pruning, injected context).
        should_stop_after_turn: ``True`` ends the run after the current step.
        max_turns: requests one run may make.
        run_timeout: seconds a run may take before it is aborted.
        session_id: sent as ``prompt_cache_key`` where the endpoint takes it.
        api_key: called before each run for the key to use (for expiring tokens).
        tool_choice: ``"auto"``, ``"required"``, ``"none"``, a named function, or a function deciding it per
            request from the transcript about to be sent.
        steering_mode: deliver queued steering one message per step or all at once.
        follow_up_mode: the same for follow-ups.
        interrupt_mode: ``"immediate"`` skips calls not yet started when steering arrives; ``"wait"`` lets
            the step finish first.
        lifecycle: the host's lifecycle hooks, gathered onto each prompt's question and told each reply.
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
        convert_to_llm: Callable[[Sequence[Any]], Sequence[Message]] | None = None,
        transform_context: Callable[[list[Any]], Awaitable[list[Any]]] | None = None,
        should_stop_after_turn: Callable[[Turn, list[Message]], bool] | None = None,
        max_turns: int | None = None,
        run_timeout: float | None = None,
        session_id: str | None = None,
        api_key: Callable[[], str | Awaitable[str]] | None = None,
        tool_choice: str | dict[str, Any] | ToolChoiceFn | None = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        interrupt_mode: Literal["immediate", "wait"] = "immediate",
        lifecycle: LifecycleHooks | None = None,
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
        self.endpoint = endpoint
        self.state = AgentState(
            system_prompt=system, params=params, tools=list(tools), messages=list(messages)
        )
        self.policy = policy or LoopPolicy()
        self.hooks = hooks
        self.approvals = approvals
        self.approval_policy = approval_policy
        self.convert_to_llm = convert_to_llm or _default_convert
        self.transform_context = transform_context
        self.should_stop_after_turn = should_stop_after_turn
        self.max_turns = max_turns
        self.run_timeout = run_timeout
        self.session_id = session_id
        self.api_key = api_key
        self.steering_mode: QueueMode = steering_mode
        self.follow_up_mode: QueueMode = follow_up_mode
        self.interrupt_mode = interrupt_mode
        self.lifecycle = lifecycle
        self.last_result: LoopResult | None = None
        self._listeners: list[Listener] = []
        self._steering: list[Message] = []
        self._follow_ups: list[Message] = []
        self._cancel: asyncio.Event | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._loaded: list[str] = []

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
        ``immediate`` interrupt mode)."""
        self._steering.append(_as_message(message))

    def follow_up(self, message: str | Message) -> None:
        """Queue a message for when the model would otherwise stop."""
        self._follow_ups.append(_as_message(message))

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
        self.state.messages.extend(taken)
        return taken

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
        if isinstance(input, str):
            new: list[Message] = [_user(input, images)]
        elif isinstance(input, _LLM_TYPES):
            new = [input]
        else:
            new = list(input)
        self.state.messages.extend(new)
        return await self._run(len(new))

    async def continue_(self) -> Turn:
        """Run again from the transcript as it is; its last message must be a user message or a tool result."""
        if self.is_running:
            raise AgentBusy("the agent is already running")
        llm = list(self.convert_to_llm(self.state.messages))
        if not llm or not isinstance(llm[-1], UserMessage | ToolResultMessage):
            raise InvalidInput("continue_() needs the transcript to end in a user message or a tool result")
        return await self._run(0)

    def abort(self) -> None:
        """Stop the run: the request in flight is closed and running tools are stopped. Never raises."""
        if self._cancel is not None:
            self._cancel.set()

    async def wait_for_idle(self) -> None:
        """Wait until no run is under way and every listener has seen its end."""
        await self._idle.wait()

    def reset(self) -> None:
        """Forget the transcript, the queues and the last error (not the configuration)."""
        self.abort()
        self.state.messages.clear()
        self.state.error = None
        self.state.streaming_message = None
        self.state.pending_tool_calls.clear()
        self.clear_queues()
        self._loaded.clear()

    async def _run(self, new_messages: int) -> Turn:
        self._idle.clear()
        self.state.is_streaming = True
        self.state.error = None
        cancel = self._cancel = asyncio.Event()
        events: asyncio.Queue[Event | None] = asyncio.Queue()
        dispatcher = asyncio.create_task(self._dispatch(events))
        timed_out = False

        def time_out() -> None:
            nonlocal timed_out
            timed_out = True
            cancel.set()

        timer = (
            asyncio.get_running_loop().call_later(self.run_timeout, time_out) if self.run_timeout else None
        )
        try:
            working = list(self.state.messages)
            if self.transform_context is not None:
                working = list(await self.transform_context(working))
            llm = list(self.convert_to_llm(working))
            endpoint = self.endpoint
            if self.api_key is not None:
                key = self.api_key()
                key = await key if inspect.isawaitable(key) else key
                endpoint = replace(endpoint, api_key=key)
            result = await run_agent_loop(
                endpoint,
                self.state.params,
                system=self.state.system_prompt or None,
                messages=llm,
                tools=self.state.tools,
                policy=self.policy,
                carried=self._loaded,
                hooks=self.hooks,
                approvals=self.approvals,
                approval_policy=self.approval_policy,
                on_event=lambda event: self._observe(event, events),
                cancel=cancel,
                session_id=self.session_id,
                new_messages=new_messages,
                steering=lambda: self._take(self._steering, self.steering_mode),
                follow_up=lambda: self._take(self._follow_ups, self.follow_up_mode),
                interrupt=(lambda: bool(self._steering)) if self.interrupt_mode == "immediate" else None,
                should_stop_after_turn=self.should_stop_after_turn,
                max_turns=self.max_turns,
                tool_choice=self.tool_choice,
                lifecycle=self.lifecycle,
            )
            self.last_result = result
            self._loaded = result.loaded
            return result.turn
        except RunError as error:
            if isinstance(error, RunCancelled) and error.messages:
                last = error.messages[-1]
                if isinstance(last, AssistantMessage) and (
                    not self.state.messages or self.state.messages[-1] is not last
                ):
                    self.state.messages.append(last)
            self.state.error = (
                f"the run took longer than run_timeout ({self.run_timeout}s)" if timed_out else str(error)
            )
            raise
        except SteadyloopError as error:
            self.state.error = str(error)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            events.put_nowait(None)
            await dispatcher
            self.state.is_streaming = False
            self.state.streaming_message = None
            self.state.pending_tool_calls.clear()
            self._cancel = None
            self._idle.set()

    def _observe(self, event: Event, events: asyncio.Queue[Event | None]) -> None:
        # State is updated as events happen, so a listener reading agent.state sees the run's present.
        state = self.state
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            state.streaming_message = AssistantMessage()
        elif isinstance(event, MessageUpdate) and state.streaming_message is not None:
            current = state.streaming_message
            if event.kind == "text":
                state.streaming_message = replace(current, content=current.content + event.delta)
            else:
                state.streaming_message = replace(current, reasoning=current.reasoning + event.delta)
        elif isinstance(event, MessageEnd) and isinstance(
            event.message, AssistantMessage | ToolResultMessage
        ):
            state.messages.append(event.message)
            if isinstance(event.message, AssistantMessage):
                state.streaming_message = None
        elif isinstance(event, ToolExecutionStart):
            state.pending_tool_calls.add(event.call_id)
        elif isinstance(event, ToolExecutionEnd):
            state.pending_tool_calls.discard(event.call_id)
        events.put_nowait(event)

    async def _dispatch(self, events: asyncio.Queue[Event | None]) -> None:
        while True:
            event = await events.get()
            if event is None:
                return
            for listener in list(self._listeners):
                try:
                    outcome = listener(event)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception:  # a listener's failure is its own; the run and other listeners go on
                    continue


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
