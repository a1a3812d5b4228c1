"""steadyloop: an agent runtime that behaves the same against every LLM endpoint, hosted or local.

Everything a user needs is importable from here (``import steadyloop as sl``). Optional parts live in
their own modules: ``steadyloop.tools.mcp`` (the ``mcp`` extra), ``steadyloop.testing`` (the ``testing``
extra), ``steadyloop.local`` (the bundled local model) and ``steadyloop.sessions``.
"""

from .agent import Agent, AgentBusy, AgentState
from .bus import configure_events, emit, end_run, fold, history, reset_events, watch
from .context.branches import collect_branch, prepare_branch, summarise_branch
from .context.calibration import calibrate, chars_per_token_for
from .context.compaction import (
    SUMMARY_LEAD,
    CompactionPlan,
    Fold,
    apply_compaction,
    plan_compaction,
    request_index,
)
from .context.folding import SUMMARY_PROMPT, compact_transcript, memory_flush, run_compaction, summariser
from .context.integrity import check_transcript
from .context.keeper import ContextPolicy
from .context.pruning import prune_tool_results
from .context.tokens import CHARS_PER_TOKEN, context_tokens, estimate_tokens, request_tokens
from .errors import (
    ContextOverflow,
    EndpointError,
    EndpointRefused,
    EndpointSilent,
    EndpointUnavailable,
    EndpointUnreadable,
    InvalidInput,
    RunCancelled,
    RunError,
    SteadyloopError,
    ToolArgumentsError,
    TranscriptError,
)
from .events import Event, event_from_json, event_to_json
from .hooks import (
    HOOK_CONTEXT_TOKENS,
    HookContext,
    HookOutcome,
    HookRunner,
    configure_hooks,
    gather,
    notify,
    turn_index,
    turn_messages,
    with_context,
)
from .loop import LifecycleHooks, LoopPolicy, LoopResult, run_agent_loop
from .messages import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    Turn,
    UserMessage,
    from_openai,
    message_from_json,
    message_to_json,
    messages_from_json,
    messages_to_json,
    text_of,
    to_openai,
)
from .metrics import RunMetrics, run_metrics
from .request_body import ModelParams, build_body, order_tools
from .reset import reset_all
from .tools.approvals import (
    ApprovalBroker,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRequest,
    InMemoryApprovalBroker,
)
from .tools.arguments import canonical_arguments, parse_tool_arguments
from .tools.definition import EffectClass, ResourceClaim, Tool, ToolContext, ToolResult, tool
from .tools.execution import BatchOutcome, HookDecision, ToolHooks, ToolPolicy, run_tool_calls
from .tools.loading import CatalogEntry, ToolLoader, catalog_of, preselect, preselect_by_keywords
from .tools.loop_detection import LoopDetectorConfig, ToolLoopDetector
from .tools.recovery import RecoveredCalls, recover_tool_calls
from .tools.schema_compat import is_grammar_error, relax_tools, sanitize_tools
from .turn.assembly import Produced, StreamAssembler
from .turn.capabilities import (
    EFFORT_LADDER,
    capabilities_for,
    effort_for,
    expire_capabilities,
    export_capabilities,
    import_capabilities,
    model_capabilities_for,
    reset_capabilities,
)
from .turn.continuation import continue_turn
from .turn.fences import ALL_FENCES, DEFAULT_FENCES, Fence, FenceSplitter, Split, strip_thinking
from .turn.negotiate import negotiate
from .turn.run import RetryPolicy, run_turn
from .turn.side_tasks import ask, ask_json
from .turn.stream import stream_turn
from .untrusted import UNTRUSTED_PREFACE, untrusted
from .usage import Usage
from .wire.clients import aclose_clients, configure_clients, get_client
from .wire.endpoints import NO_KEY, Endpoint, endpoint_id, endpoint_key
from .wire.failures import Failure, classify_failure
from .wire.windows import context_limit_for, list_models

__version__ = "0.1.0"

__all__ = [
    "ALL_FENCES",
    "CHARS_PER_TOKEN",
    "DEFAULT_FENCES",
    "EFFORT_LADDER",
    "HOOK_CONTEXT_TOKENS",
    "NO_KEY",
    "SUMMARY_LEAD",
    "SUMMARY_PROMPT",
    "UNTRUSTED_PREFACE",
    "Agent",
    "AgentBusy",
    "AgentState",
    "ApprovalBroker",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRequest",
    "AssistantMessage",
    "BatchOutcome",
    "CatalogEntry",
    "CompactionPlan",
    "ContentPart",
    "ContextOverflow",
    "ContextPolicy",
    "EffectClass",
    "Endpoint",
    "EndpointError",
    "EndpointRefused",
    "EndpointSilent",
    "EndpointUnavailable",
    "EndpointUnreadable",
    "Event",
    "Failure",
    "Fence",
    "FenceSplitter",
    "Fold",
    "HookContext",
    "HookDecision",
    "HookOutcome",
    "HookRunner",
    "ImagePart",
    "InMemoryApprovalBroker",
    "InvalidInput",
    "LifecycleHooks",
    "LoopDetectorConfig",
    "LoopPolicy",
    "LoopResult",
    "Message",
    "ModelParams",
    "Produced",
    "RecoveredCalls",
    "ResourceClaim",
    "RetryPolicy",
    "RunCancelled",
    "RunError",
    "RunMetrics",
    "Split",
    "SteadyloopError",
    "StreamAssembler",
    "SystemMessage",
    "TextPart",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolContext",
    "ToolHooks",
    "ToolLoader",
    "ToolLoopDetector",
    "ToolPolicy",
    "ToolResult",
    "ToolResultMessage",
    "TranscriptError",
    "Turn",
    "Usage",
    "UserMessage",
    "__version__",
    "aclose_clients",
    "apply_compaction",
    "ask",
    "ask_json",
    "build_body",
    "calibrate",
    "canonical_arguments",
    "capabilities_for",
    "catalog_of",
    "chars_per_token_for",
    "check_transcript",
    "classify_failure",
    "collect_branch",
    "compact_transcript",
    "configure_clients",
    "configure_events",
    "configure_hooks",
    "context_limit_for",
    "context_tokens",
    "continue_turn",
    "effort_for",
    "emit",
    "end_run",
    "endpoint_id",
    "endpoint_key",
    "estimate_tokens",
    "event_from_json",
    "event_to_json",
    "expire_capabilities",
    "export_capabilities",
    "fold",
    "from_openai",
    "gather",
    "get_client",
    "history",
    "import_capabilities",
    "is_grammar_error",
    "list_models",
    "memory_flush",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "model_capabilities_for",
    "negotiate",
    "notify",
    "order_tools",
    "parse_tool_arguments",
    "plan_compaction",
    "prepare_branch",
    "preselect",
    "preselect_by_keywords",
    "prune_tool_results",
    "recover_tool_calls",
    "relax_tools",
    "request_index",
    "request_tokens",
    "reset_all",
    "reset_capabilities",
    "reset_events",
    "run_agent_loop",
    "run_compaction",
    "run_metrics",
    "run_tool_calls",
    "run_turn",
    "sanitize_tools",
    "stream_turn",
    "strip_thinking",
    "summarise_branch",
    "summariser",
    "text_of",
    "to_openai",
    "tool",
    "turn_index",
    "turn_messages",
    "untrusted",
    "watch",
    "with_context",
]
