"""The Agent's stable prefix against the scripted server: every request starts with the bytes of the one
before it (hook context and the kept fold included), a new system prompt or tool set takes effect on the
next request as a told new version (a removed tool never runs again), and a rewrite of what was sent is
told, or refused, before anything is sent."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.context import StablePrefix
from steadyloop.context.folding import SUMMARY_PROMPT
from steadyloop.events import Event, MessageEnd, Notice, PrefixRewritten
from steadyloop.hooks import HookContext, HookOutcome
from steadyloop.loop import LifecycleHooks
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import RecordedRequest, ScriptedServer


@sl.tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: where it is.
    """
    return f"contents of {path}: " + "lorem ipsum " * 20


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def call(path: str, id: str) -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": "read_file", "arguments": {"path": path}}]))


def main_bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [r.json for r in server.chat_requests if not is_summary(r)]


def is_summary(request: RecordedRequest) -> bool:
    return bool(request.json["messages"][0]["content"] == SUMMARY_PROMPT)


def assert_each_extends_the_last(bodies: Sequence[dict[str, Any]]) -> None:
    for before, after in itertools.pairwise(bodies):
        assert after.get("tools") == before.get("tools")
        kept = after["messages"][: len(before["messages"])]
        assert kept == before["messages"], "a request rewrote what the one before it sent"


def hooks_saying(*texts: str) -> LifecycleHooks:
    said = iter(texts)

    async def runner(event: Any, context: HookContext, *, cancel: Any = None) -> list[HookOutcome]:
        if event == "before_turn":
            return [HookOutcome(hook_id="memory", text=next(said))]
        return []

    return LifecycleHooks(run=runner, preface="Background:")


async def test_every_request_across_prompts_starts_with_the_bytes_of_the_one_before() -> None:
    replies = [call("a.txt", "c1"), answer("A read."), call("b.txt", "c2"), answer("B read."), answer("Bye.")]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            system="Be brief.",
            tools=[read_file],
            lifecycle=hooks_saying("It is Monday.", "It is Tuesday.", "It is Wednesday."),
        )
        events: list[Event] = []
        agent.subscribe(events.append)
        for question in ("Read a.txt", "Read b.txt", "Thanks"):
            await agent.prompt(question)
        bodies = main_bodies(server)
    assert len(bodies) == 5
    assert_each_extends_the_last(bodies)
    # The first question is sent with the context it was first sent with, in every later prompt too.
    first = bodies[-1]["messages"][1]["content"]
    assert first.startswith("Background:") and "Monday" in first and first.endswith("Read a.txt")
    assert "Wednesday" in bodies[-1]["messages"][-1]["content"]
    # What the user typed is what the transcript keeps.
    assert agent.state.messages[0] == sl.UserMessage(content="Read a.txt")
    assert not any(isinstance(e, PrefixRewritten) for e in events)


@sl.tool
def write_file(path: str) -> str:
    """Write a file.

    Args:
        path: where it goes.
    """
    WRITES.append(path)
    return f"wrote {path}"


WRITES: list[str] = []  # what write_file's body did: a removed tool must leave it empty


def calls(*named: tuple[str, str, dict[str, Any]]) -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": i, "name": n, "arguments": a} for i, n, a in named]))


def declared(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def results(agent: sl.Agent) -> list[tuple[str, str]]:
    return [
        (str(m.name), str(m.content)) for m in agent.state.messages if isinstance(m, sl.ToolResultMessage)
    ]


async def test_a_new_system_prompt_or_tool_set_takes_effect_on_the_next_request_as_a_new_version() -> None:
    async with ScriptedServer(answer("1"), answer("2"), answer("3"), answer("4")) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url), "m", system="Old prompt.", tools=[read_file, write_file]
        )
        notices: list[str] = []
        agent.subscribe(
            lambda e: notices.append(e.text) if isinstance(e, Notice) and e.name == "prefix" else None
        )
        await agent.prompt("one")
        fingerprint = agent.prefix.fingerprint
        agent.state.system_prompt = "New prompt."
        agent.state.tools = [read_file]
        await agent.prompt("two")
        await agent.prompt("three")  # nothing changed: the same version, and the cache's bytes held
        agent.prefix.invalidate("the model changed")
        await agent.prompt("four")
        bodies = main_bodies(server)
    assert [b["messages"][0]["content"] for b in bodies] == [
        "Old prompt.",
        "New prompt.",
        "New prompt.",
        "New prompt.",
    ]
    assert [declared(b) for b in bodies] == [
        ["read_file", "write_file"],
        ["read_file"],
        ["read_file"],
        ["read_file"],
    ]
    assert notices == [
        "the stable prefix was rebuilt as version 2: the system prompt changed; tools removed: write_file",
        "the stable prefix was rebuilt as version 3: the model changed",
    ]
    assert_each_extends_the_last(bodies[1:3])
    assert agent.prefix.version == 3 and agent.prefix.fingerprint != fingerprint


async def test_a_removed_tool_the_model_still_calls_is_an_unknown_tool_and_never_runs() -> None:
    WRITES.clear()
    replies = [answer("Hello."), calls(("c1", "write_file", {"path": "x.txt"})), answer("It is gone.")]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[read_file, write_file])
        await agent.prompt("hi")
        agent.state.tools = [read_file]
        await agent.prompt("write x.txt")
    assert WRITES == []
    # The same answer the loop gives a name it was never given.
    assert results(agent) == [("write_file", "Unknown tool 'write_file'. Available tools: read_file.")]


