"""Keeping a run inside its window: integrity, pruning, compaction and folding, branches (public).

What a user needs is importable from here: the context keeper's policy and state (``ContextPolicy``,
``ContextState``), the ``StablePrefix``, pruning and compaction (``prune_tool_results``,
``plan_compaction``, ``compact_transcript``, ``Fold``), the checks a transcript must pass
(``check_transcript``), and session branches (``collect_branch``, ``summarise_branch``). Token
arithmetic is ``steadyloop.sizing``.
"""

from .branches import (
    BRANCH_SUMMARY_LEAD,
    BranchFiles,
    BranchMove,
    BranchSummary,
    Entry,
    collect_branch,
    prepare_branch,
    summarise_branch,
)
from .compaction import SUMMARY_LEAD, CompactionPlan, Fold, apply_compaction, plan_compaction, request_index
from .folding import SUMMARY_PROMPT, compact_transcript, memory_flush, run_compaction, summariser
from .integrity import check_transcript
from .keeper import ContextPolicy, ContextState
from .prefix import StablePrefix
from .pruning import prune_tool_results

__all__ = [
    "BRANCH_SUMMARY_LEAD",
    "SUMMARY_LEAD",
    "SUMMARY_PROMPT",
    "BranchFiles",
    "BranchMove",
    "BranchSummary",
    "CompactionPlan",
    "ContextPolicy",
    "ContextState",
    "Entry",
    "Fold",
    "StablePrefix",
    "apply_compaction",
    "check_transcript",
    "collect_branch",
    "compact_transcript",
    "memory_flush",
    "plan_compaction",
    "prepare_branch",
    "prune_tool_results",
    "request_index",
    "run_compaction",
    "summarise_branch",
    "summariser",
]
