"""OpenTelemetry spans of real runs against the scripted server, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from steadyloop.context.folding import summariser
from steadyloop.context.keeper import ContextPolicy
from steadyloop.errors import InvalidInput, RunError
from steadyloop.events import Event
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import AssistantMessage, Message, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.telemetry import Telemetry, get_telemetry, set_telemetry, trace_side_tasks
from steadyloop.testing.chunks import stream_of, text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import ToolContext, tool
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint

FAST = LoopPolicy(retry=RetryPolicy(base_delay_s=0.01, max_retries=2))
QUESTION = [UserMessage(content="What is 2 + 3?")]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_telemetry(Telemetry(tracer_provider=provider, agent_name="calc"))
    yield exporter
    set_telemetry(None)
    provider.shutdown()


def call(name: str, arguments: dict[str, Any], id: str = "c1") -> Any:
    return Reply.stream(
        stream_of(
            tool_calls=[{"id": id, "name": name, "arguments": arguments}],
            usage=usage_chunk(120, 12, cached=100),
        )
    )


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text, usage=usage_chunk(140, 5)))


def tree(finished: tuple[ReadableSpan, ...]) -> list[Any]:
    """The spans as (name, [children]) in start order, from the roots down."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in finished}
    for span in finished:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)

    def build(parent: int | None) -> list[Any]:
        kids = sorted(by_parent.get(parent, []), key=lambda s: (s.start_time or 0, s.name))
        return [(s.name, build(s.context.span_id)) for s in kids]

    return build(None)


def named(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return sorted((s for s in finished if s.name == name), key=lambda s: s.start_time or 0)


async def test_a_two_step_tool_run(spans: InMemorySpanExporter) -> None:
    async with ScriptedServer(call("add", {"a": 2, "b": 3}), answer("5.")) as server:
        await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m", temperature=0.2, top_p=0.9, seed=4),
            messages=QUESTION,
            tools=[add],
            policy=FAST,
            session_id="conv-1",
        )
    finished = spans.get_finished_spans()
    assert tree(finished) == [
        ("invoke_agent calc", [("chat m", []), ("execute_tool add", []), ("chat m", [])]),
    ]
    run = named(finished, "invoke_agent calc")[0]
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "calc"
    assert run.attributes["gen_ai.conversation.id"] == "conv-1"
    assert run.attributes["gen_ai.usage.input_tokens"] == 260
    assert run.attributes["steadyloop.outcome"] == "completed" and run.status.status_code != StatusCode.ERROR
    first, second = named(finished, "chat m")
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == "m"
    assert first.attributes["server.address"] == "127.0.0.1"
    assert first.attributes["gen_ai.request.temperature"] == 0.2
    assert first.attributes["gen_ai.request.seed"] == 4
    assert first.attributes["gen_ai.usage.input_tokens"] == 120
    assert first.attributes["gen_ai.usage.output_tokens"] == 12
    assert first.attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first.attributes["steadyloop.request.retries"] == 0
    assert isinstance(first.attributes["gen_ai.response.time_to_first_chunk"], float)
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    tool_span = named(finished, "execute_tool add")[0]
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.name"] == "add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool_span.attributes["steadyloop.tool.outcome"] == "completed"
    assert "gen_ai.tool.call.arguments" not in tool_span.attributes  # content capture is off
    assert "gen_ai.tool.call.result" not in tool_span.attributes
    # Spans in the order things happened, each inside the run.
    assert first.end_time is not None and tool_span.start_time is not None
    assert run.start_time is not None and run.end_time is not None
    assert run.start_time <= first.start_time <= first.end_time <= tool_span.start_time  # type: ignore[operator]
    assert second.end_time is not None and second.end_time <= run.end_time


