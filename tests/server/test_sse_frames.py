"""SSE frames leave out the fields an event has no value for, and read back as the same event."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, get_args

from hypothesis import given
from hypothesis import strategies as st

from steadyloop import Event
from steadyloop.events import (
    AgentEnd,
    AgentStart,
    ApprovalDecided,
    ApprovalRequired,
    ContextCompacted,
    ContextPruned,
    Downgrade,
    Failover,
    HookDenied,
    LateSettlement,
    LoopDetected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Notice,
    PrefixRewritten,
    QueuedMessage,
    RequestSent,
    Retry,
    SideTask,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
    UsageReport,
    event_from_json,
)
from steadyloop.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from steadyloop.server import ServerSettings
from steadyloop.server.errors import Scrubber
from steadyloop.server.hub import Item
from steadyloop.server.sse import frame
from steadyloop.testing import Reply, ScriptedServer, stream_of, usage_chunk
from steadyloop.usage import Usage

from .conftest import LiveServer, read_sse

CALL = ToolCall("c1", "write", {"path": "a.txt", "mode": None, "lines": [1, None]})
RESULT = ToolResultMessage(call_id="c1", content="done", name="write")
# One of every event, each with its optional fields at None where it has them.
SAMPLES: list[Any] = [
    AgentStart(at=None, run_id="r", seq=1),
    AgentEnd(
        outcome="error",
        error=None,
        usage=Usage(prompt_tokens=3),
        queued=(QueuedMessage(queue="steering", message=UserMessage(content="hi"), fate="dropped"),),
    ),
    TurnStart(step=1, at=1_700_000_000.5),
    TurnEnd(step=1, message=None, error=None),
    TurnEnd(step=2, message=AssistantMessage(content="x", tool_calls=(CALL,)), tool_results=(RESULT,)),
    MessageStart(message=UserMessage(content="hello")),
    MessageUpdate(kind="text", delta="null"),
    MessageEnd(message=AssistantMessage(content="hi")),
    ToolExecutionStart(call_id="c1", name="write", arguments=dict(CALL.arguments), effect=None),
    ToolExecutionUpdate(call_id="c1", name="write", text="half"),
    ToolExecutionEnd(call_id="c1", name="write", result=RESULT, disposition="completed", duration_ms=None),
    LateSettlement(call_id="c1", name="write", outcome="completed"),
    Notice(text="gap", name=None, after_seq=None),
    UsageReport(turn=Usage(prompt_tokens=10, wall_ms=12.5), totals=Usage(), cache_expected=None),
    Retry(attempt=1, delay_s=0.5, reason="503"),
    Failover(from_endpoint="a", from_model="m", to_endpoint="b", to_model="n", cause="down", status=None),
    Downgrade(field="temperature", reason="refused", value=None),
    SideTask(kind="summary", error=None),
    LoopDetected(kind="repeat", tool="write"),
    ApprovalRequired(
        approval_id="a1", call_id="c1", name="write", arguments={}, effect=None, expires_at=None
    ),
    ApprovalDecided(approval_id="a1", call_id="c1", decision="allow"),
    HookDenied(hook="h", reason="no", call_id=None),
    ContextPruned(cleared=1, chars=20),
    ContextCompacted(folded=3, tokens_before=100, tokens_after=20),
    PrefixRewritten(index=2),
    RequestSent(endpoint="http://127.0.0.1:8080/v1", model=""),
]


def data_of(event: Any, seq: int | None = 7) -> dict[str, Any]:
    raw = frame(Item(seq=seq, base=0, event=event), Scrubber([])).decode()
    assert raw.endswith("\n\n")
    line = next(line for line in raw.splitlines() if line.startswith("data: "))
    return dict(json.loads(line[len("data: ") :]))


def nulls_outside(value: Any, free: Callable[[list[str]], bool], path: list[str]) -> list[str]:
    """Where ``value`` holds a null, except under a free-form value (``free(path)``)."""
    if free(path):
        return []
    if value is None:
        return [".".join(path)]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nulls_outside(v, free, [*path, k])]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in nulls_outside(v, free, [*path, str(i)])]
    return []


def is_free_form(path: list[str]) -> bool:
    return bool(path) and path[-1] == "arguments"


def test_every_event_type_is_sampled() -> None:
    kinds = {k.__name__ for k in get_args(get_args(Event)[0])}
    assert kinds == {type(s).__name__ for s in SAMPLES}


def test_a_frame_holds_no_null_of_its_own_and_reads_back_as_the_same_event() -> None:
    for event in SAMPLES:
        data = data_of(event)
        assert nulls_outside(data, is_free_form, []) == [], event
        assert event_from_json(json.dumps(data)) == event


def test_nulls_inside_a_calls_arguments_are_its_values_and_stay() -> None:
    data = data_of(SAMPLES[8])
    assert data["arguments"] == {"path": "a.txt", "mode": None, "lines": [1, None]}
    assert data_of(SAMPLES[4])["message"]["tool_calls"][0]["arguments"]["mode"] is None


optional_ints = st.none() | st.integers(min_value=0, max_value=10**9)
optional_floats = st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False)
usages = st.builds(
    Usage,
    prompt_tokens=st.integers(0, 10**9),
    completion_tokens=st.integers(0, 10**9),
    cached_tokens=st.integers(0, 10**9),
    uncached_tokens=optional_ints,
    reasoning_tokens=optional_ints,
    prompt_ms=optional_floats,
    first_token_ms=optional_floats,
    wall_ms=optional_floats,
    retries=optional_ints,
)


@given(usages, usages, st.none() | st.booleans(), st.none() | st.integers(0, 10**6))
def test_a_usage_frame_keeps_exactly_what_was_measured(
    turn: Usage, totals: Usage, broken: bool | None, expected: int | None
) -> None:
    event = UsageReport(turn=turn, totals=totals, cache_broken=broken, cache_expected=expected, step=2)
    data = data_of(event)
    assert "null" not in json.dumps(data)
    assert set(data["turn"]) == set(turn.to_dict())
    assert event_from_json(json.dumps(data)) == event


async def test_a_runs_usage_frame_is_small_and_null_free(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(Reply.stream(stream_of("Hi.", usage=usage_chunk(120, 9, cached=96))))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        async with http.stream(
            "POST",
            f"/sessions/{sid}/messages",
            json={"text": "hello"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            frames = [e async for e in read_sse(response)]
        usage = next(e for e in frames if e.event == "usage")
        size = len(json.dumps(usage.data, separators=(",", ":")))
        assert size < 700, (size, usage.data)
        assert usage.data["turn"]["prompt_tokens"] == 120 and usage.data["turn"]["cached_tokens"] == 96
        for each in frames:
            assert nulls_outside(each.data, is_free_form, []) == [], each
        start = next(e for e in frames if e.event == "agent_start")
        turn = next(e for e in frames if e.event == "turn_start")
        end = next(e for e in frames if e.event == "agent_end")
        assert start.data["at"] <= turn.data["at"] <= end.data["at"], "a run's times, for the page"