async def test_a_call_recovered_from_text_is_checked_against_the_tools_in_force_when_it_runs() -> None:
    WRITES.clear()
    written = '<tool_call>{"name": "write_file", "arguments": {"path": "x.txt"}}</tool_call>'
    async with ScriptedServer(answer(written), answer("It is gone.")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[read_file, write_file])

        def revoke(event: Event) -> None:
            # The host takes the tool away as the message that wrote the call ends, before calls start.
            if isinstance(event, MessageEnd) and isinstance(event.message, sl.AssistantMessage):
                agent.state.tools = [read_file]

        agent.subscribe(revoke)
        await agent.prompt("write x.txt")
        bodies = main_bodies(server)
    assert WRITES == []
    assert results(agent) == [("write_file", "Unknown tool 'write_file'. Available tools: read_file.")]
    assert declared(bodies[1]) == ["read_file"]  # the run's next request already declares the new set


async def test_a_change_during_a_batch_stops_the_calls_not_yet_run() -> None:
    WRITES.clear()
    agent: sl.Agent

    @sl.tool(sequential=True)
    def lock_down() -> str:
        """Take write access away."""
        agent.state.tools = [read_file, lock_down]
        return "locked"

    batch = calls(("c1", "lock_down", {}), ("c2", "write_file", {"path": "x.txt"}))
    async with ScriptedServer(batch, answer("Locked.")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", tools=[read_file, write_file, lock_down])
        await agent.prompt("lock down, then write x.txt")
    assert WRITES == []
    assert results(agent) == [
        ("lock_down", "locked"),
        ("write_file", "Unknown tool 'write_file'. Available tools: lock_down, read_file."),
    ]


def rewrite_the_first_question(messages: list[Any]) -> list[Any]:
    if len(messages) < 3:
        return messages
    return [sl.UserMessage(content="Edited after the fact."), *messages[1:]]


async def test_an_in_place_rewrite_is_told_with_its_index_before_the_request_is_sent() -> None:
    async def transform(messages: list[Any]) -> list[Any]:
        return rewrite_the_first_question(messages)

    async with ScriptedServer(answer("First."), answer("Second.")) as server:
        agent = sl.Agent(sl.Endpoint(server.base_url), "m", system="s", transform_context=transform)
        events: list[Event] = []
        agent.subscribe(events.append)
        await agent.prompt("Original question")
        await agent.prompt("Follow-up")
    told = [e for e in events if isinstance(e, PrefixRewritten)]
    assert [(e.index, e.role, e.step) for e in told] == [(0, "user", 1)]
    notice = next(e for e in events if isinstance(e, Notice) and e.name == "prefix")
    assert notice.seq == told[0].seq + 1 and "message 0 (user)" in notice.text


async def test_a_strict_prefix_refuses_the_rewrite_and_sends_nothing() -> None:
    async def transform(messages: list[Any]) -> list[Any]:
        return rewrite_the_first_question(messages)

    async with ScriptedServer(answer("First."), answer("never sent")) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            transform_context=transform,
            prefix=StablePrefix(on_rewrite="raise"),
        )
        await agent.prompt("Original question")
        with pytest.raises(sl.TranscriptRewritten) as caught:
            await agent.prompt("Follow-up")
        assert len(server.chat_requests) == 1
    assert caught.value.index == 0 and caught.value.reason == "rewritten"
    assert isinstance(caught.value, sl.RunError)
    assert caught.value.messages[-1] == sl.UserMessage(content="Follow-up")


def long_history(results: int, size: int) -> list[sl.Message]:
    history: list[sl.Message] = [sl.UserMessage(content="Read the logs one by one.")]
    for n in range(results):
        history.append(sl.AssistantMessage(tool_calls=(sl.ToolCall(f"r{n}", "read_file", {"path": str(n)}),)))
        history.append(sl.ToolResultMessage(call_id=f"r{n}", content="x" * size, name="read_file"))
        history.append(sl.AssistantMessage(content=f"Noted log {n}."))
        history.append(sl.UserMessage(content=f"Next one please ({n})."))
    return history


async def test_the_kept_fold_is_the_one_sanctioned_rewrite() -> None:
    replies = [
        answer("Notes: logs 0-6 read."),
        call("7.txt", "c7"),
        answer("Seven read."),
        answer("Done."),
    ]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            system="Be brief.",
            tools=[read_file],
            messages=long_history(8, 2000),
            policy=sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy()),
            lifecycle=hooks_saying("Logs are in /var/log.", "Still in /var/log."),
            prefix=StablePrefix(on_rewrite="raise"),
        )
        await agent.prompt("Read log 7")
        await agent.prompt("And now?")
        summaries = [r for r in server.chat_requests if is_summary(r)]
        bodies = main_bodies(server)
    assert len(summaries) == 1 and len(bodies) == 3
    assert bodies[0]["messages"][1]["content"].startswith("[")  # the fold's summary leads the kept tail
    assert_each_extends_the_last(bodies)
