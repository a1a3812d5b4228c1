"""Calls told apart only by numbers nobody wrote are one call; sans I/O.

Asked "the rewards for playing Fortnite on Playstation with different missions and trophies", a small
model allowed several calls in a step wrote five of the same tool, the missions "Mission 1" to "Mission
5" and the trophies "Trophy 1" to "Trophy 5": the request asks about missions in general and names none.
The numbers are the model's own, a series that fills a list it was allowed to write. Where every argument
that tells a tool's calls apart holds such a series, and the request writes none of its numbers,
:func:`without_numbered_calls` keeps the first call of that tool and leaves the series' arguments to the
tool (the first call's value where the argument is required). A series the request writes is its own
("chapters 1 and 2", "dataset1 and dataset2"), and calls told apart by anything else (two cities, two
case numbers) are left as they are. Linear in the request and the decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .decision import Decision, tool_names

__all__ = ["without_numbered_calls"]

# A value of a series: words, then a number at its end ("Mission 3", "Trophy #2", "level-4").
_NUMBERED = re.compile(r"([^\W\d_][\w ]*?)[\s#_-]*(\d{1,6})")
_NUMBER = re.compile(r"\d+")


def _series(values: Sequence[Any]) -> set[int] | None:
    """The numbers of ``values`` where they are one series (the same words, each with its own number)."""
    words: set[str] = set()
    numbers: set[int] = set()
    for value in values:
        match = _NUMBERED.fullmatch(value) if isinstance(value, str) and len(value) <= 80 else None
        if match is None:
            return None
        words.add(match.group(1).strip().lower())
        numbers.add(int(match.group(2)))
    return numbers if len(words) == 1 and len(numbers) == len(values) else None


def _one_call(
    calls: Sequence[tuple[str, dict[str, Any]]], schema: Mapping[str, Any], written: set[int]
) -> dict[str, Any] | None:
    """The one call ``calls`` (of one tool) stand for, where only a series nobody wrote tells them apart."""
    first = calls[0][1]
    keys = {key for _, arguments in calls for key in arguments}
    differing = [
        key for key in keys if any(arguments.get(key, None) != first.get(key) for _, arguments in calls)
    ]
    if not differing:
        return None  # the same call again: left to the loop's reading of a call made already
    for key in differing:
        numbers = _series([arguments.get(key) for _, arguments in calls])
        if numbers is None or numbers & written:
            return None
    required = schema.get("required")
    kept = set(required) if isinstance(required, list) else set()
    return {key: value for key, value in first.items() if key not in differing or key in kept}


def without_numbered_calls(decision: Decision, request: str, tools: Sequence[Mapping[str, Any]]) -> Decision:
    """``decision`` with each tool's calls that only a series of numbers the request never wrote tells
    apart made one call (see the module docstring); a decision of one call is returned as it is.

    Args:
        request: the user's request, before any tool ran for it.
        tools: the declared tools (OpenAI format), for which arguments are required.
    """
    if len(decision.calls) < 2:
        return decision
    written = {int(n) for n in _NUMBER.findall(request) if len(n) <= 6}
    schemas = dict(tool_names(tools))
    by_tool: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for call in decision.calls:
        by_tool.setdefault(call[0], []).append(call)
    merged = {
        name: one
        for name, calls in by_tool.items()
        if len(calls) > 1 and (one := _one_call(calls, schemas.get(name, {}), written)) is not None
    }
    if not merged:
        return decision
    kept: list[tuple[str, dict[str, Any]]] = []
    for name, arguments in decision.calls:
        if name not in merged:
            kept.append((name, arguments))
        elif all(done != name for done, _ in kept):
            kept.append((name, merged[name]))
    (name, arguments), *more = kept
    return Decision(name, arguments, tuple(more))
