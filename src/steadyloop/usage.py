"""Token counts and timings of one request, or of several added together (public)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = ["Usage"]

# Measured fields are None when nothing measured them; adding two Usages keeps None only when both are.
_SUMMED_OPTIONAL = (
    "uncached_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "prompt_ms",
    "predicted_ms",
    "draft_total",
    "draft_accepted",
    "wall_ms",
    "retries",
    "timeouts",
    "continuations",
)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and timings an endpoint reported, normalised across servers.

    The four counts are always present and 0 when the server said nothing. Every other field is ``None``
    unless something measured it, so "a cold cache" and "no cache report" read differently.

    ``prompt_tokens`` counts the whole prompt, whatever the provider calls its parts: ``cached_tokens``
    of it were read from the prompt cache and ``cache_write_tokens`` written to it (Anthropic bills both
    apart from the rest).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    uncached_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    prompt_ms: float | None = None
    prompt_tokens_per_second: float | None = None
    predicted_ms: float | None = None
    tokens_per_second: float | None = None
    draft_total: int | None = None
    draft_accepted: int | None = None
    first_token_ms: float | None = None
    wall_ms: float | None = None
    retries: int | None = None
    timeouts: int | None = None
    continuations: int | None = None

    def __add__(self, other: Usage) -> Usage:
        """Sum two usages: counts and durations add, rates are recomputed where both parts are known."""
        if not isinstance(other, Usage):
            return NotImplemented
        values: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens + other.prompt_tokens,
            "completion_tokens": self.completion_tokens + other.completion_tokens,
            "total_tokens": self.total_tokens + other.total_tokens,
            "cached_tokens": self.cached_tokens + other.cached_tokens,
        }
        for name in _SUMMED_OPTIONAL:
            a, b = getattr(self, name), getattr(other, name)
            values[name] = None if a is None and b is None else (a or 0) + (b or 0)
        # The first token of a sum is the first part's; rates are weighted by time spent.
        values["first_token_ms"] = (
            self.first_token_ms if self.first_token_ms is not None else other.first_token_ms
        )
        values["prompt_tokens_per_second"] = _weighted_rate(
            self.prompt_tokens_per_second, self.prompt_ms, other.prompt_tokens_per_second, other.prompt_ms
        )
        values["tokens_per_second"] = _weighted_rate(
            self.tokens_per_second, self.predicted_ms, other.tokens_per_second, other.predicted_ms
        )
        return Usage(**values)

    def with_(self, **changes: Any) -> Usage:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self, *, include_none: bool = False) -> dict[str, Any]:
        """The fields as a dict; measured fields that are ``None`` are left out unless asked for."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or include_none:
                out[f.name] = value
        return out


def _weighted_rate(
    rate_a: float | None, ms_a: float | None, rate_b: float | None, ms_b: float | None
) -> float | None:
    if rate_a is None:
        return rate_b
    if rate_b is None:
        return rate_a
    if not ms_a or not ms_b:
        return rate_a if ms_a else rate_b
    tokens = rate_a * ms_a / 1000 + rate_b * ms_b / 1000
    return tokens / ((ms_a + ms_b) / 1000)
