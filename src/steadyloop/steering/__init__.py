"""Small-model steering above the turn: tool routing, the tool gate, answers held to tool results (public)."""
