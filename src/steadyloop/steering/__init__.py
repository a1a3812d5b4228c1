"""Small-model steering above the turn: tool routing, the tool gate, answers held to tool results (public).

Opt-in through ``LoopPolicy.tool_routing`` (``True``, or a ``ToolRouting`` carrying a host's own worked
examples): a step that declares tools is asked as a decision the server holds the model to
(``routing.py``, ``decision.py``), the tool gate asking first whether the request needs a tool at all
(``tool_gate.py``, its examples as data in ``examples.py``), and an answer written from tool results is
held to them before it is shown (``answers.py``, ``grounding.py``). What was measured on which model, and
why each piece is there, is in ``docs/steering.md``.
"""

from .answers import ANSWER_HELD, grounded_answer
from .decision import (
    ANSWER,
    ANSWER_GRAMMAR,
    MAX_CALLS,
    Decision,
    decision_body,
    decision_schema,
    gate_body,
    read_decision,
    which_tool_body,
)
from .examples import (
    ALREADY_SAID,
    FIRST_EXAMPLES,
    FOLLOW_UP_EXAMPLES,
    GENERIC_EXAMPLES,
    KINDS,
    GateChoice,
    GateExamples,
)
from .grounding import AnswerGaps, answer_gaps, correction
from .listed_items import listed_calls
from .numbered_calls import without_numbered_calls
from .routing import RoutedTurn, ToolRouting, plain_turn, routed_turn
from .tool_gate import (
    GATE_SCHEMA,
    KIND_SCHEMA,
    PathArgument,
    gate_messages,
    gate_schema,
    read_gate,
    tools_on_named_paths,
)
from .unasked import without_unasked
from .which_tool import (
    GENERIC_WHICH_TOOL_EXAMPLES,
    NONE,
    WhichTool,
    WhichToolExample,
    described_tool,
    named_tool,
    read_which_tool,
    which_tool_messages,
    which_tool_schema,
)

__all__ = [
    "ALREADY_SAID",
    "ANSWER",
    "ANSWER_GRAMMAR",
    "ANSWER_HELD",
    "FIRST_EXAMPLES",
    "FOLLOW_UP_EXAMPLES",
    "GATE_SCHEMA",
    "GENERIC_EXAMPLES",
    "GENERIC_WHICH_TOOL_EXAMPLES",
    "KINDS",
    "KIND_SCHEMA",
    "MAX_CALLS",
    "NONE",
    "AnswerGaps",
    "Decision",
    "GateChoice",
    "GateExamples",
    "PathArgument",
    "RoutedTurn",
    "ToolRouting",
    "WhichTool",
    "WhichToolExample",
    "answer_gaps",
    "correction",
    "decision_body",
    "decision_schema",
    "described_tool",
    "gate_body",
    "gate_messages",
    "gate_schema",
    "grounded_answer",
    "listed_calls",
    "named_tool",
    "plain_turn",
    "read_decision",
    "read_gate",
    "read_which_tool",
    "routed_turn",
    "tools_on_named_paths",
    "which_tool_body",
    "which_tool_messages",
    "which_tool_schema",
    "without_numbered_calls",
    "without_unasked",
]
