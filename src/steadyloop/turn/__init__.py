"""One model call end to end: assembly, thinking fences, negotiation, retry, continuation (public).

The building blocks of a turn are importable from here: ``run_turn`` and its ``RetryPolicy``, the stream
assembly and fences (``StreamAssembler``, ``FenceSplitter``), the capability latches and negotiation,
carrying on a cut-off answer (``continue_turn``), and one-shot side tasks (``ask``, ``ask_json``).
"""

from .assembly import Produced, StreamAssembler
from .capabilities import (
    EFFORT_LADDER,
    LatchPriors,
    capabilities_for,
    effort_for,
    expire_capabilities,
    export_capabilities,
    import_capabilities,
    model_capabilities_for,
    reset_capabilities,
    seed_capabilities,
)
from .continuation import continue_turn
from .fences import ALL_FENCES, DEFAULT_FENCES, Fence, FenceSplitter, Split, strip_thinking
from .harmony import HarmonyLeak, find_harmony_leak
from .negotiate import negotiate
from .run import RetryPolicy, run_turn
from .side_tasks import ask, ask_json
from .stream import stream_turn
from .thinking_budgets import DEFAULT_THINKING_BUDGETS

__all__ = [
    "ALL_FENCES",
    "DEFAULT_FENCES",
    "DEFAULT_THINKING_BUDGETS",
    "EFFORT_LADDER",
    "Fence",
    "FenceSplitter",
    "HarmonyLeak",
    "LatchPriors",
    "Produced",
    "RetryPolicy",
    "Split",
    "StreamAssembler",
    "ask",
    "ask_json",
    "capabilities_for",
    "continue_turn",
    "effort_for",
    "expire_capabilities",
    "export_capabilities",
    "find_harmony_leak",
    "import_capabilities",
    "model_capabilities_for",
    "negotiate",
    "reset_capabilities",
    "run_turn",
    "seed_capabilities",
    "stream_turn",
    "strip_thinking",
]
