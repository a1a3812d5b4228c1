"""One model call end to end: what it is, and the layers that send it reliably (public).

A call is one value, ``TurnRequest`` (where it goes, what it asks, how it is tried), and what it reports
goes to a ``TurnSink``; ``send_turn(request, sink)`` sends it through named layers, one module each:
the plan (``plan.py``), the size guard (``size_guard.py``), the retry loop (``retry.py``), the failover
chain (``failover.py``), negotiation (``negotiate.py``) and one attempt under the watchdog
(``attempt.py``, ``watchdog.py``). ``run_turn`` is the same call spelled with keywords. Also importable
from here: the stream assembly and fences (``StreamAssembler``, ``FenceSplitter``), the capability
latches, carrying on a cut-off answer (``continue_answer``, ``continue_turn``), and one-shot side tasks
(``ask``, ``ask_json``).
"""

from .assembly import Produced, StreamAssembler
from .attempt import Attempt, stream_attempt, stream_turn
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
from .continuation import continue_answer, continue_turn
from .fences import ALL_FENCES, DEFAULT_FENCES, Fence, FenceSplitter, Split, strip_thinking
from .harmony import HarmonyLeak, find_harmony_leak
from .negotiate import negotiate
from .request import BodyBuilder, RetryPolicy, TurnRequest, TurnSink
from .retry import backoff_delay
from .send import run_turn, send_turn
from .side_tasks import ask, ask_json
from .thinking_budgets import DEFAULT_THINKING_BUDGETS

__all__ = [
    "ALL_FENCES",
    "DEFAULT_FENCES",
    "DEFAULT_THINKING_BUDGETS",
    "EFFORT_LADDER",
    "Attempt",
    "BodyBuilder",
    "Fence",
    "FenceSplitter",
    "HarmonyLeak",
    "LatchPriors",
    "Produced",
    "RetryPolicy",
    "Split",
    "StreamAssembler",
    "TurnRequest",
    "TurnSink",
    "ask",
    "ask_json",
    "backoff_delay",
    "capabilities_for",
    "continue_answer",
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
    "send_turn",
    "stream_attempt",
    "stream_turn",
    "strip_thinking",
]