async def test_a_failed_request_with_retries(spans: InMemorySpanExporter) -> None:
    busy = Reply.json({"error": {"message": "The server is overloaded", "type": "server_error"}}, 503)
    async with ScriptedServer(busy, busy, busy) as server:
        with pytest.raises(RunError):
            await run_agent_loop(
                Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, policy=FAST
            )
        assert len(server.chat_requests) == 3
    finished = spans.get_finished_spans()
    assert tree(finished) == [("invoke_agent calc", [("chat m", [])])]
    chat = named(finished, "chat m")[0]
    assert chat.attributes is not None
    assert chat.status.status_code == StatusCode.ERROR and chat.attributes["error.type"] == "503"
    assert chat.attributes["steadyloop.request.retries"] == 2
    assert [e.name for e in chat.events] == ["steadyloop.retry", "steadyloop.retry", "exception"]
    retries = [e for e in chat.events if e.name == "steadyloop.retry"]
    assert [e.attributes["steadyloop.retry.attempt"] for e in retries if e.attributes] == [1, 2]
    run = named(finished, "invoke_agent calc")[0]
    assert run.status.status_code == StatusCode.ERROR


async def test_a_request_that_succeeds_after_a_retry_counts_it(spans: InMemorySpanExporter) -> None:
    busy = Reply.json({"error": {"message": "The server is overloaded", "type": "server_error"}}, 503)
    async with ScriptedServer(busy, answer("5.")) as server:
        await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, policy=FAST
        )
    chat = named(spans.get_finished_spans(), "chat m")[0]
    assert chat.attributes is not None and chat.attributes["steadyloop.request.retries"] == 1
    assert chat.status.status_code != StatusCode.ERROR and len(chat.events) == 1


def _long_history(count: int, size: int) -> list[Message]:
    history: list[Message] = [UserMessage(content="Read the logs one by one.")]
    for n in range(count):
        history.append(AssistantMessage(content=f"Reading log {n}."))
        history.append(UserMessage(content=f"Log {n}: " + "x" * size))
    history.append(UserMessage(content="Summarise what you saw."))
    return history


async def test_a_run_with_a_fold(spans: InMemorySpanExporter) -> None:
    policy = LoopPolicy(context_limit=3000, context=ContextPolicy(), retry=RetryPolicy(max_retries=0))
    summary = Reply.stream(text_chunks("Logs 0-5 read; nothing unusual."))
    async with ScriptedServer(summary, answer("Done.")) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m", side_effort="low"),
            messages=_long_history(8, 2000),
            policy=policy,
        )
        asked = [r.json for r in server.chat_requests]
    assert result.turn.content == "Done." and result.metrics.folds == 1 and result.metrics.side_tasks == 1
    # The fold's summary went as a side task, with the side effort.
    assert asked[0]["reasoning_effort"] == "low" and "reasoning_effort" not in asked[1]
    finished = spans.get_finished_spans()
    assert tree(finished) == [("invoke_agent calc", [("chat m", []), ("chat m", [])])]
    side, main = named(finished, "chat m")
    assert side.attributes is not None and main.attributes is not None
    assert side.attributes["steadyloop.side_task"] == "summary"
    assert "steadyloop.side_task" not in main.attributes
    assert side.end_time is not None and main.start_time is not None and side.end_time <= main.start_time
    run = named(finished, "invoke_agent calc")[0]
    compacted = [e for e in run.events if e.name == "steadyloop.context.compacted"]
    assert (
        compacted and compacted[0].attributes is not None and compacted[0].attributes["steadyloop.folded"] > 0
    )


async def test_no_credential_reaches_any_attribute(spans: InMemorySpanExporter) -> None:
    set_telemetry(Telemetry(tracer_provider=get_telemetry().tracer_provider, capture_content=True))  # type: ignore[union-attr]
    key = "sk-proj-secretvalue123"
    refusal = Reply.json(
        {
            "error": {
                "message": f"Incorrect API key provided: {key}. Base http://alice:hunter2pass@host",
                "type": "x",
            }
        },
        401,
    )
    async with ScriptedServer(call("add", {"a": 1, "b": 1}), refusal) as server:
        host = server.base_url.replace("http://", "http://alice:hunter2pass@")
        with pytest.raises(RunError):
            await run_agent_loop(
                Endpoint(host, api_key=key),
                ModelParams(model="m"),
                messages=QUESTION,
                tools=[add],
                policy=FAST,
            )
    finished = spans.get_finished_spans()
    assert len(finished) >= 3
    texts: list[str] = []
    for span in finished:
        texts.append(span.name)
        texts.append(json.dumps(dict(span.attributes or {}), default=str))
        texts.append(span.status.description or "")
        for event in span.events:
            texts.append(json.dumps(dict(event.attributes or {}), default=str))
    everything = "\n".join(texts)
    assert "Incorrect API key" in everything  # the failure itself is told...
    for secret in (key, "hunter2pass", "alice:"):
        assert secret not in everything  # ...without what it would give away


