"""The turn, steering and sizing packages stay readable one function at a time.

No function in them is over 80 lines, and no internal function of the turn takes more than four
parameters (``self`` aside): what a call needs travels as one value (``TurnRequest``, ``TurnSink``,
``Attempt``) rather than as keywords handed from layer to layer. The turn's public functions
(``steadyloop.turn.__all__``, and the methods of its public classes) keep the keyword spellings users call.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import steadyloop.turn

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "steadyloop"
MAX_LINES = 80
MAX_PARAMETERS = 4


def _functions(package: str) -> Iterator[tuple[str, str | None, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(file, enclosing class, function)`` of every function in ``package``, nested ones included."""
    for path in sorted((PACKAGE / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owners: dict[int, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for child in node.body:
                    owners[id(child)] = node.name
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield str(path.relative_to(PACKAGE)), owners.get(id(node)), node


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    given = function.args
    names = [a.arg for a in (*given.posonlyargs, *given.args, *given.kwonlyargs)]
    names += [a.arg for a in (given.vararg, given.kwarg) if a is not None]
    return [name for name in names if name not in ("self", "cls")]


def test_no_function_is_over_80_lines() -> None:
    long = [
        f"{path}:{function.lineno} {function.name} ({(function.end_lineno or 0) - function.lineno + 1} lines)"
        for package in ("turn", "steering", "sizing")
        for path, _owner, function in _functions(package)
        if (function.end_lineno or 0) - function.lineno + 1 > MAX_LINES
    ]
    assert long == []


def test_no_internal_turn_function_takes_more_than_four_parameters() -> None:
    public = set(steadyloop.turn.__all__)
    wide = [
        f"{path}:{function.lineno} {function.name} ({len(_parameters(function))} parameters)"
        for path, owner, function in _functions("turn")
        if len(_parameters(function)) > MAX_PARAMETERS and (owner or function.name) not in public
    ]
    assert wide == []
