"""run_metrics: every field from the events that report it, and absent where nothing did."""

from __future__ import annotations

from dataclasses import fields

import pytest

from steadyloop.events import (
    AgentEnd,
    AgentStart,
    ContextCompacted,
    ContextPruned,
    Downgrade,
    Event,
    MessageUpdate,
    Notice,
    SideTask,
    ToolExecutionEnd,
    TurnEnd,
    UsageReport,
)
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import AssistantMessage, ToolResultMessage, UserMessage
from steadyloop.metrics import RunMetrics, TurnTime, run_metrics
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.usage import Usage
from steadyloop.wire.endpoints import Endpoint

COUNTS = {
    "turns",
    "tool_calls",
    "tool_errors",
    "turns_cut_off",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_breaks",
    "cache_breaks_by_reason",
    "tool_errors_by_name",
    "retries",
    "timeouts",
    "continuations",
    "recoveries",
    "harmony_leaks",
    "downgrades",
    "downgrades_by_field",
    "folds",
    "forced_folds",
    "folded_messages",
    "prunes",
    "pruned_results",
    "side_tasks",
    "tools_loaded",
    "redundant_loads",
    "unknown_tool_names",
}
MAPS = {
    "cache_breaks_by_reason": {},
    "tool_errors_by_name": {},
    "downgrades_by_field": {},
    "unknown_tool_names": [],
}


def usage(step: int, turn: Usage, **extra: object) -> UsageReport:
    return UsageReport(turn=turn, totals=turn, step=step, **extra)  # type: ignore[arg-type]


def tool_end(
    name: str, disposition: str = "completed", *, is_error: bool = False, ms: float | None = None
) -> ToolExecutionEnd:
    return ToolExecutionEnd(
        call_id=f"{name}-{disposition}",
        name=name,
        result=ToolResultMessage(call_id="c", content="r", is_error=is_error),
        disposition=disposition,  # type: ignore[arg-type]
        duration_ms=ms,
    )


def turn_end(step: int, finish_reason: str) -> TurnEnd:
    return TurnEnd(step=step, message=AssistantMessage(content="x"), finish_reason=finish_reason)


def full_run() -> list[Event]:
    return [
        AgentStart(),
        MessageUpdate(kind="text", delta="hi", step=1),
        usage(
            1,
            Usage(
                prompt_tokens=1000,
                completion_tokens=50,
                cached_tokens=0,
                uncached_tokens=1000,
                prompt_ms=400.0,
                predicted_ms=100.0,
                first_token_ms=420.0,
                draft_total=10,
                draft_accepted=6,
                wall_ms=600.0,
                retries=1,
                timeouts=1,
            ),
        ),
        tool_end("read", ms=20.0),
        tool_end("read", is_error=True, ms=5.0),
        tool_end("write", "timeout", ms=30000.0),
        turn_end(1, "tool_calls"),
        usage(
            2,
            Usage(
                prompt_tokens=1200,
                completion_tokens=30,
                cached_tokens=1000,
                uncached_tokens=200,
                prompt_ms=50.0,
                predicted_ms=900.0,
                first_token_ms=60.0,
                draft_total=10,
                draft_accepted=8,
                retries=2,
            ),
            cache_broken=False,
        ),
        turn_end(2, "length"),
        usage(
            3,
            Usage(prompt_tokens=1300, completion_tokens=20, cached_tokens=100, uncached_tokens=1200),
            cache_broken=True,
            cache_break_reason="tools-changed",
        ),
        usage(4, Usage(prompt_tokens=1400, cached_tokens=0, uncached_tokens=1400), cache_broken=True),
        turn_end(4, "stop"),
        AgentEnd(outcome="completed"),
    ]


