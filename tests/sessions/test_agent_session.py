"""An Agent bound to a session: history loaded, each message kept as it ends, events in emission order,
usage, the fold and the capability snapshot kept, storage failures kept out of the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.context.folding import SUMMARY_PROMPT
from steadyloop.events import AgentEnd, MessageEnd, MessageStart, MessageUpdate
from steadyloop.sessions import AgentSession, InMemorySessionStore, SQLiteSessionStore
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn.capabilities import model_capabilities_for, reset_capabilities

A = "agent-1"


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def call(name: str, arguments: dict[str, Any], id: str = "c1") -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": name, "arguments": arguments}]))


def long_history(results: int, size: int) -> list[sl.Message]:
    history: list[sl.Message] = [sl.UserMessage(content="Read the logs one by one.")]
    for n in range(results):
        history.append(sl.AssistantMessage(tool_calls=(sl.ToolCall(f"r{n}", "read_log", {"n": n}),)))
        history.append(sl.ToolResultMessage(call_id=f"r{n}", content="x" * size, name="read_log"))
        history.append(sl.AssistantMessage(content=f"Noted log {n}."))
        history.append(sl.UserMessage(content=f"Next one please ({n})."))
    return history


async def test_each_message_is_in_the_store_as_it_ends(tmp_path: Path) -> None:
    seen_by_tool: list[list[sl.Message]] = []

    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        session = await store.session(agent_id=A)

        @sl.tool
        async def look() -> str:
            """Look at the store while the call runs."""
            seen_by_tool.append(await store.load_messages(session.session_id, agent_id=A))
            return "looked"

        async with ScriptedServer(call("look", {}), answer("done")) as server:
            agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[look], session=session)
            await agent.prompt("Look, then answer.\nSecond line.")
        stored = await store.load_messages(session.session_id, agent_id=A)
        info = await store.get(session.session_id, agent_id=A)
    # While the tool ran, the user's message and the call that asked for it were already stored.
    kinds = [type(m).__name__ for m in seen_by_tool[0]]
    assert kinds == ["UserMessage", "AssistantMessage"]
    assert stored == agent.state.messages
    assert info is not None and info.title == "Look, then answer." and info.usage.runs == 1
    assert info.usage.turns == 2


async def test_the_record_keeps_emission_order_and_each_events_run_seq() -> None:
    store = InMemorySessionStore()
    session = await store.session(agent_id=A)
    async with ScriptedServer(answer("Hello there."), answer("Again.")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", session=session)
        await agent.prompt("hi")
        await agent.prompt("once more")
    exported = await store.export_jsonl(session.session_id, agent_id=A)
    lines = [json.loads(line) for line in exported.splitlines()]
    events = [(line["seq"], line["event"]) for line in lines if line["kind"] == "event"]
    assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
    runs: dict[str, list[dict[str, Any]]] = {}
    for _, event in events:
        runs.setdefault(event["run_id"], []).append(event)
    assert len(runs) == 2
    for run in runs.values():
        seqs = [e["seq"] for e in run]
        assert seqs == sorted(seqs) and seqs[0] == 1  # each run's own numbering, in emission order
        types = [e["type"] for e in run]
        update = types.index("message_update")
        assert types[update - 1] == "message_start" and types[update + 1] == "message_end"
    loaded = await store.load_events(session.session_id, agent_id=A)
    assert isinstance(loaded[-1][1], AgentEnd)
    assert any(isinstance(e, MessageUpdate) and e.delta == "Hello there." for _, e in loaded)


async def test_a_reopened_session_keeps_its_history_and_its_fold(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    policy = sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy())
    replies = [answer("Notes: logs read."), answer("First."), answer("Second.")]
    async with ScriptedServer(*replies) as server:
        endpoint = sl.Endpoint(server.base_url)
        async with SQLiteSessionStore(path) as store:
            session = await store.session(agent_id=A)
            agent = sl.Agent(endpoint, "m", messages=long_history(8, 2000), policy=policy, session=session)
            await agent.prompt("first?")
            sid = session.session_id
        assert sum(r.json["messages"][0]["content"] == SUMMARY_PROMPT for r in server.chat_requests) == 1
        async with SQLiteSessionStore(path) as store:  # a new process, as far as the store knows
            again = await store.session(sid, agent_id=A)
            assert again.context.fold is not None
            agent = sl.Agent(endpoint, "m", policy=policy, session=again)
            assert len(agent.state.messages) == 8 * 4 + 1 + 2
            await agent.prompt("second?")
        summaries = [r for r in server.chat_requests if r.json["messages"][0]["content"] == SUMMARY_PROMPT]
        first, second = (r.json["messages"] for r in server.chat_requests if r not in summaries)
    assert len(summaries) == 1, "the stored fold is reused after a restart"
    assert second[: len(first)] == first


async def test_the_history_is_loaded_with_a_cap() -> None:
    store = InMemorySessionStore()
    info = await store.create(A)
    messages: list[sl.Message] = []
    for n in range(10):
        messages += [sl.UserMessage(content=f"q{n}"), sl.AssistantMessage(content=f"a{n}")]
    await store.append_messages(info.session_id, messages, agent_id=A)
    session = await store.session(info.session_id, agent_id=A, history_limit=5)
    assert [m.content for m in session.messages] == ["a7", "q8", "a8", "q9", "a9"]


class FlakyStore(InMemorySessionStore):
    """Refuses its first message write, as a full disk or a locked file would."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1

    async def append_messages(self, session_id: str, messages: Any, *, agent_id: str) -> None:
        if self.refusals:
            self.refusals -= 1
            raise OSError("disk full")
        await super().append_messages(session_id, messages, agent_id=agent_id)


