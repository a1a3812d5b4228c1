"""CacheWatch: when a request could not reuse the previous one's cache, and why."""

from __future__ import annotations

from typing import Any

import pytest

from steadyloop.context.cache_watch import CacheWatch
from steadyloop.usage import Usage

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


def body(*contents: str, system: str = "S", tools: Any = TOOLS) -> dict[str, Any]:
    wire = [{"role": "system", "content": system}] + [{"role": "user", "content": c} for c in contents]
    return {"tools": tools, "messages": wire}


def used(prompt: int, cached: int | None, completion: int = 10) -> Usage:
    if cached is None:
        return Usage(prompt, completion, prompt + completion)
    return Usage(prompt, completion, prompt + completion, cached, uncached_tokens=prompt - cached)


def test_the_first_request_expects_nothing() -> None:
    assert CacheWatch().judge(body("a"), used(100, 0)) == (None, None, None)


def test_an_appending_request_that_hit_the_cache_is_not_broken() -> None:
    watch = CacheWatch()
    watch.judge(body("a"), used(100, 0))
    assert watch.judge(body("a", "b"), used(130, 100)) == (110, False, None)


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        (body("a", "b", tools=[]), "tools-changed"),
        (body("a", "b", system="T"), "system-changed"),
        (body("A", "b"), "history-rewritten"),
        (body("a", "b"), "none-known"),
    ],
)
def test_a_miss_is_explained_by_the_first_difference(second: dict[str, Any], reason: str) -> None:
    watch = CacheWatch()
    watch.judge(body("a"), used(100, 0))
    assert watch.judge(second, used(130, 20)) == (110, True, reason)


def test_without_a_cache_count_nothing_is_said_about_breaks() -> None:
    watch = CacheWatch()
    watch.judge(body("a"), used(100, None))
    assert watch.judge(body("A"), used(130, None)) == (110, None, None)


def test_exactly_ninety_percent_is_a_hit() -> None:
    watch = CacheWatch()
    watch.judge(body("a"), used(100, 0))
    assert watch.judge(body("a", "b"), used(130, 90))[1] is False
    assert watch.judge(body("a", "b", "c"), used(160, 116))[1] is True