def test_every_field_from_a_full_run() -> None:
    metrics = run_metrics(full_run(), context_length=4000)
    assert metrics == RunMetrics(
        turns=4,
        tool_calls=3,
        tool_errors=2,
        turns_cut_off=1,
        prompt_tokens=4900,
        completion_tokens=100,
        cached_tokens=1100,
        cache_breaks=2,
        cache_breaks_by_reason={"tools-changed": 1, "unknown": 1},
        tool_errors_by_name={"read": 1, "write": 1},
        retries=3,
        timeouts=1,
        cache_hit_ratio=1100 / 4900,
        cache_share=1100 / 4900,
        prefill_ms=450.0,
        decode_ms=1000.0,
        tool_ms=30025.0,
        # Step 2 has no wall time; its prefill plus decode (950) beats step 1's wall time (600).
        slowest_turn=TurnTime(step=2, ms=950.0),
        mean_first_token_ms=240.0,
        draft_acceptance=14 / 20,
        largest_prompt=1400,
        largest_prompt_share=1400 / 4000,
        outcome="completed",
    )


def test_nothing_reported_leaves_only_the_counts() -> None:
    metrics = run_metrics([AgentStart(), usage(1, Usage()), turn_end(1, "stop")])
    assert metrics.turns == 1
    assert set(metrics.to_dict()) == COUNTS
    for f in fields(metrics):
        if f.name not in COUNTS:
            assert getattr(metrics, f.name) is None, f.name


def test_no_events_at_all() -> None:
    assert run_metrics([]) == RunMetrics()
    assert run_metrics([]).to_dict() == dict.fromkeys(COUNTS - set(MAPS), 0) | MAPS


def test_cache_ratio_only_over_requests_that_reported_a_cache_count() -> None:
    events = [
        usage(1, Usage(prompt_tokens=1000)),  # no cache report at all
        usage(2, Usage(prompt_tokens=1000, cached_tokens=900, uncached_tokens=100)),
    ]
    assert run_metrics(events).cache_hit_ratio == 0.9
    # A cold cache that was reported is a ratio of 0, not an absent one.
    assert run_metrics([usage(1, Usage(prompt_tokens=10, uncached_tokens=10))]).cache_hit_ratio == 0.0


def test_slowest_turn_prefers_wall_time_and_falls_back_to_server_timings() -> None:
    events = [
        usage(1, Usage(prompt_ms=10.0, predicted_ms=10.0, wall_ms=500.0)),
        usage(2, Usage(predicted_ms=300.0)),
    ]
    assert run_metrics(events).slowest_turn == TurnTime(step=1, ms=500.0)
    assert run_metrics(events).to_dict()["slowest_turn"] == {"step": 1, "ms": 500.0}


def test_draft_acceptance_ignores_accepted_counts_without_proposals() -> None:
    events = [usage(1, Usage(draft_accepted=5)), usage(2, Usage(draft_total=4, draft_accepted=1))]
    assert run_metrics(events).draft_acceptance == 0.25
    assert run_metrics([usage(1, Usage(draft_total=0, draft_accepted=0))]).draft_acceptance is None


def test_largest_prompt_share_needs_a_positive_context_length() -> None:
    events = [usage(1, Usage(prompt_tokens=500))]
    assert run_metrics(events).largest_prompt == 500
    assert run_metrics(events).largest_prompt_share is None
    assert run_metrics(events, context_length=0).largest_prompt_share is None
    assert run_metrics(events, context_length=1000).largest_prompt_share == 0.5


@pytest.mark.parametrize("disposition", ["failed", "blocked", "aborted", "timeout", "skipped"])
def test_every_disposition_short_of_completed_is_a_tool_error(disposition: str) -> None:
    metrics = run_metrics([tool_end("t", disposition)])
    assert (metrics.tool_calls, metrics.tool_errors, metrics.tool_errors_by_name) == (1, 1, {"t": 1})
    assert metrics.tool_ms is None


@pytest.mark.parametrize(
    "outcome", ["completed", "error", "cancelled", "max_iterations", "loop_detected", "stopped"]
)
def test_outcome_comes_from_agent_end(outcome: str) -> None:
    metrics = run_metrics([AgentStart(), AgentEnd(outcome=outcome)])  # type: ignore[arg-type]
    assert metrics.outcome == outcome
    assert metrics.to_dict()["outcome"] == outcome


