"""What a run is, as one value: ``RunConfig``.

The endpoint, the model parameters, the tools, the policy, the host's hooks and its queues: everything that
says what a run does, as opposed to the transcript it runs over and the listener that watches it. The
``Agent``, the CLI and the server each build one; ``run_agent_loop`` builds one from its keywords.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..context.keeper import ContextPolicy, ContextState
from ..context.prefix import StablePrefix
from ..errors import InvalidInput
from ..hooks import HookContext, HookRunner
from ..messages import Message, Turn
from ..request_body import ModelParams
from ..steering.routing import ToolRouting
from ..tools.approvals import ApprovalBroker, ApprovalPolicy
from ..tools.batch import HookDecision, ToolHooks, ToolPolicy
from ..tools.definition import Tool
from ..tools.loading import CatalogEntry
from ..tools.loop_detection import LoopDetectorConfig
from ..tools.recorder import StepRecorder
from ..turn.fences import DEFAULT_FENCES, Fence
from ..turn.harmony import HarmonyLeakCallback
from ..turn.request import RetryPolicy
from ..wire.endpoints import ApiKeyResolver, Endpoint
from ..wire.interceptors import Interceptors, wire_only

__all__ = [
    "ApiKey",
    "BeforeLlmCall",
    "BeforeStep",
    "ConvertToLlm",
    "HeadSource",
    "LifecycleHooks",
    "LoopPolicy",
    "MessageSource",
    "ModelCall",
    "RunConfig",
    "RunHooks",
    "RunQueues",
    "StopAfterTurn",
    "ToolChoiceFn",
    "TransformContext",
]

BeforeStep: TypeAlias = Callable[[list[Message], int], Awaitable[Sequence[Message] | None]]
MessageSource: TypeAlias = Callable[[], Sequence[Message]]
ToolChoiceFn: TypeAlias = Callable[[Sequence[Message]], "str | Mapping[str, Any] | None"]
StopAfterTurn: TypeAlias = Callable[[Turn, list[Message]], "bool | Awaitable[bool]"]
TransformContext: TypeAlias = Callable[[list[Any]], Awaitable[Sequence[Any]]]
ConvertToLlm: TypeAlias = Callable[[Sequence[Any]], "Sequence[Message] | Awaitable[Sequence[Message]]"]
ApiKey: TypeAlias = ApiKeyResolver
#: The system prompt and the tools in force now, as a host holds them (``RunConfig.head``).
HeadSource: TypeAlias = Callable[[], tuple[str | None, Sequence[Tool]]]


@dataclass(frozen=True, slots=True)
class LoopPolicy:
    """How a run behaves between requests.

    Attributes:
        max_tool_iterations: steps that may end in tool calls; when the model wants to go on after that
            many, the run stops with ``RunLimitReached`` (``limit == "max_tool_iterations"``).
        max_turns: requests the run may make; when the model wants another past it, the run stops with
            ``RunLimitReached`` (``limit == "max_turns"``). Both budgets are checked at the same point, when
            the run would send another request, so a step that answers without a tool call ends the run
            normally even at the limit. ``None``: no cap beyond ``max_tool_iterations``.
        tools: parallelism, dedupe and timeouts for each step's calls.
        max_continuations: extra requests to carry on an answer cut at the token ceiling.
        tool_discovery: ``"all"`` declares every tool; ``"ondemand"`` declares ``load_tools`` and a catalogue.
        recover_tool_calls: read calls a model wrote as text when the server did not parse them.
        tool_order: declare tools by name (``True``), in the caller's order (``False``), or by a key.
        retry: retries and the loading wait for each request.
        context_limit: the window; a request that cannot fit is refused before sending.
        loop_detection: thresholds for repeated calls; ``None`` turns detection off.
        fences: thinking fences taken out of the answer.
        start_in_reasoning: the chat template opens a thinking block in the prompt.
        context: keep the run inside its window by pruning and folding (``None``: off). The window is
            ``context_limit``, or what the endpoint says it serves.
        on_harmony_leak: told when gpt-oss channel markers reach an answer (they are taken out of it and
            a ``Notice`` says so either way); may be async.
        tool_routing: ask each step that declares tools as a decision the server holds the model to (one
            tool's call, or an answer), for small models that choose badly (``steadyloop.steering``);
            latched off per (endpoint, model) where the server does not hold it. An answer written from
            tool results is then asked at temperature 0 and held to them before it is shown (entries of a
            listing left out, paths no result holds: asked again once). ``True`` routes with the generic
            worked examples; a ``ToolRouting`` carries a host's own (its tools' names in them).
        tool_gate: with ``tool_routing``, ask each routed step "tool or answer?" first, as a short question
            of its own at temperature 0 (``steering/tool_gate.py``); latched off per (endpoint, model) where
            the reply holds no choice.
        output_retries: when ``params.response_format`` asks for a schema, how many times a final answer
            that does not meet it is sent back with the problem before the run stops (``OutputInvalid``).
        run_timeout: seconds the whole run may take; past it the run is cancelled (``RunTimedOut``).
    """

    max_tool_iterations: int = 25
    max_turns: int | None = None
    tools: ToolPolicy = field(default_factory=ToolPolicy)
    max_continuations: int = 0
    tool_discovery: Literal["all", "ondemand"] = "all"
    recover_tool_calls: bool = True
    tool_order: bool | Callable[[Tool], Any] = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    context_limit: int | None = None
    loop_detection: LoopDetectorConfig | None = field(default_factory=LoopDetectorConfig)
    fences: Sequence[Fence] = DEFAULT_FENCES
    start_in_reasoning: bool = False
    context: ContextPolicy | None = None
    on_harmony_leak: HarmonyLeakCallback | None = None
    tool_routing: bool | ToolRouting = False
    tool_gate: bool = True
    output_retries: int = 2
    run_timeout: float | None = None

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns <= 0:
            raise InvalidInput(f"max_turns must be a positive number of requests, got {self.max_turns}")
        if self.max_tool_iterations <= 0:
            raise InvalidInput(f"max_tool_iterations must be positive, got {self.max_tool_iterations}")
        if self.output_retries < 0:
            raise InvalidInput(f"output_retries must be >= 0, got {self.output_retries}")
        if self.run_timeout is not None and not self.run_timeout > 0:
            raise InvalidInput(f"run_timeout must be a positive number of seconds, got {self.run_timeout}")


@dataclass(frozen=True, slots=True)
class LifecycleHooks:
    """The host's lifecycle hooks for one run.

    ``session_start`` (on a conversation's first question) and ``before_turn`` are gathered once, before
    the first request, and their blocks ride on this run's question in every request it sends, never in the
    system prompt and never in the transcript that comes back. ``after_turn`` is told the reply when the
    run completes, without the run waiting on it.

    Attributes:
        run: the host's runner.
        context: what the hooks are told (session, host, extra); the prompt and turn index are filled in.
        max_tokens: this run's shared budget for the blocks (default: ``configure_hooks``).
        preface: said above the blocks (default: ``configure_hooks``).
    """

    run: HookRunner
    context: HookContext = field(default_factory=HookContext)
    max_tokens: int | None = None
    preface: str | None = None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """What a ``before_llm_call`` hook is shown: the request about to be sent.

    Attributes:
        step: the step the request belongs to.
        model: the model it names.
        messages: the messages it sends after the system prompt (fold, stubs and hook context applied).
    """

    step: int
    model: str
    messages: tuple[Message, ...]


BeforeLlmCall: TypeAlias = Callable[[ModelCall], "HookDecision | Awaitable[HookDecision | None] | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunHooks:
    """The host's code the loop calls at fixed points of a run.

    Attributes:
        tools: around each tool call (before, after, an arguments transform).
        lifecycle: gathered onto the question before the first request, told the reply at the end.
        before_step: may return a replacement transcript before each step (it is kept).
        before_llm_call: told each request before it is sent (once per step, not per retry); a
            ``HookDecision.block`` ends the run with ``ModelCallDenied`` and a ``HookDenied`` event.
        should_stop_after_turn: asked after each completed step (sync or async); ``True`` ends the run.
        tool_choice: decides ``tool_choice`` per request from the messages about to be sent.
        transform_context: rewrites the transcript before every request (pruning, injected context); what
            it returns is sent, the transcript itself is left alone.
        convert_to_llm: turns what ``transform_context`` returned (which may hold a host's own message
            types) into the messages a model reads, once per request (default: keep the steadyloop
            messages).
        recorder: runs each model request and each tool execution, and may give back what an earlier
            run of them returned (a durable host; see ``StepRecorder``).
    """

    tools: ToolHooks | None = None
    lifecycle: LifecycleHooks | None = None
    before_step: BeforeStep | None = None
    before_llm_call: BeforeLlmCall | None = None
    should_stop_after_turn: StopAfterTurn | None = None
    tool_choice: ToolChoiceFn | None = None
    transform_context: TransformContext | None = None
    convert_to_llm: ConvertToLlm | None = None
    recorder: StepRecorder | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQueues:
    """Where a run takes messages the host queued while it ran.

    Attributes:
        steering: polled after each step; messages it returns are added before the next request.
        follow_up: polled when the model stops; messages it returns start another round.
        interrupt: true when steering is waiting: calls not yet started are skipped.
    """

    steering: MessageSource | None = None
    follow_up: MessageSource | None = None
    interrupt: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """What a run is: where it sends, what it asks, what it may call, how it behaves, whom it tells.

    Attributes:
        endpoint: where requests go.
        params: the model and what to ask of it.
        system: the system prompt (on-demand mode appends the catalogue, the same text every step).
        tools: every tool the run may reach.
        policy: how the run behaves between requests.
        hooks: the host's code at fixed points.
        queues: steering and follow-up messages.
        approvals: where gated calls wait for a decision.
        approval_policy: which effect classes and tools are gated.
        catalog: the name-only catalogue for on-demand loading (default: built from ``tools``).
        preselected: tools a preselection chose for the first step.
        carried: tools loaded in earlier turns of the conversation.
        api_key: called before every request for the key to send (short-lived tokens outlive no run).
        session_id: sent as ``prompt_cache_key`` where the endpoint takes it.
        context: the fold and pruning to build on and update; a host that keeps it across runs (the Agent
            does) keeps its fold. ``None``: a fresh one for this run, returned on the result.
        prefix: holds the system prompt and tool block still, changed only by a told invalidation, and the
            messages append-only across the runs of a conversation (the Agent keeps one); ``None``: each run
            sends what it is given.
        head: where the system prompt and tools in force are read, before each request and before each
            call runs (the Agent reads its state): a change takes effect there, and a call to a tool no
            longer in force is answered as an unknown tool and never runs. ``None``: ``system`` and
            ``tools`` for the whole run.
        interceptors: the host's code at the edges of every request the run makes (its steps, their
            retries and continuations, and its side tasks) and before listeners hear each streamed
            assistant event; see ``Interceptors``.
    """

    endpoint: Endpoint
    params: ModelParams
    system: str | None = None
    tools: Sequence[Tool] = ()
    policy: LoopPolicy = field(default_factory=LoopPolicy)
    hooks: RunHooks = field(default_factory=RunHooks)
    queues: RunQueues = field(default_factory=RunQueues)
    approvals: ApprovalBroker | None = None
    approval_policy: ApprovalPolicy | None = None
    catalog: Sequence[CatalogEntry] | None = None
    preselected: Sequence[str] | None = None
    carried: Sequence[str] = ()
    api_key: ApiKey | None = None
    session_id: str | None = None
    context: ContextState | None = None
    prefix: StablePrefix | None = None
    interceptors: Interceptors | None = None
    head: HeadSource | None = None

    @property
    def wire_interceptors(self) -> Interceptors | None:
        """The interceptors a request is sent with: the assistant-event one is the run's own to apply,
        to its events, so it is left out here."""
        return wire_only(self.interceptors)
