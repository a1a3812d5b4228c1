"""Property tests: the event contract under generated scripts, and the new entry points are total."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.context import ContextState
from steadyloop.context.compaction import Fold, apply_compaction, request_index
from steadyloop.events import Event, MessageEnd
from steadyloop.structured import OutputMismatch, read_structured
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.wire.transport.clients import aclose_clients

from .test_event_contract import contract


@sl.tool
def echo(text: str) -> str:
    """Echo text back."""
    return text


def _reply(kind: str, n: int) -> Any:
    if kind == "answer":
        return Reply.stream(stream_of(f"answer {n}"))
    if kind == "call":
        return Reply.stream(
            stream_of(tool_calls=[{"id": f"c{n}", "name": "echo", "arguments": {"text": "x"}}])
        )
    if kind == "refused":
        return Reply.json({"error": {"message": "bad", "type": "invalid_request_error"}}, 400)
    if kind == "broken":
        return Reply.stream(text_chunks(["part ", "of it"]), disconnect_after=2)
    return Reply.json({"error": {"message": "busy"}}, 503)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer.in_thread() as running:
        yield running


SCRIPTS = st.lists(st.sampled_from(["answer", "call", "refused", "broken", "busy"]), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=SCRIPTS, prompts=st.integers(min_value=1, max_value=3))
def test_any_script_keeps_the_contract_and_the_listeners_transcript(
    server: ScriptedServer, script: list[str], prompts: int
) -> None:
    async def main() -> None:
        server._script.clear()
        server.enqueue(*(_reply(kind, n) for n, kind in enumerate(script)))
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            tools=[echo],
            policy=sl.LoopPolicy(retry=sl.RetryPolicy(max_retries=0, base_delay_s=0.0, loading_timeout_s=0)),
        )
        runs: list[list[Event]] = []
        agent.subscribe(lambda e: runs.append([e]) if e.type == "agent_start" else runs[-1].append(e))
        for n in range(prompts):
            try:
                await agent.prompt(f"question {n}")
            except sl.RunError as stop:
                assert stop.messages == agent.state.messages
        built: list[sl.Message] = []
        for events in runs:
            built += contract(events)
        assert built == agent.state.messages
        await aclose_clients()

    asyncio.run(main())


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_SCHEMAS = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null", 5]),
            "minimum": st.integers() | st.floats(),
            "maxLength": st.integers(),
            "enum": st.lists(_JSON, max_size=3),
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "properties": st.dictionaries(st.text(max_size=5), inner, max_size=3),
            "required": st.lists(st.text(max_size=5), max_size=3) | st.integers(),
            "items": inner | st.just(3),
            "additionalProperties": st.booleans(),
            "anyOf": st.lists(inner, max_size=3),
        },
    ),
    max_leaves=10,
)


@given(
    text=st.text(max_size=300)
    | _JSON.map(json.dumps)
    | st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    schema=_SCHEMAS,
)
def test_read_structured_answers_or_names_the_problem(text: str, schema: dict[str, Any]) -> None:
    try:
        read_structured(text, schema)
    except OutputMismatch as problem:
        assert str(problem)


@given(value=_JSON)
def test_any_json_fits_the_empty_schema(value: Any) -> None:
    assert read_structured(json.dumps(value), {}) == value


@given(text=st.text(max_size=300) | _JSON.map(json.dumps))
def test_a_stored_context_state_is_read_or_refused_typed(text: str) -> None:
    state = ContextState()
    with contextlib.suppress(sl.InvalidInput):
        state.restore(text, [sl.UserMessage(content="a")])


@given(
    kinds=st.lists(st.sampled_from(["user", "assistant"]), min_size=2, max_size=12),
    data=st.data(),
)
def test_request_index_finds_every_kept_message_under_either_placement(kinds: list[str], data: Any) -> None:
    messages: list[sl.Message] = [
        sl.UserMessage(content=f"u{i}") if k == "user" else sl.AssistantMessage(content=f"a{i}")
        for i, k in enumerate(kinds)
    ]
    users = [i for i, m in enumerate(messages) if isinstance(m, sl.UserMessage) and i > 0]
    if not users:
        return
    through = data.draw(st.sampled_from(users))
    fold = Fold(summary="notes", through=through, at=0.0, folded=through)
    for placement in ("system", "user"):
        request = apply_compaction(messages, fold, placement=placement)  # type: ignore[arg-type]
        for index in range(through + 1, len(messages)):
            where = request_index(index, fold, placement=placement)  # type: ignore[arg-type]
            assert where is not None and request[where] == messages[index]
        assert sum(isinstance(m, sl.SystemMessage) for m in request) == (placement == "system")


def test_the_message_end_events_are_the_same_objects_as_the_state() -> None:
    # Not a property: a reminder that state.messages grows only from MessageEnd, by identity.
    async def main() -> None:
        async with ScriptedServer(Reply.stream(stream_of("hi"))) as server:
            agent = sl.Agent(sl.Endpoint(server.base_url), "m")
            ends: list[Any] = []
            agent.subscribe(lambda e: ends.append(e.message) if isinstance(e, MessageEnd) else None)
            await agent.prompt("hello")
        assert all(a is b for a, b in zip(ends, agent.state.messages, strict=True))
        await aclose_clients()

    asyncio.run(main())
