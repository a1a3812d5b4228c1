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
    Decision,
    decision_body,
    decision_schema,
    gate_body,
    read_decision,
)
from .examples import FIRST_EXAMPLES, GENERIC_EXAMPLES, KINDS, GateChoice, GateExamples
from .grounding import AnswerGaps, answer_gaps, correction
from .routing import RoutedTurn, ToolRouting, plain_turn, routed_turn
from .tool_gate import GATE_SCHEMA, KIND_SCHEMA, gate_messages, gate_schema, read_gate, tools_on_named_paths

__all__ = [
    "ANSWER",
    "ANSWER_GRAMMAR",
    "ANSWER_HELD",
    "FIRST_EXAMPLES",
    "GATE_SCHEMA",
    "GENERIC_EXAMPLES",
    "KINDS",
    "KIND_SCHEMA",
    "AnswerGaps",
    "Decision",
    "GateChoice",
    "GateExamples",
    "RoutedTurn",
    "ToolRouting",
    "answer_gaps",
    "correction",
    "decision_body",
    "decision_schema",
    "gate_body",
    "gate_messages",
    "gate_schema",
    "grounded_answer",
    "plain_turn",
    "read_decision",
    "read_gate",
    "routed_turn",
    "tools_on_named_paths",
]
