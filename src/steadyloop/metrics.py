"""``run_metrics``: what a run cost and how it went, added up from its events (public).

A sibling of ``bus.blocks_of`` rather than part of it: blocks are for display, a summary is not one. Counts are
always present. Every other field is ``None`` where no event reported what it is made of, so "no cache hits"
and "no cache report" read differently. What the events cannot say, this cannot either: whether the host
compacted, or why a run with no ``AgentEnd`` stopped.

The ``load_tools`` counts are the exception: only the loop's tool loader sees a redundant load or a name
that matches nothing, so the loop hands its loader in (``loads``) and they are added to what the events say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from .events import (
    AgentEnd,
    ContextCompacted,
    ContextPruned,
    Downgrade,
    Event,
    Notice,
    Outcome,
    SideTask,
    ToolExecutionEnd,
    TurnEnd,
    UsageReport,
)

__all__ = ["LoadCounts", "RunMetrics", "TurnTime", "run_metrics"]


class LoadCounts(Protocol):
    """What the loop's on-demand tool loader counted (``ToolLoader`` is one)."""

    @property
    def tools_loaded(self) -> int: ...

    @property
    def redundant_loads(self) -> int: ...

    @property
    def unknown_tool_names(self) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class TurnTime:
    """How long one step's request took."""

    step: int
    ms: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMetrics:
    """A run added up.

    Attributes:
        turns: requests made (one usage report each).
        tool_calls: calls that reached a terminal result.
        tool_errors: calls that did not complete, or completed with an error result.
        turns_cut_off: steps that ended at the token ceiling (finish reason ``length``).
        prompt_tokens: prompt tokens over all requests.
        completion_tokens: completion tokens over all requests.
        cached_tokens: prompt tokens served from the cache.
        cache_breaks: requests whose cache hit fell short of the previous prompt.
        cache_breaks_by_reason: the breaks per reason (``unknown`` where none was given).
        tool_errors_by_name: the tool errors per tool.
        retries: lost requests sent again.
        timeouts: requests that went silent.
        continuations: extra requests that carried on answers cut at the token ceiling.
        recoveries: steps whose tool calls were read from the answer text (the server did not parse them).
        harmony_leaks: answers that gpt-oss channel markers reached.
        downgrades: request fields dropped or changed because the endpoint refused them.
        downgrades_by_field: the downgrades per field.
        folds: stretches of the transcript folded into a summary.
        forced_folds: folds made because the endpoint refused the request as too big.
        folded_messages: messages those folds took out.
        prunes: times old tool results were cleared to make room.
        pruned_results: tool results those prunes cleared.
        side_tasks: one-shot calls made for the run (fold summaries, preselection).
        tools_loaded: tools loaded on demand (``load_tools`` or a call to a catalogued tool).
        redundant_loads: tools asked for that were already loaded.
        unknown_tool_names: names asked for or called that matched no tool, each once.
        cache_hit_ratio: cached over prompt tokens, on the requests that reported a cache count.
        cache_share: cached over prompt tokens on every request that reported a prompt count, so a server
            that never reports its cache lowers it (``cache_hit_ratio`` leaves such requests out).
        prefill_ms: time the servers spent reading prompts.
        decode_ms: time the servers spent generating.
        tool_ms: time the tool calls took.
        slowest_turn: the step whose request took longest: its wall time, or prefill plus decode.
        mean_first_token_ms: mean time from a request to its first token.
        draft_acceptance: accepted over proposed speculative-decoding draft tokens.
        largest_prompt: the largest prompt of any request.
        largest_prompt_share: that prompt over the ``context_length`` given.
        outcome: how the run ended, from its ``AgentEnd``.
    """

    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    turns_cut_off: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_breaks: int = 0
    cache_breaks_by_reason: dict[str, int] = field(default_factory=dict)
    tool_errors_by_name: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    timeouts: int = 0
    continuations: int = 0
    recoveries: int = 0
    harmony_leaks: int = 0
    downgrades: int = 0
    downgrades_by_field: dict[str, int] = field(default_factory=dict)
    folds: int = 0
    forced_folds: int = 0
    folded_messages: int = 0
    prunes: int = 0
    pruned_results: int = 0
    side_tasks: int = 0
    tools_loaded: int = 0
    redundant_loads: int = 0
    unknown_tool_names: tuple[str, ...] = ()
    cache_hit_ratio: float | None = None
    cache_share: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    tool_ms: float | None = None
    slowest_turn: TurnTime | None = None
    mean_first_token_ms: float | None = None
    draft_acceptance: float | None = None
    largest_prompt: int | None = None
    largest_prompt_share: float | None = None
    outcome: Outcome | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON-ready values; those that are ``None`` are left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, TurnTime):
                value = asdict(value)
            elif isinstance(value, dict):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


