"""Keeping a run inside its window: integrity, pruning, compaction and folding, branches (public).

What a user needs is importable from here: the context keeper's policy and state (``ContextPolicy``,
``ContextState``), the ``StablePrefix``, pruning and compaction (``prune_tool_results``,
``plan_compaction``, ``compact_transcript``, ``Fold``), the checks a transcript must pass
(``check_transcript``), session branches (``collect_branch``, ``summarise_branch``), and the room a
reply and a tool's result are left in the window (``reply_room``, ``result_room``, ``cut_middle``). Token
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
from .room import cut_middle, reply_room, result_room

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
    "cut_middle",
    "memory_flush",
    "plan_compaction",
    "prepare_branch",
    "prune_tool_results",
    "reply_room",
    "request_index",
    "result_room",
    "run_compaction",
    "summarise_branch",
    "summariser",
]