async def test_content_is_captured_only_when_asked(spans: InMemorySpanExporter) -> None:
    set_telemetry(Telemetry(tracer_provider=get_telemetry().tracer_provider, capture_content=True))  # type: ignore[union-attr]
    async with ScriptedServer(call("add", {"a": 2, "b": 3}), answer("5.")) as server:
        await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, tools=[add], policy=FAST
        )
    finished = spans.get_finished_spans()
    tool_span = named(finished, "execute_tool add")[0]
    assert tool_span.attributes is not None
    assert json.loads(str(tool_span.attributes["gen_ai.tool.call.arguments"])) == {"a": 2, "b": 3}
    assert tool_span.attributes["gen_ai.tool.call.result"] == "5"
    last = named(finished, "chat m")[-1]
    assert last.attributes is not None
    output = json.loads(str(last.attributes["gen_ai.output.messages"]))
    assert output[0]["parts"][0]["content"] == "5."


async def test_a_child_run_nests_under_the_tool_that_started_it(spans: InMemorySpanExporter) -> None:
    async with ScriptedServer(
        call("delegate", {"question": "2+3"}), answer("Child says 5."), answer("5, says the child.")
    ) as server:
        endpoint = Endpoint(server.base_url)

        @tool
        async def delegate(question: str, context: ToolContext) -> str:
            """Ask a helper agent."""
            result = await run_agent_loop(
                endpoint, ModelParams(model="helper"), messages=[UserMessage(content=question)], policy=FAST
            )
            return result.turn.content

        await run_agent_loop(
            endpoint, ModelParams(model="m"), messages=QUESTION, tools=[delegate], policy=FAST
        )
    assert tree(spans.get_finished_spans()) == [
        (
            "invoke_agent calc",
            [
                ("chat m", []),
                ("execute_tool delegate", [("invoke_agent calc", [("chat helper", [])])]),
                ("chat m", []),
            ],
        )
    ]


async def test_a_run_nests_under_the_callers_span_and_a_side_task_outside_a_run(
    spans: InMemorySpanExporter,
) -> None:
    provider = get_telemetry().tracer_provider  # type: ignore[union-attr]
    assert provider is not None
    outer = provider.get_tracer("host")
    events: list[Event] = []
    async with ScriptedServer(answer("5."), Reply.stream(text_chunks("The branch read logs."))) as server:
        endpoint = Endpoint(server.base_url)
        with outer.start_as_current_span("request"):
            await run_agent_loop(endpoint, ModelParams(model="m"), messages=QUESTION, policy=FAST)
            summarise = summariser(
                endpoint, "m", kind="branch_summary", on_event=trace_side_tasks(endpoint, events.append)
            )
            assert await summarise("a branch") == "The branch read logs."
    assert tree(spans.get_finished_spans()) == [
        ("request", [("invoke_agent calc", [("chat m", [])]), ("chat m", [])]),
    ]
    branch = named(spans.get_finished_spans(), "chat m")[-1]
    assert branch.attributes is not None and branch.attributes["steadyloop.side_task"] == "branch_summary"
    assert any(e.type == "side_task" for e in events)


async def test_set_telemetry_none_stops_tracing_the_next_runs(spans: InMemorySpanExporter) -> None:
    set_telemetry(None)
    assert get_telemetry() is None
    async with ScriptedServer(answer("5.")) as server:
        await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, policy=FAST
        )
    assert spans.get_finished_spans() == ()


def test_without_the_extra_set_telemetry_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # As on an install without the extra: OpenTelemetry cannot be imported.
    monkeypatch.delitem(sys.modules, "steadyloop._otel_spans")
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(InvalidInput, match=r"pip install 'steadyloop\[otel\]'"):
        set_telemetry(Telemetry())
    assert get_telemetry() is None
