"""The event vocabulary: one small frozen type per thing that happens in a run (public).

Names (the ``type`` strings) are permanent API: hosts store them, route on them and replay them.

The contract a host can build on, held on every path a run can take (an answer, an error mid-stream, an
abort, a timeout, a hook's denial, a budget, a detected loop):

- Every run starts with one ``AgentStart`` and ends with exactly one ``AgentEnd``. Only a
  ``LateSettlement`` (a tool that finished after its call was closed) may come after it.
- ``seq`` numbers a run's events from 1, one more each, in the order they are delivered (the loop stamps
  it; the bus, ``steadyloop.bus.emit``, numbers the same way). An event not yet emitted has ``seq == 0``.
- Every ``TurnStart`` is closed by a ``TurnEnd`` before the next one or the ``AgentEnd``.
- Every ``MessageStart`` is closed by a ``MessageEnd`` carrying the message exactly as it entered the
  transcript. An assistant message opens with its first streamed piece, so a request that failed before
  showing anything opens none; one cut off after showing something (an abort, a stream that broke) is
  kept as far as it was shown and closed with that. Collecting ``MessageEnd.message`` gives the run's
  transcript, message for message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError

from .errors import InvalidInput
from .messages import AssistantMessage, Disposition, Message, ToolResultMessage, refuse_non_finite
from .usage import Usage

__all__ = [
    "AgentEnd",
    "AgentStart",
    "ApprovalDecided",
    "ApprovalRequired",
    "ContextCompacted",
    "ContextPruned",
    "Disposition",
    "Downgrade",
    "Event",
    "Failover",
    "HookDenied",
    "LateSettlement",
    "LoopDetected",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Notice",
    "Outcome",
    "PrefixRewritten",
    "QueuedMessage",
    "RequestSent",
    "Retry",
    "SideTask",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
    "UsageReport",
    "event_from_json",
    "event_to_json",
]

Outcome: TypeAlias = Literal[
    "completed",
    "error",
    "cancelled",
    "timeout",
    "max_iterations",
    "max_turns",
    "loop_detected",
    "hook_denied",
    "invalid_output",
    "stopped",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStart:
    """A run began.

    Attributes:
        at: when, in seconds since the epoch (the wall clock of the process running it).
    """

    at: float | None = None
    run_id: str = ""
    seq: int = 0
    type: Literal["agent_start"] = "agent_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedMessage:
    """A message an ``Agent``'s steering or follow-up queue held during a run, and what became of it.

    Attributes:
        queue: ``"steering"`` or ``"follow_up"``.
        message: the message as it was queued.
        fate: ``"delivered"``: it entered the run's transcript; ``"dropped"``: the run ended before
            taking it in (an abort, an error, a stop), and it is not carried into any later run.
    """

    queue: Literal["steering", "follow_up"]
    message: Message
    fate: Literal["delivered", "dropped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEnd:
    """A run ended; no event of this run follows.

    Attributes:
        outcome: how it ended.
        error: the error's text when it did not complete.
        usage: tokens the whole run spent.
        steps: requests made.
        queued: what the agent's queues held during the run and what became of each message: those
            delivered in the order the run took them in, then those dropped. The queues are empty after
            it. Only an ``Agent`` fills it (the bare loop's queues are the host's own).
        at: when it ended, in seconds since the epoch.
        error_type: the class of the error that stopped it, by its canonical name
            (``steadyloop.errors.RunEndpointUnavailable``); ``None`` when no error did.
        error_code: the code the endpoint answered with (its HTTP status), when a failed request stopped
            the run and the endpoint answered one.
    """

    outcome: Outcome
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    queued: tuple[QueuedMessage, ...] = ()
    at: float | None = None
    error_type: str | None = None
    error_code: str | None = None
    run_id: str = ""
    seq: int = 0
    type: Literal["agent_end"] = "agent_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStart:
    """A step began: one request, then the calls it asked for.

    Attributes:
        at: when, in seconds since the epoch: with the step's timings (the request's ``wall_ms`` and
            ``first_token_ms`` in its ``UsageReport``, each call's ``duration_ms``) it places the step in time.
    """

    step: int
    at: float | None = None
    run_id: str = ""
    seq: int = 0
    type: Literal["turn_start"] = "turn_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnd:
    """A step ended, with the assistant's message and the results of its calls (in call order).

    Attributes:
        message: the step's assistant message; ``None`` when the step ended before one was made (the
            request failed before showing anything, or a hook refused it).
        error: why the step ended early, when it did.
        error_type: the class of the error that ended it early, by its canonical name, when one did.
        error_code: the code the endpoint answered the step's failed request with (its HTTP status).
    """

    step: int
    message: AssistantMessage | None = None
    tool_results: tuple[ToolResultMessage, ...] = ()
    finish_reason: str = ""
    error: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    run_id: str = ""
    seq: int = 0
    type: Literal["turn_end"] = "turn_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageStart:
    """A message entered the transcript (user, assistant as it starts streaming, tool result)."""

    message: Message
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["message_start"] = "message_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageUpdate:
    """A piece of the assistant's message as it streams.

    Attributes:
        kind: ``"text"`` for answer, ``"thinking"`` for the scratchpad.
        delta: the new piece.
    """

    kind: Literal["text", "thinking"]
    delta: str
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["message_update"] = "message_update"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageEnd:
    """A message is complete."""

    message: Message
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["message_end"] = "message_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionStart:
    """A tool call was dispatched (after hooks and approvals allowed it).

    Attributes:
        description: the tool's description, as the model was given it.
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    effect: str | None = None
    description: str = ""
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["tool_execution_start"] = "tool_execution_start"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionUpdate:
    """A running tool reported progress."""

    call_id: str
    name: str
    text: str
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["tool_execution_update"] = "tool_execution_update"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolExecutionEnd:
    """A call has its terminal result. These come in completion order; the transcript keeps call order.

    Attributes:
        error_type: when the tool raised, the class of what it raised, by its canonical name.
    """

    call_id: str
    name: str
    result: ToolResultMessage
    disposition: Disposition
    duration_ms: float | None = None
    effect: str | None = None
    error_type: str | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["tool_execution_end"] = "tool_execution_end"


