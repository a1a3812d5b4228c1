"""Thinking budgets: a reasoning level turned into a token budget, for servers that take one.

Some servers take no ``reasoning_effort`` but a number of thinking tokens, each under its own field:
llama.cpp's ``thinking_budget_tokens``, Anthropic's ``thinking.budget_tokens``, Gemini's
``thinking_config.thinking_budget`` (nested under ``extra_body`` on its OpenAI-compatible endpoint),
DashScope's ``thinking_budget``, OpenRouter's ``reasoning.max_tokens``. Where the budget goes is data here
(a style), and how many tokens a level is worth is a table the caller can override. A budget of 0 turns
thinking off in each style's own spelling.

Sans-I/O: values in, request fields out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

from ..errors import InvalidInput

__all__ = [
    "BUDGET_STYLES",
    "DEFAULT_THINKING_BUDGETS",
    "BudgetStyle",
    "budget_fields",
    "budget_tokens",
]

BudgetStyleName: TypeAlias = Literal["llama.cpp", "anthropic", "gemini", "qwen", "openrouter"]
#: A named style, or a function from a token budget to the request fields that carry it.
BudgetStyle: TypeAlias = BudgetStyleName | Callable[[int], Mapping[str, Any]]

#: Tokens a reasoning level is worth. ``none`` is 0: thinking off.
DEFAULT_THINKING_BUDGETS: Mapping[str, int] = {
    "none": 0,
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}


def _llamacpp(tokens: int) -> dict[str, Any]:
    return {"thinking_budget_tokens": tokens}


def _anthropic(tokens: int) -> dict[str, Any]:
    if tokens <= 0:
        return {"thinking": {"type": "disabled"}}
    return {"thinking": {"type": "enabled", "budget_tokens": tokens}}


def _gemini(tokens: int) -> dict[str, Any]:
    return {"extra_body": {"google": {"thinking_config": {"thinking_budget": tokens}}}}


def _qwen(tokens: int) -> dict[str, Any]:
    if tokens <= 0:
        return {"enable_thinking": False}
    return {"enable_thinking": True, "thinking_budget": tokens}


def _openrouter(tokens: int) -> dict[str, Any]:
    if tokens <= 0:
        return {"reasoning": {"enabled": False}}
    return {"reasoning": {"max_tokens": tokens}}


#: Where each named style puts the budget.
BUDGET_STYLES: Mapping[str, Callable[[int], dict[str, Any]]] = {
    "llama.cpp": _llamacpp,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "qwen": _qwen,
    "openrouter": _openrouter,
}


def budget_tokens(level: str | None, overrides: Mapping[str, int] | None = None) -> int | None:
    """The token budget of a reasoning level; ``None`` for no level, ``"off"``, or a level with no budget.

    Args:
        level: the reasoning level asked for (``none`` .. ``high``, or a level the overrides name).
        overrides: the caller's table, consulted before ``DEFAULT_THINKING_BUDGETS``.
    """
    if not level or level == "off":
        return None
    if overrides is not None and level in overrides:
        return overrides[level]
    return DEFAULT_THINKING_BUDGETS.get(level)


def budget_fields(style: BudgetStyle, tokens: int) -> dict[str, Any]:
    """The request fields that carry a budget of ``tokens`` in ``style``.

    Raises:
        InvalidInput: an unknown style name, or a style function that gave something other than a mapping.
    """
    if callable(style):
        made = style(tokens)
        if not isinstance(made, Mapping):
            raise InvalidInput(f"a thinking-budget style must return a mapping of fields, got {made!r}")
        return dict(made)
    found = BUDGET_STYLES.get(style) if isinstance(style, str) else None
    if found is None:
        known = ", ".join(sorted(BUDGET_STYLES))
        raise InvalidInput(f"unknown thinking-budget style {style!r}; known: {known}, or a function")
    return found(tokens)


def check_budgets(table: Mapping[str, int] | None) -> None:
    """Reject a budget table that is not level names to whole numbers of tokens >= 0."""
    if table is None:
        return
    if not isinstance(table, Mapping):
        raise InvalidInput(f"thinking_budgets must map levels to token counts, got {table!r}")
    for level, tokens in table.items():
        if (
            not isinstance(level, str)
            or isinstance(tokens, bool)
            or not isinstance(tokens, int)
            or tokens < 0
        ):
            raise InvalidInput(
                f"thinking_budgets maps a level name to a whole number of tokens >= 0; got {level!r}: {tokens!r}"
            )
