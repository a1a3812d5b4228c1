"""run_agent_loop against the scripted server: steps, events, transcript, recovery, stops."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from steadyloop.errors import RunCancelled, RunError
from steadyloop.events import AgentEnd, Event, Notice, ToolExecutionEnd, UsageReport
from steadyloop.loop import LoopPolicy, run_agent_loop, stream_agent_loop
from steadyloop.messages import AssistantMessage, ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of, text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint

FAST = LoopPolicy(retry=RetryPolicy(base_delay_s=0.01, max_retries=1))
QUESTION = [UserMessage(content="What is the weather in Paris?")]


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18C, clear"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def call(name: str, arguments: dict[str, Any], id: str = "c1") -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": name, "arguments": arguments}]))


def answer(text: str, **usage: Any) -> Any:
    return Reply.stream(stream_of(text, usage=usage_chunk(**usage) if usage else None))


async def loop(server: ScriptedServer, **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    options.setdefault("messages", QUESTION)
    options.setdefault("tools", [get_weather, add])
    options.setdefault("policy", FAST)
    result = await run_agent_loop(
        Endpoint(server.base_url), ModelParams(model="m"), on_event=events.append, **options
    )
    return result, events


async def test_one_step_without_tools_and_the_event_order() -> None:
    async with ScriptedServer(answer("Hello!")) as server:
        result, events = await loop(server, tools=[])
    assert result.turn.content == "Hello!" and result.steps == 1
    assert [e.type for e in events if e.type != "message_update"] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "request_sent",
        "message_start",
        "message_end",
        "usage",
        "turn_end",
        "agent_end",
    ]
    assert all(e.run_id for e in events)


async def test_a_tool_step_then_an_answer() -> None:
    async with ScriptedServer(call("get_weather", {"city": "Paris"}), answer("It is 18C.")) as server:
        result, events = await loop(server, system="Be brief.")
        second = server.chat_requests[1].json
    assert result.turn.content == "It is 18C." and result.steps == 2
    kinds = [type(m).__name__ for m in result.messages]
    assert kinds == ["UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage"]
    assert second["messages"][0] == {"role": "system", "content": "Be brief."}
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "Paris: 18C, clear"}
    assert [t["function"]["name"] for t in second["tools"]] == ["add", "get_weather"]  # by name
    order = [e.type for e in events if e.type not in ("message_update",)]
    assert order.index("tool_execution_start") < order.index("tool_execution_end") < order.index("turn_end")
    assert sum(isinstance(e, UsageReport) for e in events) == 2


async def test_the_given_messages_are_never_mutated() -> None:
    given = list(QUESTION)
    async with ScriptedServer(call("get_weather", {"city": "Paris"}), answer("ok")) as server:
        await loop(server, messages=given)
    assert given == QUESTION


async def test_the_tool_budget_stops_the_run_with_a_balanced_transcript() -> None:
    replies = [call("add", {"a": 1, "b": n}, id=f"c{n}") for n in range(3)]
    async with ScriptedServer(*replies) as server:
        with pytest.raises(RunError) as caught:
            await loop(server, policy=LoopPolicy(max_tool_iterations=2))
    stop = caught.value
    assert stop.reason == "max_iterations" and stop.steps == 2
    assert isinstance(stop.messages[-1], ToolResultMessage)


async def test_a_call_written_as_text_is_recovered_with_a_notice() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    async with ScriptedServer(answer(text), answer("Cold.")) as server:
        result, events = await loop(server)
    assistant = result.messages[1]
    assert isinstance(assistant, AssistantMessage) and assistant.tool_calls[0].id == "call_recovered_0"
    assert result.messages[2] == ToolResultMessage(
        call_id="call_recovered_0", content="Oslo: 18C, clear", name="get_weather", disposition="completed"
    )
    assert any(isinstance(e, Notice) and e.name == "recovery" for e in events)


async def test_recovery_can_be_turned_off() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    async with ScriptedServer(answer(text)) as server:
        result, _ = await loop(server, policy=LoopPolicy(recover_tool_calls=False))
    assert result.steps == 1 and "tool_call" in result.turn.content


async def test_a_cut_off_answer_is_continued() -> None:
    cut = Reply.stream(text_chunks("The answer begins here and", finish="length"))
    async with ScriptedServer(cut, answer(" ends here.")) as server:
        result, events = await loop(server, tools=[], policy=LoopPolicy(max_continuations=1))
        prefill = server.chat_requests[1].json["messages"][-1]
    assert result.turn.content == "The answer begins here and ends here."
    assert prefill == {"role": "assistant", "content": "The answer begins here and"}
    assert any(isinstance(e, Notice) and e.name == "length" for e in events)


async def test_reasoning_is_replayed_for_families_that_read_it_back() -> None:
    thinking = Reply.stream(
        stream_of(
            reasoning="I should check.",
            tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}],
        )
    )
    async with ScriptedServer(thinking, answer("3")) as server:
        await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="gpt-oss-20b"),
            messages=QUESTION,
            tools=[add],
            policy=FAST,
        )
        replayed = server.chat_requests[1].json["messages"][1]
    assert replayed["reasoning_content"] == "I should check."
    async with ScriptedServer(thinking, answer("3")) as server:
        await run_agent_loop(
            Endpoint(server.base_url), ModelParams(model="qwen"), messages=QUESTION, tools=[add], policy=FAST
        )
        assert "reasoning_content" not in server.chat_requests[1].json["messages"][1]


async def test_extra_body_is_merged_last_but_never_over_the_loops_fields() -> None:
    params = ModelParams(
        model="m", extra_body={"model": "evil", "top_k": 20, "messages": [], "stream": False}
    )
    async with ScriptedServer(answer("ok")) as server:
        await run_agent_loop(Endpoint(server.base_url), params, messages=QUESTION, policy=FAST)
        sent = server.chat_requests[0].json
    assert sent["model"] == "m" and sent["top_k"] == 20 and sent["stream"] is True and sent["messages"]


async def test_cancel_mid_stream_keeps_what_was_shown_and_ends_with_agent_end() -> None:
    cancel = asyncio.Event()
    reply = Reply.stream(text_chunks(["Partial ", "answer", " never finished"]), stall_after=3)
    async with ScriptedServer(reply) as server:
        events: list[Event] = []

        def on_event(event: Event) -> None:
            events.append(event)
            if event.type == "message_update":
                cancel.set()

        with pytest.raises(RunCancelled) as caught:
            await run_agent_loop(
                Endpoint(server.base_url),
                ModelParams(model="m"),
                messages=QUESTION,
                cancel=cancel,
                on_event=on_event,
            )
    assert isinstance(caught.value.messages[-1], AssistantMessage)
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.outcome == "cancelled"


async def test_an_endpoint_failure_is_a_run_error_with_the_transcript() -> None:
    refusal = Reply.json({"error": {"message": "invalid model", "type": "invalid_request_error"}}, 404)
    async with ScriptedServer(call("add", {"a": 1, "b": 1}), refusal) as server:
        with pytest.raises(RunError) as caught:
            await loop(server)
    assert caught.value.reason == "endpoint" and len(caught.value.messages) == 3 and caught.value.steps == 1


async def test_call_ids_reused_across_turns_are_made_unique() -> None:
    async with ScriptedServer(
        call("add", {"a": 1, "b": 1}, id="call_0"), call("add", {"a": 2, "b": 2}, id="call_0"), answer("done")
    ) as server:
        result, _ = await loop(server)
    ids = [c.id for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 2


async def test_before_step_can_replace_the_transcript_and_cache_breaks_are_explained() -> None:
    async def rewrite(messages: list[Any], step: int) -> list[Any] | None:
        if step == 2:
            return [UserMessage(content="(summary) asked for weather"), *messages[1:]]
        return None

    async with ScriptedServer(
        Reply.stream(
            stream_of(
                tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 1}}],
                usage=usage_chunk(100, 10, cached=0),
            )
        ),
        Reply.stream(stream_of("2", usage=usage_chunk(130, 2, cached=5))),
    ) as server:
        _, events = await loop(server, before_step=rewrite)
        assert server.chat_requests[1].json["messages"][0]["content"].startswith("(summary)")
    report = [e for e in events if isinstance(e, UsageReport)][1]
    assert (
        report.cache_expected == 110
        and report.cache_broken is True
        and report.cache_break_reason == "history-rewritten"
    )


async def test_unchanged_prefix_is_a_cache_hit_not_a_break() -> None:
    async with ScriptedServer(
        Reply.stream(
            stream_of(
                tool_calls=[{"id": "c1", "name": "add", "arguments": {"a": 1, "b": 1}}],
                usage=usage_chunk(100, 10, cached=0),
            )
        ),
        Reply.stream(stream_of("2", usage=usage_chunk(130, 2, cached=100))),
    ) as server:
        result, events = await loop(server)
    report = [e for e in events if isinstance(e, UsageReport)][1]
    assert report.cache_broken is False and report.cache_break_reason is None
    assert result.metrics.cache_breaks == 0


async def test_tool_errors_reach_the_model() -> None:
    async with ScriptedServer(call("nope", {}), answer("sorry")) as server:
        result, events = await loop(server)
    failed = result.messages[2]
    assert isinstance(failed, ToolResultMessage) and failed.is_error and "get_weather" in str(failed.content)
    assert any(isinstance(e, ToolExecutionEnd) and e.disposition == "failed" for e in events)


# -- keeping inside the window ----------------------------------------------------------------------


def _long_history(results: int, size: int) -> list[Any]:
    from steadyloop.messages import ToolCall

    history: list[Any] = [UserMessage(content="Read the logs one by one.")]
    for n in range(results):
        history.append(AssistantMessage(tool_calls=(ToolCall(f"r{n}", "get_weather", {"city": f"c{n}"}),)))
        history.append(ToolResultMessage(call_id=f"r{n}", content="x" * size, name="get_weather"))
        history.append(AssistantMessage(content=f"Noted log {n}."))
        history.append(UserMessage(content=f"Next one please ({n})."))
    return history


async def test_an_overflow_is_recovered_by_pruning_and_folding_then_sent_once_more() -> None:
    from steadyloop.context.keeper import ContextPolicy
    from steadyloop.events import ContextCompacted, ContextPruned

    summaries: list[str] = []

    async def summarise(text: str) -> str:
        summaries.append(text)
        return "Read logs 0-5; nothing unusual."

    history = _long_history(8, 2000)
    # The window is big enough by our estimate, so only the server's refusal can trigger the fold.
    policy = LoopPolicy(context_limit=100_000, context=ContextPolicy(summarise=summarise))
    overflow = Reply.json(
        {
            "error": {
                "code": 400,
                "message": "request (9000 tokens) exceeds the available context size (4096 tokens)",
                "type": "exceed_context_size_error",
            }
        },
        status=400,
    )
    async with ScriptedServer(overflow, answer("Done.")) as server:
        result, events = await loop(server, messages=history, tools=[get_weather], policy=policy)
        first, second = (r.json["messages"] for r in server.chat_requests)
    assert result.turn.content == "Done."
    assert any(isinstance(e, ContextPruned) for e in events)
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert compacted and compacted[0].forced and compacted[0].tokens_after < compacted[0].tokens_before
    assert summaries and any("nothing unusual" in str(m.get("content")) for m in second)
    assert len(str(second)) < len(str(first)) / 3


async def test_a_planned_fold_happens_at_three_quarters_before_sending() -> None:
    from steadyloop.context.keeper import ContextPolicy
    from steadyloop.events import ContextCompacted

    async def summarise(text: str) -> str:
        return "Earlier: logs read."

    history = _long_history(8, 2000)
    policy = LoopPolicy(context_limit=3000, context=ContextPolicy(summarise=summarise))
    async with ScriptedServer(answer("Done.")) as server:
        result, events = await loop(server, messages=history, tools=[get_weather], policy=policy)
        assert len(server.chat_requests) == 1
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert result.turn.content == "Done." and compacted and not compacted[0].forced


async def test_without_context_management_the_same_run_is_refused() -> None:
    history = _long_history(8, 2000)
    async with ScriptedServer(answer("Done.")) as server:
        with pytest.raises(RunError) as caught:
            await loop(server, messages=history, tools=[get_weather], policy=LoopPolicy(context_limit=3000))
        assert server.chat_requests == []
    assert caught.value.reason == "overflow"


async def test_steps_that_need_no_fold_leave_the_prefix_byte_identical() -> None:
    from steadyloop.context.keeper import ContextPolicy

    policy = LoopPolicy(context_limit=100_000, context=ContextPolicy())
    async with ScriptedServer(
        call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}, id="c2"), answer("7")
    ) as server:
        await loop(server, policy=policy)
        bodies = [r.body for r in server.chat_requests]
        wires = [r.json["messages"] for r in server.chat_requests]
    for earlier, later in itertools.pairwise(wires):
        assert later[: len(earlier)] == earlier
    import json as _json

    for earlier, later in itertools.pairwise(bodies):
        head = _json.dumps(_json.loads(earlier)["messages"])[:-1]
        assert _json.dumps(_json.loads(later)["messages"]).startswith(head)


async def test_tools_load_on_demand_and_the_system_prompt_stays_identical() -> None:
    from steadyloop.tools.loading import catalog_of

    replies = [
        call("load_tools", {"names": ["get_weather"]}, id="l1"),
        call("get_weather", {"city": "Rome"}, id="w1"),
        call("add", {"a": 2, "b": 2}, id="a1"),  # catalogued but never loaded: loaded and run
        answer("Rome is sunny; 4."),
    ]
    async with ScriptedServer(*replies) as server:
        result, _ = await loop(
            server,
            system="Be brief.",
            policy=LoopPolicy(tool_discovery="ondemand"),
            catalog=catalog_of([get_weather, add]),
        )
        bodies = [r.json for r in server.chat_requests]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 1 and "get_weather" in systems.pop()
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["load_tools"]
    assert [t["function"]["name"] for t in bodies[1]["tools"]] == ["get_weather", "load_tools"]
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert results[1].content == "Rome: 18C, clear" and results[2].content == "4"
    assert set(result.loaded) >= {"get_weather", "add"}


async def test_a_memory_flush_runs_silently_before_a_planned_fold() -> None:
    from steadyloop.context.keeper import ContextPolicy

    saved: list[str] = []

    @tool
    def save_note(text: str) -> str:
        """Save a note to long-term memory."""
        saved.append(text)
        return "saved"

    async def summarise(text: str) -> str:
        return "Earlier: logs read."

    history = _long_history(8, 2000)
    policy = LoopPolicy(
        context_limit=3000, context=ContextPolicy(summarise=summarise, memory_tools=[save_note])
    )
    replies = [
        call("save_note", {"text": "logs 0-7 were fine"}, id="m1"),
        answer("Nothing more."),
        answer("Done."),
    ]
    async with ScriptedServer(*replies) as server:
        result, events = await loop(server, messages=history, tools=[get_weather], policy=policy)
        flush_tools = [t["function"]["name"] for t in server.chat_requests[0].json["tools"]]
        main_tools = [t["function"]["name"] for t in server.chat_requests[2].json["tools"]]
    assert saved == ["logs 0-7 were fine"] and flush_tools == ["save_note"] and main_tools == ["get_weather"]
    assert result.turn.content == "Done."
    assert not any(isinstance(m, ToolResultMessage) and m.content == "saved" for m in result.messages)
    assert not any(e.type == "tool_execution_start" and e.name == "save_note" for e in events)


async def test_lifecycle_hooks_ride_on_the_question_and_hear_the_reply() -> None:
    from steadyloop.hooks import HookContext, HookOutcome
    from steadyloop.loop import LifecycleHooks

    heard: list[tuple[str, HookContext]] = []
    told = asyncio.Event()

    async def runner(event: Any, context: HookContext, *, cancel: Any = None) -> list[HookOutcome]:
        heard.append((event, context))
        if event == "after_turn":
            told.set()
        if event == "before_turn":
            return [HookOutcome(hook_id="memory", text="The user prefers Celsius.")]
        return []

    hooks = LifecycleHooks(run=runner, context=HookContext(session_id="s1"), preface="Background:")
    async with ScriptedServer(call("get_weather", {"city": "Paris"}), answer("18C.")) as server:
        result, _ = await loop(server, system="Be brief.", lifecycle=hooks)
        await asyncio.wait_for(told.wait(), 5)
        requests = [r.json["messages"] for r in server.chat_requests]
    for wire in requests:
        assert wire[0] == {"role": "system", "content": "Be brief."}
        assert wire[1]["content"].startswith("Background:") and "Celsius" in wire[1]["content"]
        assert wire[1]["content"].endswith("What is the weather in Paris?")
    assert result.messages[0] == QUESTION[0]  # the transcript keeps what the user typed
    assert [event for event, _ in heard] == ["session_start", "before_turn", "after_turn"]
    assert heard[0][1].prompt == "What is the weather in Paris?" and heard[-1][1].reply == "18C."


async def test_a_failed_summary_still_folds_and_the_event_says_so() -> None:
    from steadyloop.context.keeper import ContextPolicy
    from steadyloop.events import ContextCompacted

    async def summarise(text: str) -> str | None:
        return None

    policy = LoopPolicy(context_limit=3000, context=ContextPolicy(summarise=summarise))
    async with ScriptedServer(answer("Done.")) as server:
        result, events = await loop(
            server, messages=_long_history(8, 2000), tools=[get_weather], policy=policy
        )
        sent = str(server.chat_requests[0].json["messages"])
    compacted = [e for e in events if isinstance(e, ContextCompacted)]
    assert result.turn.content == "Done." and compacted and compacted[0].summarised is False
    assert "summary unavailable" in sent


async def test_an_unknown_keyword_is_a_type_error_and_nothing_is_sent() -> None:
    async with ScriptedServer(answer("Hello!")) as server:
        endpoint, params = Endpoint(server.base_url), ModelParams(model="m")
        with pytest.raises(TypeError, match=r"run_agent_loop\(\) .* 'sytem' \(did you mean 'system'\?\)"):
            await run_agent_loop(endpoint, params, messages=QUESTION, sytem="Be brief.")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match=r"stream_agent_loop\(\) .* 'max_turn'"):
            stream_agent_loop(endpoint, params, messages=QUESTION, max_turn=2)  # type: ignore[call-arg]
        assert server.chat_requests == []


async def test_a_head_source_is_read_before_each_request_and_each_call() -> None:
    in_force = [get_weather, add]
    ran: list[str] = []

    @tool
    def forget_add() -> str:
        """Stop adding."""
        in_force.remove(add)
        ran.append("forget_add")
        return "done"

    in_force.append(forget_add)
    replies = [call("forget_add", {}), call("add", {"a": 1, "b": 2}, id="c2"), answer("No adding.")]
    async with ScriptedServer(*replies) as server:
        result, _ = await loop(server, tools=list(in_force), head=lambda: ("Be brief.", in_force))
        bodies = [r.json for r in server.chat_requests]
    names = [[t["function"]["name"] for t in body["tools"]] for body in bodies]
    assert names[0] == ["add", "forget_add", "get_weather"] and names[1] == ["forget_add", "get_weather"]
    assert bodies[1]["messages"][0] == {"role": "system", "content": "Be brief."}
    last = [m for m in result.messages if isinstance(m, ToolResultMessage)][-1]
    assert last.content == "Unknown tool 'add'. Available tools: forget_add, get_weather."
    assert ran == ["forget_add"]