@dataclass(frozen=True, slots=True, kw_only=True)
class LateSettlement:
    """A tool finished after its call was already closed (timeout or abort); for audit only.

    The transcript is not changed: the model already read the terminal result.
    """

    call_id: str
    name: str
    outcome: Literal["completed", "failed"]
    text: str = ""
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["tool_execution_late_settlement"] = "tool_execution_late_settlement"


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """Something a person watching should know: a downgrade, a recovery, a gap in a watcher's backlog.

    Attributes:
        text: the notice, in words.
        name: what it is about (a hook, ``"gap"``, ``"recovery"``, ...), when there is a name.
        after_seq: for a gap, the seq just before the event that follows it.
    """

    text: str
    name: str | None = None
    after_seq: int | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageReport:
    """What one request cost, with the run's totals so far; ends every step whether or not tokens came.

    Attributes:
        turn: this request's usage.
        totals: the run's usage so far.
        finish_reason: the request's finish reason.
        tools_declared: how many tools the request declared.
        tool_schema_tokens: estimated tokens of the declared tool block.
        cache_expected: from the second request: tokens the previous prompt and reply should leave cached.
        cache_broken: where a cached count was reported: a hit short of 90% of the previous prompt.
        cache_break_reason: ``tools-changed``, ``system-changed``, ``history-rewritten`` or ``none-known``.
        response_id: the id the endpoint gave its reply, when it gave one.
        response_model: the model the endpoint says answered, when it said (it may name a dated version
            of the model asked for).
    """

    turn: Usage
    totals: Usage
    finish_reason: str = ""
    tools_declared: int = 0
    tool_schema_tokens: int = 0
    cache_expected: int | None = None
    cache_broken: bool | None = None
    cache_break_reason: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSent:
    """A request went out on a connection to its endpoint: from here the model is reading the prompt.

    Before it nothing was connected: a port where nothing listens, a host that does not resolve or a
    certificate not trusted fail without one. Told once per attempt (a retry's, a fallback's and a side
    task's too), as soon as the transport has sent the request's headers; over a transport that cannot
    tell (a caller's own provider), when the endpoint's answer began.

    Attributes:
        endpoint: the base URL (credentials written ``***``).
        model: the model asked for, ``""`` when the request named none.
    """

    endpoint: str
    model: str = ""
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["request_sent"] = "request_sent"


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """A request is being sent again after a failure that produced nothing."""

    attempt: int
    delay_s: float
    reason: str
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failover:
    """A turn was handed to the next endpoint of a failover chain: the one before failed before it
    produced anything, so nothing of its answer is kept.

    Attributes:
        from_endpoint: the base URL that failed (credentials written ``***``).
        from_model: the model asked for there.
        to_endpoint: the base URL the turn goes to now.
        to_model: the model asked for there.
        cause: the failure, in the endpoint's words.
        kind: what the failure was (``auth``, ``rate_limited``, ``not_found``, ``transient``,
            ``model_loading``, ``silent``, ``network``, ...).
        status: the HTTP status, when there was one.
    """

    from_endpoint: str
    from_model: str
    to_endpoint: str
    to_model: str
    cause: str
    kind: str = ""
    status: int | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["failover"] = "failover"


