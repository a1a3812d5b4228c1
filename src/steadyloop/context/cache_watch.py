"""Telling whether a request could reuse the prompt cache of the one before it, and why not.

A prompt cache matches from the first token, so a request whose head changed is re-processed whole. The
loop compares each request with the previous one: the tool block, the system prompt, and whether the
previous messages are still a prefix of the new ones. When the server's cached count falls short of 90%
of the previous prompt, the first difference found is the reason given; when there is none, the request
only appended and the break is the server's (a slot evicted, a template that re-renders the tail).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..usage import Usage

__all__ = ["CacheWatch"]

#: A cached count below this share of the previous prompt is a broken cache.
HIT_SHARE = 0.9


@dataclass(slots=True)
class CacheWatch:
    """What the previous request was, to tell whether the next one could reuse its cache and why not.

    It keeps the previous request's parts as they were sent and compares them only when a break needs a
    reason: most requests hit the cache, and for those nothing is compared, serialised or hashed.
    """

    tools: Any = None
    system: Any = None
    messages: list[Any] = field(default_factory=list)
    prompt: int = 0
    completion: int = 0
    started: bool = False

    def judge(self, body: dict[str, Any], usage: Usage) -> tuple[int | None, bool | None, str | None]:
        """Record a request and its usage; returns (cache_expected, cache_broken, cache_break_reason).

        From the second request on, ``cache_expected`` is the previous prompt and reply; ``cache_broken`` is
        known only where the server reported a cache count.
        """
        tools = body.get("tools") or []
        wire = list(body.get("messages") or [])
        system = next((m for m in wire if isinstance(m, dict) and m.get("role") == "system"), None)
        expected: int | None = None
        broken: bool | None = None
        reason: str | None = None
        if self.started:
            expected = self.prompt + self.completion
            if usage.uncached_tokens is not None or usage.cached_tokens:
                broken = usage.cached_tokens < HIT_SHARE * self.prompt
                if broken:
                    if tools != self.tools:
                        reason = "tools-changed"
                    elif system != self.system:
                        reason = "system-changed"
                    elif wire[: len(self.messages)] != self.messages:
                        reason = "history-rewritten"
                    else:
                        reason = "none-known"
        self.started = True
        self.tools, self.system, self.messages = tools, system, wire
        self.prompt, self.completion = usage.prompt_tokens, usage.completion_tokens
        return expected, broken, reason
