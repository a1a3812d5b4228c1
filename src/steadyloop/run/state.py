"""One run's state and its events: ``RunState`` and ``RunEvents``.

Per-run state lives in slotted objects rather than closures: with a thousand runs in flight, every cell a
run holds is something the cyclic collector scans on each of its passes.

``RunEvents`` numbers the run's events (``seq``, from 1, one more each) and keeps the run's open message
and open turn, so whichever way a run ends, what it opened is closed (see ``steadyloop.events``). In a step
that declares tools it also holds back answer text that may be a tool call written as text
(``tools/holdback.py``) until the message is decided, so no listener is shown a call as answer text: text
deltas add up to the message's content, and a recovered call's text is never among them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any, TypeVar

from .._cancel import CANCELLED, unless_cancelled
from ..context.cache_watch import CacheWatch
from ..context.keeper import ContextKeeper, ContextState
from ..errors import InterceptorFailed, InvalidInput, SteadyloopError, error_code, error_type
from ..events import Event, MessageEnd, MessageStart, MessageUpdate, Notice, Outcome, TurnEnd, TurnStart
from ..hooks import ContextBlock
from ..messages import AssistantMessage, Message, SystemMessage, ToolResultMessage, Turn, UserMessage
from ..request_body import droppable_fields
from ..tools.definition import Tool
from ..tools.holdback import CallHoldback
from ..tools.loading import ToolLoader
from ..tools.loop_detection import ToolLoopDetector
from ..usage import Usage
from ..wire.interceptors import AssistantEventInterceptor, intercept_assistant_event
from .config import RunConfig

__all__ = [
    "CALL_HELD",
    "LLM_TYPES",
    "Cancelled",
    "RunEvents",
    "RunState",
    "ToolResolver",
    "cancellable",
    "check_start",
    "with_run",
]

#: The messages a model reads; anything else in a transcript is the host's own, for ``convert_to_llm``.
LLM_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)

#: The ``Notice`` (named ``"call_held"``) said once a step's answer text starts being held.
CALL_HELD = "the model may be writing a tool call as text: its text is shown once the reply is complete"

T = TypeVar("T")
E = TypeVar("E")


class Cancelled(Exception):
    """The run's cancel was set while it waited (a request, the host's listeners)."""


class ToolResolver(Mapping[str, Tool]):
    """The loop's tools as ``run_tool_calls`` sees them: the tools in force at each lookup (``follow`` brings
    them up to date first), through the on-demand loader, which loads a catalogued tool the model called
    without loading it first."""

    def __init__(self, loader: ToolLoader, follow: Callable[[], None] | None = None) -> None:
        self._loader = loader
        self._follow = follow

    def __getitem__(self, key: str) -> Tool:
        self._bring_up_to_date()
        found = self._loader.resolve(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        self._bring_up_to_date()
        return iter(sorted(self._loader.names()))

    def __len__(self) -> int:
        self._bring_up_to_date()
        return len(self._loader.names())

    def _bring_up_to_date(self) -> None:
        if self._follow is not None:
            self._follow()


_INIT_FIELDS: dict[type[Any], tuple[str, ...]] = {}


def with_run(event: Event, run_id: str, seq: int = 0) -> Event:
    """A copy of an event made elsewhere (a turn, a tool), stamped with the run it belongs to and its seq."""
    kind = type(event)
    names = _INIT_FIELDS.get(kind)
    if names is None:
        names = _INIT_FIELDS[kind] = tuple(
            f.name for f in fields(kind) if f.init and f.name not in ("run_id", "seq")
        )
    return kind(**{name: getattr(event, name) for name in names}, run_id=run_id, seq=seq)


class RunEvents:
    """A run's events: numbered, kept for its metrics, handed to the caller's callback.

    It also knows what the run has open: the assistant message being streamed (opened by its first piece,
    so a request that fails before showing anything opens none) and the current step.
    """

    __slots__ = (
        "events",
        "hold",
        "hold_calls",
        "intercept",
        "on_event",
        "opened",
        "partial",
        "reasoning",
        "run_id",
        "seq",
        "step",
        "turn_message",
        "turn_open",
        "turn_results",
    )

    def __init__(self, run_id: str, on_event: Callable[[Event], object] | None) -> None:
        self.run_id = run_id
        self.on_event = on_event
        self.events: list[Event] = []
        self.seq = 0
        self.step = 0
        self.opened = False  # an assistant message is open: MessageStart without its MessageEnd yet
        self.partial: list[str] = []  # the answer shown so far in this step
        # The step declares tools and reads calls written as text: its answer text is held while it may be
        # one (``hold``, made with the step's first text) and released as the message is closed.
        self.hold_calls = False
        self.hold: CallHoldback | None = None
        self.reasoning: list[str] = []  # the thinking shown so far in this step
        self.turn_open = False
        self.turn_message: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []
        # The host's on_assistant_event interceptor: it sees the assistant's events before anyone else.
        self.intercept: AssistantEventInterceptor | None = None

    def _deliver(self, event: Event) -> None:
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def emit(self, event: Event) -> None:
        """An event made elsewhere (a turn, a tool, the keeper), stamped with the run and the next seq."""
        self.seq += 1
        self._deliver(with_run(event, self.run_id, self.seq))

    def say(self, event_type: Callable[..., E], /, **values: Any) -> E:
        """Make one of the loop's own events already stamped (no copy), and emit it."""
        self.seq += 1
        event = event_type(**values, run_id=self.run_id, seq=self.seq)
        self._deliver(event)  # type: ignore[arg-type]
        return event

    # Made here, stamped at birth: these are most of a run's events, and copying a frozen event to add
    # the run costs more than the rest of its handling.
    def on_output(self, text: str) -> None:
        self._show_text(self._held(text) if self.hold_calls and text else text)

    def _show_text(self, text: str) -> None:
        if not text:
            return
        if not self.opened:
            self.open_message()
        self.partial.append(text)
        update = MessageUpdate(kind="text", delta=text, step=self.step, run_id=self.run_id, seq=self.seq + 1)
        if self.intercept is not None:
            self._intercepted(update)
            return
        self.seq += 1
        self._deliver(update)

    def _held(self, text: str) -> str:
        """What of the answer text can be shown now; the rest waits for the message to be decided."""
        hold = self.hold
        if hold is None:
            hold = self.hold = CallHoldback()
        was_holding = hold.holding
        shown = hold.feed(text)
        if hold.holding and not was_holding:
            # Said once, so a watcher knows the model is writing while nothing new is shown.
            self.say(Notice, text=CALL_HELD, name="call_held", step=self.step)
        return shown

    def _release_held(self, message: AssistantMessage) -> None:
        """Show what the hold kept back that is not a call: the rest of the decided message's content."""
        hold, self.hold = self.hold, None
        if hold is not None:
            self._show_text(hold.finish(message.content, called=bool(message.tool_calls)))

    def on_thinking(self, text: str) -> None:
        if not text:
            return
        if not self.opened:
            self.open_message()
        self.reasoning.append(text)
        update = MessageUpdate(
            kind="thinking", delta=text, step=self.step, run_id=self.run_id, seq=self.seq + 1
        )
        if self.intercept is not None:
            self._intercepted(update)
            return
        self.seq += 1
        self._deliver(update)

    def _intercepted(self, event: Event) -> None:
        """An assistant event shown to the host's interceptor first: delivered as it is, replaced (the
        replacement stamped with this run and seq), or not at all. The transcript keeps what streamed."""
        assert self.intercept is not None
        try:
            shown = intercept_assistant_event(self.intercept, event)
        except InterceptorFailed:
            self.intercept = None  # the run is ending: closing what it opened must not fail again
            raise
        if shown is None:
            return
        self.seq += 1
        self._deliver(shown if shown is event else with_run(shown, self.run_id, self.seq))

    # -- messages and turns -----------------------------------------------------------------------------

    def announce(self, message: Message) -> None:
        """A whole message entering the transcript at once (the user's, a tool result)."""
        self.say(MessageStart, message=message, step=self.step)
        self.say(MessageEnd, message=message, step=self.step)

    def open_message(self) -> None:
        self.opened = True
        self._assistant(
            MessageStart(message=AssistantMessage(), step=self.step, run_id=self.run_id, seq=self.seq + 1)
        )

    def close_message(self, message: AssistantMessage) -> None:
        """The step's assistant message as it entered the transcript."""
        self._release_held(message)
        if not self.opened:
            self.open_message()
        self.opened = False
        self.partial.clear()
        self.reasoning.clear()
        self.turn_message = message
        self._assistant(MessageEnd(message=message, step=self.step, run_id=self.run_id, seq=self.seq + 1))

    def _assistant(self, event: MessageStart | MessageEnd) -> None:
        """The start or end of the assistant's message (stamped with the next seq), shown to the
        interceptor, which may only look: it is delivered even when the interceptor failed, so what the
        transcript holds is still what listeners hear."""
        failure: InterceptorFailed | None = None
        if self.intercept is not None:
            try:
                intercept_assistant_event(self.intercept, event)
            except InterceptorFailed as exc:
                self.intercept = None  # the run is ending: closing what it opened must not fail again
                failure = exc
        self.seq += 1
        self._deliver(event)
        if failure is not None:
            raise failure

    def shown(self) -> AssistantMessage | None:
        """What a message cut off before it was decided leaves: what it showed and what was held (a
        call is made only from a whole reply, so held text is answer text now); ``None`` if nothing came."""
        held = self.hold.held if self.hold is not None else ""
        if not self.opened and not held:
            return None
        return AssistantMessage(content="".join(self.partial) + held, reasoning="".join(self.reasoning))

    def start_turn(self, step: int) -> None:
        self.step = step
        self.turn_open = True
        self.turn_message = None
        self.turn_results = []
        self.hold_calls = False
        self.hold = None
        self.say(TurnStart, step=step, at=time.time())

    def end_turn(
        self, finish_reason: str = "", error: str | None = None, cause: BaseException | None = None
    ) -> None:
        """Close the step; ``cause`` is the error that ended it early, when one did."""
        self.turn_open = False
        self.say(
            TurnEnd,
            step=self.step,
            message=self.turn_message,
            tool_results=tuple(self.turn_results),
            finish_reason=finish_reason,
            error=error,
            error_type=error_type(cause) if cause is not None else None,
            error_code=error_code(cause) if cause is not None else None,
        )