@dataclass(frozen=True, slots=True, kw_only=True)
class Downgrade:
    """A request field was dropped or changed because the endpoint refused it."""

    field: str
    reason: str
    value: str | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["downgrade"] = "downgrade"


@dataclass(frozen=True, slots=True, kw_only=True)
class SideTask:
    """A one-shot call that supports a run (a fold's summary, a preselection) finished, answered or not.

    Attributes:
        kind: what it was for: ``summary``, ``branch_summary``, ``preselection``, or ``ask`` / ``ask_json``
            when the caller did not say.
        model: the model asked.
        usage: what it cost; ``wall_ms`` is how long it took, retries included.
        finish_reason: the request's finish reason (``""`` when it failed).
        error: why no answer came back, when none did.
        error_type: the class of the error that failed it, by its canonical name, when one did.
        error_code: the code the endpoint answered the failed request with (its HTTP status).
        response_id: the id the endpoint gave its reply, when it gave one.
        response_model: the model the endpoint says answered, when it said.
    """

    kind: str
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""
    error: str | None = None
    error_type: str | None = None
    error_code: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["side_task"] = "side_task"


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopDetected:
    """The model kept repeating itself with tools; the run stops."""

    kind: str
    tool: str
    text: str = ""
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["loop_detected"] = "loop_detected"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequired:
    """A gated tool call waits for a decision."""

    approval_id: str
    call_id: str
    name: str
    arguments: dict[str, Any]
    effect: str | None = None
    expires_at: float | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["approval_required"] = "approval_required"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided:
    """A gated call was allowed or denied (``reason`` says why: ``timeout``, ``aborted``, ...)."""

    approval_id: str
    call_id: str
    decision: Literal["allow", "deny"]
    reason: str = ""
    decided_by: str = ""
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["approval_decided"] = "approval_decided"


@dataclass(frozen=True, slots=True, kw_only=True)
class HookDenied:
    """A hook refused a tool call or a model call."""

    hook: str
    reason: str
    call_id: str | None = None
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["hook_denied"] = "hook_denied"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPruned:
    """Old tool results were replaced by stubs to make room."""

    cleared: int
    chars: int
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["context_pruned"] = "context_pruned"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompacted:
    """The oldest stretch of the transcript was folded into a summary."""

    folded: int
    tokens_before: int
    tokens_after: int
    forced: bool = False
    summarised: bool = True
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["context_compacted"] = "context_compacted"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixRewritten:
    """A request about to be sent does not start with what the previous request sent: the message at
    ``index`` (counted after the system prompt) was rewritten in place, so the prompt cache is lost from
    there. Told before the request goes out; see ``StablePrefix``."""

    index: int
    role: str = ""
    step: int = 0
    run_id: str = ""
    seq: int = 0
    type: Literal["prefix_rewritten"] = "prefix_rewritten"


Event: TypeAlias = Annotated[
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | LateSettlement
    | Notice
    | UsageReport
    | RequestSent
    | Retry
    | Failover
    | Downgrade
    | SideTask
    | LoopDetected
    | ApprovalRequired
    | ApprovalDecided
    | HookDenied
    | ContextPruned
    | ContextCompacted
    | PrefixRewritten,
    Field(discriminator="type"),
]

_EVENT = TypeAdapter[Any](Event)


def event_to_json(event: Event) -> str:
    """The event as JSON text (``type`` discriminates)."""
    return _EVENT.dump_json(event).decode()


def event_from_json(text: str | bytes) -> Event:
    """An event back from ``event_to_json``'s output.

    Raises:
        InvalidInput: the text is not an event (or is one of a type this version does not know).
    """
    try:
        result: Event = _EVENT.validate_json(text)
    except ValidationError as exc:
        raise InvalidInput(f"not a steadyloop event: {exc}") from None
    refuse_non_finite(text, "event")
    return result
