"""Tools: definitions, scheduling and execution, approvals, on-demand loading, text-call recovery (public).

What a user needs is importable from here: ``Tool`` and ``tool``, what a call runs with and returns
(``ToolContext``, ``ToolResult``), its effects and claims (``EffectClass``, ``ResourceClaim``), how a
step's calls run (``ToolPolicy``, ``ToolHooks``, ``run_tool_calls``), approvals, on-demand loading,
loop detection, and reading calls a model wrote as text (``recover_tool_calls``, ``CallHoldback``).
MCP servers' tools are ``steadyloop.tools.mcp`` (the ``mcp`` extra).
"""

from .approvals import (
    ApprovalBroker,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalRequest,
    InMemoryApprovalBroker,
)
from .definition import EFFECT_CLASSES, EffectClass, ResourceClaim, Tool, ToolContext, ToolResult, tool
from .execution import BatchOutcome, HookDecision, ToolHooks, ToolPolicy, run_tool_calls
from .holdback import CallHoldback
from .loading import CatalogEntry, ToolLoader, catalog_of, preselect, preselect_by_keywords
from .loop_detection import LoopDetectorConfig, ToolLoopDetector
from .recorder import StepRecorder
from .recovery import RecoveredCalls, recover_tool_calls

__all__ = [
    "EFFECT_CLASSES",
    "ApprovalBroker",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRequest",
    "BatchOutcome",
    "CallHoldback",
    "CatalogEntry",
    "EffectClass",
    "HookDecision",
    "InMemoryApprovalBroker",
    "LoopDetectorConfig",
    "RecoveredCalls",
    "ResourceClaim",
    "StepRecorder",
    "Tool",
    "ToolContext",
    "ToolHooks",
    "ToolLoader",
    "ToolLoopDetector",
    "ToolPolicy",
    "ToolResult",
    "catalog_of",
    "preselect",
    "preselect_by_keywords",
    "recover_tool_calls",
    "run_tool_calls",
    "tool",
]