class RunState:
    """Everything one run holds while it goes: the transcript, the counts, the parts each phase uses."""

    __slots__ = (
        "_link",
        "announce",
        "barrier",
        "blocks",
        "cache",
        "cancel",
        "config",
        "context",
        "detector",
        "droppable",
        "error_text",
        "events",
        "head",
        "keeper",
        "last_turn",
        "limit",
        "loader",
        "outcome",
        "output",
        "output_retries",
        "question",
        "resolver",
        "steps",
        "stopped_by",
        "taken_ids",
        "timed_out",
        "timer",
        "tool_steps",
        "totals",
        "transcript",
    )

    def __init__(
        self,
        config: RunConfig,
        messages: Sequence[Message],
        events: RunEvents,
        *,
        cancel: asyncio.Event | None,
        new_messages: int,
        barrier: Callable[[], Awaitable[None]] | None,
    ) -> None:
        policy = config.policy
        self.config = config
        self.events = events
        if config.interceptors is not None:
            events.intercept = config.interceptors.on_assistant_event
        self.cancel = cancel
        self.barrier = barrier
        self.transcript: list[Message] = list(messages)
        self.announce: list[Message] = self.transcript[-new_messages:] if new_messages > 0 else []
        self.loader = ToolLoader(
            config.tools,
            config.catalog,
            ondemand=policy.tool_discovery == "ondemand",
            preselected=config.preselected,
            carried=config.carried,
        )
        self.detector = ToolLoopDetector(policy.loop_detection) if policy.loop_detection is not None else None
        self.cache = CacheWatch()
        self.totals = Usage()
        self.steps = 0
        self.tool_steps = 0
        self.last_turn = Turn()
        self.taken_ids = {
            c.id for m in self.transcript if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        self.droppable = droppable_fields(config.params)
        self.head: tuple[str | None, tuple[Tool, ...]] = (config.system or None, tuple(config.tools))
        self.resolver = ToolResolver(self.loader, self.follow_head if config.head is not None else None)
        self.context = config.context if config.context is not None else ContextState()
        self.keeper: ContextKeeper | None = None
        self.limit = policy.context_limit
        self.question: Message | None = None
        self.blocks: list[ContextBlock] = []
        self.outcome: Outcome = "error"
        self.error_text: str | None = None
        self.stopped_by: BaseException | None = None  # the error that stopped the run, for its AgentEnd
        self.output: Any = None
        self.output_retries = 0
        self.timed_out = False
        self.timer: asyncio.TimerHandle | None = None
        self._link: asyncio.Task[None] | None = None

    def follow_head(self) -> None:
        """Take the system prompt and tools in force now (``RunConfig.head``), if they changed since the
        run last looked: the next request declares them, and a call to a tool gone from them is unknown.

        With a prefix, a change is a new version of it, told as a ``Notice``.

        Raises:
            InvalidInput: the tools now in force cannot be loaded (two share a name).
        """
        source = self.config.head
        if source is None:
            return
        system, tools = source()
        system = system or None
        held_system, held_tools = self.head
        same_tools = len(tools) == len(held_tools) and all(
            now is was for now, was in zip(tools, held_tools, strict=True)
        )
        if system == held_system and same_tools:
            return
        taken = tuple(tools)
        self.loader.retool(taken)
        self.head = (system, taken)
        self.config = replace(self.config, system=system, tools=taken)
        prefix = self.config.prefix
        if prefix is not None:
            before = prefix.version
            snapshot = prefix.hold(system, taken)
            if snapshot.version != before:
                self.events.say(Notice, text=snapshot.told(), name="prefix", step=self.events.step)

    @property
    def stopping(self) -> bool:
        """The run's cancel is set."""
        return self.cancel is not None and self.cancel.is_set()

    def start_timer(self) -> None:
        """Arm the run's timeout, if it has one; the run then watches its own cancel, which the caller's
        (if any) also sets."""
        timeout = self.config.policy.run_timeout
        if timeout is None:
            return
        given, own = self.cancel, asyncio.Event()
        self.cancel = own
        if given is not None:
            if given.is_set():
                own.set()
            else:
                self._link = asyncio.ensure_future(_relay(given, own))
        self.timer = asyncio.get_running_loop().call_later(timeout, self._time_out)

    def _time_out(self) -> None:
        self.timed_out = True
        if self.cancel is not None:
            self.cancel.set()

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self._link is not None:
            self._link.cancel()
            self._link = None


async def _relay(given: asyncio.Event, own: asyncio.Event) -> None:
    await given.wait()
    own.set()


def check_start(messages: Sequence[Any], *, converted: bool = False) -> None:
    """Refuse a transcript a run cannot start from: empty, or already answered.

    The host's ``convert_to_llm`` is not called for this: it is called once per request, after
    ``transform_context``. Without one, the model reads the transcript's steadyloop messages, and those are
    checked; with one (``converted``), the transcript as it is, and a host message at its end is the
    hook's to turn into something to answer.

    Raises:
        InvalidInput: nothing to answer, the last message is the assistant's, or (without
            ``convert_to_llm``) a message is a plain mapping with a ``role``, as a chat message written
            in the wire's shape would be.
    """
    if not converted:
        for index, message in enumerate(messages):
            if isinstance(message, Mapping) and "role" in message:
                # A host's own messages stay out of the model's prompt by design; a chat message written
                # as a plain mapping looks like one and would be dropped without a word.
                raise InvalidInput(
                    f"message {index} is a plain mapping (role {str(message['role'])[:40]!r}), which the "
                    "model never reads: pass Message values (steadyloop.messages.from_openai converts "
                    "the chat-completions shape), or give hooks.convert_to_llm to turn host messages into them"
                )
    view = messages if converted else [m for m in messages if isinstance(m, LLM_TYPES)]
    if not view:
        raise InvalidInput("a run needs a transcript to answer: it is empty")
    if isinstance(view[-1], AssistantMessage):
        raise InvalidInput(
            "a run cannot start from a transcript that ends in an assistant message: add a user message "
            "or a tool result to answer"
        )


async def cancellable(work: Awaitable[T], cancel: asyncio.Event | None) -> T:
    """Await work, closing it at once when ``cancel`` is set (a request's HTTP response is closed with it).

    Raises:
        Cancelled: ``cancel`` was set first.
    """
    if cancel is None:
        return await work
    if cancel.is_set():
        if asyncio.iscoroutine(work):
            work.close()
        raise Cancelled
    result = await unless_cancelled(work, cancel, ignore=(SteadyloopError,))
    if result is CANCELLED:
        raise Cancelled
    return result