def run_metrics(
    events: Iterable[Event], *, context_length: int | None = None, loads: LoadCounts | None = None
) -> RunMetrics:
    """Add a run up from its events (``bus.history(run_id)``, or a stored record).

    Args:
        events: the run's events, in order.
        context_length: the model's window, for ``largest_prompt_share``.
        loads: the run's on-demand tool loader, for the ``load_tools`` counts.
    """
    turns = tool_calls = tool_errors = turns_cut_off = retries = timeouts = continuations = 0
    recoveries = harmony_leaks = folds = forced_folds = folded_messages = prunes = pruned_results = 0
    side_tasks = 0
    downgrades: dict[str, int] = {}
    reported_prompt = 0
    prompt_tokens = completion_tokens = cached_tokens = 0
    breaks: dict[str, int] = {}
    errors_by_name: dict[str, int] = {}
    # The hit ratio is taken only over requests that reported a cache count: silence is not a cold cache.
    cache_cached = cache_prompt = 0
    prefill, decode, tool_time, first_token = _Sum(), _Sum(), _Sum(), _Sum()
    draft_total, draft_accepted = _Sum(), _Sum()
    slowest: TurnTime | None = None
    largest: int | None = None
    outcome: Outcome | None = None

    for event in events:
        if isinstance(event, UsageReport):
            turn = event.turn
            turns += 1
            retries += turn.retries or 0
            timeouts += turn.timeouts or 0
            continuations += turn.continuations or 0
            prompt_tokens += turn.prompt_tokens
            completion_tokens += turn.completion_tokens
            cached_tokens += turn.cached_tokens
            if turn.uncached_tokens is not None or turn.cached_tokens > 0:
                cache_cached += turn.cached_tokens
                cache_prompt += turn.prompt_tokens
            if event.cache_broken:
                reason = event.cache_break_reason or "unknown"
                breaks[reason] = breaks.get(reason, 0) + 1
            prefill.add(turn.prompt_ms)
            decode.add(turn.predicted_ms)
            first_token.add(turn.first_token_ms)
            # Accepted drafts count only beside a count of proposals, so the ratio cannot pass 1.
            if turn.draft_total is not None:
                draft_total.add(turn.draft_total)
                draft_accepted.add(turn.draft_accepted or 0)
            ms = turn.wall_ms
            if ms is None and (turn.prompt_ms is not None or turn.predicted_ms is not None):
                ms = (turn.prompt_ms or 0.0) + (turn.predicted_ms or 0.0)
            if ms is not None and (slowest is None or ms > slowest.ms):
                slowest = TurnTime(step=event.step, ms=ms)
            if turn.prompt_tokens > 0:
                reported_prompt += turn.prompt_tokens
            # A zero prompt count is a server that said nothing, not an empty prompt.
            if turn.prompt_tokens > 0 and (largest is None or turn.prompt_tokens > largest):
                largest = turn.prompt_tokens
        elif isinstance(event, ToolExecutionEnd):
            tool_calls += 1
            tool_time.add(event.duration_ms)
            if event.disposition != "completed" or event.result.is_error:
                tool_errors += 1
                errors_by_name[event.name] = errors_by_name.get(event.name, 0) + 1
        elif isinstance(event, TurnEnd) and event.finish_reason == "length":
            turns_cut_off += 1
        elif isinstance(event, AgentEnd):
            outcome = event.outcome
        elif isinstance(event, Downgrade):
            downgrades[event.field] = downgrades.get(event.field, 0) + 1
        elif isinstance(event, Notice):
            if event.name == "recovery":
                recoveries += 1
            elif event.name == "harmony_leak":
                harmony_leaks += 1
        elif isinstance(event, ContextCompacted):
            folds += 1
            forced_folds += event.forced
            folded_messages += event.folded
        elif isinstance(event, ContextPruned):
            prunes += 1
            pruned_results += event.cleared
        elif isinstance(event, SideTask):
            side_tasks += 1

    return RunMetrics(
        turns=turns,
        tool_calls=tool_calls,
        tool_errors=tool_errors,
        turns_cut_off=turns_cut_off,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
        cache_breaks=sum(breaks.values()),
        cache_breaks_by_reason=breaks,
        tool_errors_by_name=errors_by_name,
        retries=retries,
        timeouts=timeouts,
        continuations=continuations,
        recoveries=recoveries,
        harmony_leaks=harmony_leaks,
        downgrades=sum(downgrades.values()),
        downgrades_by_field=downgrades,
        folds=folds,
        forced_folds=forced_folds,
        folded_messages=folded_messages,
        prunes=prunes,
        pruned_results=pruned_results,
        side_tasks=side_tasks,
        tools_loaded=loads.tools_loaded if loads is not None else 0,
        redundant_loads=loads.redundant_loads if loads is not None else 0,
        unknown_tool_names=tuple(loads.unknown_tool_names) if loads is not None else (),
        cache_hit_ratio=cache_cached / cache_prompt if cache_prompt else None,
        cache_share=cached_tokens / reported_prompt if reported_prompt else None,
        prefill_ms=prefill.total,
        decode_ms=decode.total,
        tool_ms=tool_time.total,
        slowest_turn=slowest,
        mean_first_token_ms=first_token.mean,
        draft_acceptance=_ratio(draft_accepted.total, draft_total.total),
        largest_prompt=largest,
        largest_prompt_share=_ratio(largest, context_length),
        outcome=outcome,
    )


def _ratio(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole is not None and whole > 0 else None


class _Sum:
    """A sum of the values that were reported; ``None`` until one was."""

    __slots__ = ("count", "total")

    def __init__(self) -> None:
        self.total: float | None = None
        self.count = 0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total = (self.total or 0.0) + value
            self.count += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.total is not None else None