async def test_a_storage_failure_stays_out_of_the_run_and_nothing_is_lost() -> None:
    store = FlakyStore()
    told: list[str] = []
    session = await store.session(agent_id=A, on_failure=told.append)
    async with ScriptedServer(answer("Still answered.")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", session=session)
        turn = await agent.prompt("hello")
    assert turn.content == "Still answered."
    assert told and "disk full" in told[0] and session.failures == told
    # The message the failed write held was written with the next one.
    assert await store.load_messages(session.session_id, agent_id=A) == agent.state.messages


async def test_the_capability_snapshot_is_kept_with_the_session() -> None:
    refusal = Reply.json(
        {
            "error": {
                "message": "Unsupported value: 'temperature' does not support 0.2 with this model. "
                "Only the default (1) value is supported.",
                "type": "invalid_request_error",
                "param": "temperature",
            }
        },
        400,
    )
    store = InMemorySessionStore()
    async with ScriptedServer(refusal, answer("ok"), answer("again")) as server:
        endpoint = sl.Endpoint(server.base_url)
        session = await store.session(agent_id=A)
        agent = sl.Agent(endpoint, sl.ModelParams(model="m", temperature=0.2), session=session)
        await agent.prompt("hi")
        assert model_capabilities_for(endpoint, "m").chosen_temperature is False  # latched: it picks its own
        reset_capabilities()  # a new process knows nothing
        assert model_capabilities_for(endpoint, "m").chosen_temperature is True
        again = await store.session(session.session_id, agent_id=A)
        assert model_capabilities_for(endpoint, "m").chosen_temperature is False
        agent = sl.Agent(endpoint, sl.ModelParams(model="m", temperature=0.2), session=again)
        await agent.prompt("hi again")
        last = server.chat_requests[-1].json
    assert "temperature" not in last and len(server.chat_requests) == 3


async def test_opening_a_missing_session_is_refused() -> None:
    with pytest.raises(sl.InvalidInput, match="no session"):
        await InMemorySessionStore().session("ses_missing", agent_id=A)


async def test_an_agent_session_takes_the_events_of_steering_and_corrections() -> None:
    store = InMemorySessionStore()
    session = await store.session(agent_id=A)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    params = sl.ModelParams(
        model="m", response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    )
    async with ScriptedServer(answer('{"n": "one"}'), answer('{"n": 1}')) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), params, session=session)
        seen: list[sl.Message] = []
        agent.subscribe(lambda e: seen.append(e.message) if isinstance(e, MessageEnd) else None)
        await agent.prompt("a number")
    stored = await store.load_messages(session.session_id, agent_id=A)
    assert stored == seen == agent.state.messages and len(stored) == 4
    assert agent.last_result is not None and agent.last_result.output == {"n": 1}
    assert MessageStart is not None  # the record holds them in order (see above)


def test_an_agent_session_needs_a_valid_agent_id() -> None:
    with pytest.raises(sl.InvalidInput):
        AgentSession(InMemorySessionStore(), agent_id="not valid!")