def test_no_agent_end_means_no_outcome() -> None:
    assert run_metrics([AgentStart()]).outcome is None
    assert "outcome" not in run_metrics([AgentStart()]).to_dict()


def test_to_dict_copies_the_maps() -> None:
    metrics = run_metrics([tool_end("t", "failed")])
    out = metrics.to_dict()
    out["tool_errors_by_name"]["t"] = 99
    assert metrics.tool_errors_by_name == {"t": 1}


class Loader:
    tools_loaded = 3
    redundant_loads = 1
    unknown_tool_names = ("nope",)


def test_recoveries_downgrades_folds_prunes_side_tasks_and_loads() -> None:
    events: list[Event] = [
        Downgrade(field="top_k", reason="refused", step=1),
        Downgrade(field="top_k", reason="refused", step=1),
        Downgrade(field="reasoning_effort", reason="rung", step=1),
        Notice(text="recovered 1 tool call(s)", name="recovery", step=1),
        Notice(text="gpt-oss channel markers reached the answer", name="harmony_leak", step=2),
        Notice(text="the harmony-leak callback failed", name="harmony_leak_callback", step=2),
        ContextPruned(cleared=4, chars=900, step=2),
        ContextCompacted(folded=6, tokens_before=900, tokens_after=200, step=2),
        ContextCompacted(folded=2, tokens_before=500, tokens_after=300, forced=True, step=3),
        SideTask(kind="summary", model="m"),
        usage(1, Usage(prompt_tokens=1000, cached_tokens=0, continuations=2)),
        # No cache count reported: left out of the hit ratio, but it lowers the share.
        usage(2, Usage(prompt_tokens=1000)),
        usage(3, Usage(prompt_tokens=2000, cached_tokens=1000, uncached_tokens=1000)),
    ]
    metrics = run_metrics(events, loads=Loader())
    assert metrics.downgrades == 3 and metrics.downgrades_by_field == {"top_k": 2, "reasoning_effort": 1}
    assert metrics.recoveries == 1 and metrics.harmony_leaks == 1
    assert (metrics.prunes, metrics.pruned_results) == (1, 4)
    assert (metrics.folds, metrics.forced_folds, metrics.folded_messages) == (2, 1, 8)
    assert metrics.side_tasks == 1 and metrics.continuations == 2
    assert (metrics.tools_loaded, metrics.redundant_loads, metrics.unknown_tool_names) == (3, 1, ("nope",))
    assert metrics.cache_hit_ratio == 1000 / 2000  # step 1 reported no cache count: left out
    assert metrics.cache_share == 1000 / 4000
    assert metrics.to_dict()["unknown_tool_names"] == ["nope"]


async def test_a_run_reports_its_load_tools_counts_recoveries_and_downgrades() -> None:
    @tool
    def clock() -> str:
        """The time."""
        return "12:00"

    load = {"id": "l1", "name": "load_tools", "arguments": {"names": ["clock", "sundial"]}}
    again = {"id": "l2", "name": "load_tools", "arguments": {"names": ["clock"]}}
    refusal = {
        "error": {"message": "Unrecognized request argument supplied: top_k", "type": "invalid_request_error"}
    }
    written = '{"name": "clock", "arguments": {}}'
    async with ScriptedServer(
        Reply.json(refusal, 400),
        Reply.stream(stream_of(tool_calls=[load])),
        Reply.stream(stream_of(tool_calls=[again])),
        Reply.stream(text_chunks(written)),
        Reply.stream(text_chunks("It is noon.")),
    ) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m", top_k=20),
            messages=[UserMessage(content="Time?")],
            tools=[clock],
            policy=LoopPolicy(tool_discovery="ondemand", retry=RetryPolicy(max_retries=0)),
        )
    metrics = result.metrics
    assert (metrics.tools_loaded, metrics.redundant_loads) == (1, 1)
    assert metrics.unknown_tool_names == ("sundial",)
    assert metrics.downgrades_by_field == {"top_k": 1}
    assert metrics.recoveries == 1 and metrics.tool_calls == 3 and metrics.turns == 4
