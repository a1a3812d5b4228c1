"""What the spans say as the GenAI semantic conventions ask: error types and exception events, the reply's
id and model, tool descriptions, a traced branch summary, and a run's usage that adds up to its requests.

The native-wire cases replay recorded bodies (tests/data/providers, README there says where each came from).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import steadyloop as sl
from steadyloop.context.folding import summariser
from steadyloop.context.keeper import ContextPolicy
from steadyloop.errors import EndpointUnavailable, RunCancelled, RunError, error_code, error_type
from steadyloop.events import (
    AgentEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    UsageReport,
    event_from_json,
    event_to_json,
)
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.sessions import InMemorySessionStore
from steadyloop.telemetry import Telemetry, set_telemetry, trace_side_tasks
from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.testing.provider_streams import sse_reply
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.usage import Usage
from steadyloop.wire.endpoints import Endpoint

FAST = LoopPolicy(retry=RetryPolicy(base_delay_s=0.01, max_retries=1))
QUESTION = [UserMessage(content="What is 2 + 3?")]
PROVIDERS = Path(__file__).parent / "data" / "providers"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    return a / b


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_telemetry(Telemetry(tracer_provider=provider))
    yield exporter
    set_telemetry(None)
    provider.shutdown()


def named(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return sorted((s for s in finished if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def exceptions(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == "exception"]


def call(name: str, arguments: dict[str, Any]) -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": name, "arguments": arguments}]))


def answer(text: str, prompt: int = 140, completion: int = 5) -> Any:
    return Reply.stream(stream_of(text, usage=usage_chunk(prompt, completion)))


# -- error.type and the exception event


async def test_a_failed_request_is_typed_by_the_status_the_endpoint_answered(
    spans: InMemorySpanExporter,
) -> None:
    busy = Reply.json({"error": {"message": "The server is overloaded", "type": "server_error"}}, 503)
    async with ScriptedServer(busy, busy) as server:
        with pytest.raises(RunError):
            await run_agent_loop(
                Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, policy=FAST
            )
    finished = spans.get_finished_spans()
    chat, run = named(finished, "chat m")[0], named(finished, "invoke_agent")[0]
    assert chat.status.status_code == StatusCode.ERROR and attrs(chat)["error.type"] == "503"
    assert run.status.status_code == StatusCode.ERROR and attrs(run)["error.type"] == "503"
    # The exception event names the class: the endpoint's failure on the request, the run's stop on the run.
    (failed,) = exceptions(chat)
    assert failed["exception.type"] == "steadyloop.errors.EndpointUnavailable"
    assert "overloaded" in failed["exception.message"]
    (stopped,) = exceptions(run)
    assert stopped["exception.type"] == "steadyloop.errors.RunEndpointUnavailable"
    assert "overloaded" in stopped["exception.message"]


async def test_a_failure_without_a_status_is_typed_by_its_class(spans: InMemorySpanExporter) -> None:
    async with ScriptedServer(answer("unused")) as server:
        url = server.base_url
    # Nothing listens there any more: the request fails before any status comes back.
    with pytest.raises(RunError):
        await run_agent_loop(
            Endpoint(url),
            ModelParams(model="m"),
            messages=QUESTION,
            policy=LoopPolicy(retry=RetryPolicy(max_retries=0)),
        )
    finished = spans.get_finished_spans()
    chat, run = named(finished, "chat m")[0], named(finished, "invoke_agent")[0]
    assert attrs(chat)["error.type"] == "steadyloop.errors.EndpointUnreachable"
    assert attrs(run)["error.type"] == "steadyloop.errors.RunEndpointUnreachable"
    assert exceptions(chat)[0]["exception.type"] == "steadyloop.errors.EndpointUnreachable"


async def test_a_tool_that_raised_is_typed_by_what_it_raised(spans: InMemorySpanExporter) -> None:
    async with ScriptedServer(call("divide", {"a": 1, "b": 0}), answer("Cannot divide by zero.")) as server:
        await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, tools=[divide], policy=FAST
        )
    finished = spans.get_finished_spans()
    span = named(finished, "execute_tool divide")[0]
    assert span.status.status_code == StatusCode.ERROR
    assert attrs(span)["error.type"] == "ZeroDivisionError"
    (raised,) = exceptions(span)
    assert raised["exception.type"] == "ZeroDivisionError"
    assert "division by zero" in raised["exception.message"]
    # The run itself went on and completed.
    run = named(finished, "invoke_agent")[0]
    assert run.status.status_code != StatusCode.ERROR and not exceptions(run)


# -- gen_ai.response.id and gen_ai.response.model


async def test_the_reply_id_and_model_of_a_chat_completions_stream(spans: InMemorySpanExporter) -> None:
    # Every chunk names the reply and the model that wrote it, as OpenAI's streams do.
    chunks = stream_of("5.", usage=usage_chunk(20, 2), model="m-2025-01-01", id="chatcmpl-abc123")
    async with ScriptedServer(Reply.stream(chunks)) as server:
        await run_agent_loop(Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION)
    chat = named(spans.get_finished_spans(), "chat m")[0]
    assert attrs(chat)["gen_ai.response.id"] == "chatcmpl-abc123"
    assert attrs(chat)["gen_ai.response.model"] == "m-2025-01-01"
    assert attrs(chat)["gen_ai.request.model"] == "m"


@pytest.mark.parametrize(
    ("api", "recording", "model", "response_id", "response_model"),
    [
        # anthropic/01-text.sse: message_start carries the message's id and model.
        (
            "anthropic",
            "anthropic/01-text.sse",
            "claude-sonnet-4-5",
            "msg_011CdoUf6Nm9H7bPpPJehyoY",
            "claude-sonnet-4-5-20250929",
        ),
        # gemini/01-text.sse: every chunk carries responseId and modelVersion.
        (
            "gemini",
            "gemini/01-text.sse",
            "gemini-2.0-flash-exp",
            "w1peaMz6INOvnvgPgYfPiQY",
            "gemini-2.0-flash-exp",
        ),
    ],
)
async def test_the_reply_id_and_model_of_a_native_wire(
    spans: InMemorySpanExporter, api: str, recording: str, model: str, response_id: str, response_model: str
) -> None:
    async with ScriptedServer(sse_reply((PROVIDERS / recording).read_bytes())) as server:
        url = server.base_url
        if api == "gemini":
            url = url.removesuffix("/v1") + "/v1beta"
        endpoint = Endpoint(url, "test-key", api=api)  # type: ignore[arg-type]
        await run_agent_loop(endpoint, ModelParams(model=model), messages=QUESTION)
    chat = named(spans.get_finished_spans(), f"chat {model}")[0]
    assert attrs(chat)["gen_ai.response.id"] == response_id
    assert attrs(chat)["gen_ai.response.model"] == response_model


# -- gen_ai.tool.description


async def test_a_tool_span_carries_the_tools_description(spans: InMemorySpanExporter) -> None:
    async with ScriptedServer(call("add", {"a": 2, "b": 3}), answer("5.")) as server:
        await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="m"), messages=QUESTION, tools=[add], policy=FAST
        )
    span = named(spans.get_finished_spans(), "execute_tool add")[0]
    assert attrs(span)["gen_ai.tool.description"] == "Add two numbers."
    assert attrs(span)["gen_ai.tool.name"] == "add" and attrs(span)["gen_ai.tool.call.id"] == "c1"
    assert attrs(span)["steadyloop.tool.outcome"] == "completed"


# -- side tasks: traced, and counted in the run's totals


async def test_a_branch_summary_is_a_traced_side_task(spans: InMemorySpanExporter) -> None:
    replies = [answer("Ready."), answer("Done."), answer("The branch said done.", 300, 12)]
    store = InMemorySessionStore()
    async with ScriptedServer(*replies) as server:
        session = await store.session(agent_id="a")
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", session=session, policy=FAST)
        await agent.prompt("Set up.")
        await agent.prompt("Finish.")
        move = await agent.branch_to("2")
        assert move.moved and move.summary is not None and move.summary.summarised
    side = [s for s in named(spans.get_finished_spans(), "chat m") if "steadyloop.side_task" in attrs(s)]
    assert len(side) == 1
    assert attrs(side[0])["steadyloop.side_task"] == "branch_summary"
    assert attrs(side[0])["gen_ai.usage.input_tokens"] == 300
    assert attrs(side[0])["gen_ai.usage.output_tokens"] == 12


async def test_a_side_task_span_is_typed_and_names_its_reply(spans: InMemorySpanExporter) -> None:
    missing = Reply.json({"error": {"message": "The model m does not exist", "type": "not_found"}}, 404)
    named_reply = Reply.stream(stream_of("Read logs.", model="m-2025", id="chatcmpl-side"))
    async with ScriptedServer(missing, named_reply) as server:
        endpoint = Endpoint(server.base_url)
        summarise = summariser(endpoint, "m", on_event=trace_side_tasks(endpoint))
        assert await summarise("a branch") is None
        assert await summarise("a branch") == "Read logs."
    failed, answered = named(spans.get_finished_spans(), "chat m")
    assert failed.status.status_code == StatusCode.ERROR and attrs(failed)["error.type"] == "404"
    assert exceptions(failed)[0]["exception.type"] == "steadyloop.errors.EndpointRefused"
    assert "does not exist" in exceptions(failed)[0]["exception.message"]
    assert attrs(answered)["gen_ai.response.id"] == "chatcmpl-side"
    assert attrs(answered)["gen_ai.response.model"] == "m-2025"


def _long_history(count: int, size: int) -> list[Message]:
    history: list[Message] = [UserMessage(content="Read the logs one by one.")]
    for n in range(count):
        history.append(AssistantMessage(content=f"Reading log {n}."))
        history.append(UserMessage(content=f"Log {n}: " + "x" * size))
    history.append(UserMessage(content="Summarise what you saw."))
    return history


async def test_a_runs_usage_is_the_sum_of_its_chat_spans_side_tasks_included(
    spans: InMemorySpanExporter,
) -> None:
    policy = LoopPolicy(context_limit=3000, context=ContextPolicy(), retry=RetryPolicy(max_retries=0))
    summary = answer("Logs 0-5 read; nothing unusual.", 911, 40)
    async with ScriptedServer(summary, answer("Done.", 553, 7)) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="m"), messages=_long_history(8, 2000), policy=policy
        )
    assert result.metrics.side_tasks == 1
    finished = spans.get_finished_spans()
    run = named(finished, "invoke_agent")[0]
    chats = [s for s in finished if s.parent is not None and s.parent.span_id == run.context.span_id]
    assert len(chats) == 2
    for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
        assert attrs(run)[key] == sum(attrs(s)[key] for s in chats), key
    assert attrs(run)["gen_ai.usage.input_tokens"] == 553 + 911
    # The side tasks' part, apart: the run's own requests are the total less it (AgentEnd.usage).
    assert attrs(run)["steadyloop.side_tasks.input_tokens"] == 911
    assert attrs(run)["steadyloop.side_tasks.output_tokens"] == 40
    assert result.usage.prompt_tokens == 553


# -- what the spans read travels on the events, and survives their JSON


def test_the_new_fields_survive_the_events_json() -> None:
    result = ToolResultMessage(call_id="c1", content="ZeroDivisionError: division by zero", is_error=True)
    events = [
        AgentEnd(
            outcome="error", error="x", error_type="steadyloop.errors.RunEndpointError", error_code="429"
        ),
        TurnEnd(step=2, error="x", error_type="steadyloop.errors.EndpointError", error_code="429"),
        ToolExecutionStart(call_id="c1", name="divide", arguments={}, description="Divide a by b."),
        ToolExecutionEnd(
            call_id="c1", name="divide", result=result, disposition="failed", error_type="ZeroDivisionError"
        ),
        UsageReport(turn=Usage(), totals=Usage(), response_id="msg_01", response_model="claude-x-20250929"),
    ]
    for event in events:
        assert event_from_json(event_to_json(event)) == event
    # Events written before these fields existed still read, with them empty.
    old = '{"type": "usage", "turn": {}, "totals": {}}'
    assert event_from_json(old) == UsageReport(turn=Usage(), totals=Usage())


def test_error_type_and_code() -> None:
    assert error_type(ValueError("x")) == "ValueError"
    assert error_type(RunCancelled("stop", reason="cancelled")) == "steadyloop.errors.RunCancelled"
    assert error_code(EndpointUnavailable("busy", status=503)) == "503"
    assert error_code(EndpointUnavailable("gone")) is None and error_code(ValueError("x")) is None
