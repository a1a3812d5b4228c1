"""The Agent that remembers its fold: one summary request per fold across prompts, the notes continued,
and the summary placed where real chat templates accept it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import jinja2
import pytest

import steadyloop as sl
from steadyloop.context import SUMMARY_LEAD
from steadyloop.context.folding import SUMMARY_PROMPT
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

TEMPLATE = Path(__file__).parent / "data" / "templates" / "one-leading-system.jinja"


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def long_history(results: int, size: int) -> list[sl.Message]:
    history: list[sl.Message] = [sl.UserMessage(content="Read the logs one by one.")]
    for n in range(results):
        call = sl.ToolCall(f"r{n}", "read_log", {"n": n})
        history.append(sl.AssistantMessage(tool_calls=(call,)))
        history.append(sl.ToolResultMessage(call_id=f"r{n}", content="x" * size, name="read_log"))
        history.append(sl.AssistantMessage(content=f"Noted log {n}."))
        history.append(sl.UserMessage(content=f"Next one please ({n})."))
    return history


def is_summary(request: RecordedRequest) -> bool:
    return bool(request.json["messages"][0]["content"] == SUMMARY_PROMPT)


def main_requests(server: ScriptedServer) -> list[list[dict[str, Any]]]:
    return [r.json["messages"] for r in server.chat_requests if not is_summary(r)]


async def test_a_long_conversation_is_folded_once_and_the_fold_is_reused_across_prompts() -> None:
    replies = [answer("Notes: logs 0-6 read, nothing unusual."), *(answer(f"Answer {n}.") for n in range(3))]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            system="Be brief.",
            messages=long_history(8, 2000),
            policy=sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy()),
        )
        for n in range(3):
            turn = await agent.prompt(f"Question {n}?")
            assert turn.content == f"Answer {n}."
        summaries = [r for r in server.chat_requests if is_summary(r)]
        wires = main_requests(server)
    assert len(summaries) == 1, "one fold, one summary request, however many prompts follow"
    # Every request after the fold starts with the one before it, byte for byte: the cache is lost once.
    for earlier, later in itertools.pairwise(wires):
        assert later[: len(earlier)] == earlier
    for wire in wires:
        assert [m["role"] for m in wire].count("system") == 1 and wire[0]["content"] == "Be brief."
        assert wire[1]["role"] == "user" and "Notes: logs 0-6 read" in wire[1]["content"]
    assert len(agent.state.messages) == 8 * 4 + 1 + 3 * 2  # the transcript itself is never folded
    assert agent.context.fold is not None and agent.context.fold.summarised


async def test_the_next_fold_continues_the_earlier_notes() -> None:
    asked: list[str] = []

    async def summarise(text: str) -> str:
        asked.append(text)
        return f"NOTES-{len(asked)}"

    async with ScriptedServer(*(answer("R" * 2500 + f" answer {n}") for n in range(4))) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            messages=long_history(8, 2000),
            policy=sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy(summarise=summarise)),
        )
        for n in range(4):
            await agent.prompt(f"Question {n}?")
        last = main_requests(server)[-1]
    assert len(asked) == 2
    assert asked[0].startswith("Conversation to summarise:")
    assert asked[1].startswith("Earlier notes, to continue:\n\nNOTES-1\n\nConversation since those notes:")
    assert "Question 0?" in asked[1] and "Read the logs one by one." not in asked[1]
    assert "NOTES-2" in last[0]["content"] and "NOTES-1" not in json.dumps(last)


def _render(messages: list[dict[str, Any]]) -> str:
    def raise_exception(text: str) -> None:
        raise jinja2.TemplateError(text)

    env = jinja2.Environment(autoescape=False)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(TEMPLATE.read_text()).render(messages=messages, add_generation_prompt=True)


@pytest.mark.parametrize("placement", ["user", "system"])
async def test_the_summary_placement_against_a_template_taking_one_leading_system_message(
    placement: str,
) -> None:
    async def summarise(text: str) -> str:
        return "Logs 0-6 read."

    context = sl.ContextPolicy(summarise=summarise, placement=placement)  # type: ignore[arg-type]
    async with ScriptedServer(answer("Done.")) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            system="Be brief.",
            messages=long_history(8, 2000),
            policy=sl.LoopPolicy(context_limit=4000, context=context),
        )
        await agent.prompt("And now?")
        wire = server.chat_requests[0].json["messages"]
    roles = [m["role"] for m in wire]
    if placement == "user":
        assert roles.count("system") == 1 and roles[:2] == ["system", "user"]
        assert wire[1]["content"].startswith(SUMMARY_LEAD) and "Logs 0-6 read." in wire[1]["content"]
        assert "<|im_start|>system\nBe brief." in _render(wire)
    else:
        assert roles[:2] == ["system", "system"]
        with pytest.raises(jinja2.TemplateError, match="System message must be at the beginning"):
            _render(wire)


async def test_an_agent_reset_forgets_its_fold() -> None:
    async def summarise(text: str) -> str:
        return "notes"

    async with ScriptedServer(answer("one"), answer("two")) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url),
            "m",
            messages=long_history(8, 2000),
            policy=sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy(summarise=summarise)),
        )
        await agent.prompt("first")
        assert agent.context.fold is not None
        agent.reset()
        await agent.prompt("fresh start")
        second = server.chat_requests[1].json["messages"]
    assert agent.context.fold is None and second == [{"role": "user", "content": "fresh start"}]


async def test_run_agent_loop_hands_its_fold_on_for_the_next_run() -> None:
    calls: list[str] = []

    async def summarise(text: str) -> str:
        calls.append(text)
        return "notes"

    policy = sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy(summarise=summarise))
    async with ScriptedServer(answer("one"), answer("two")) as server:
        endpoint, params = sl.Endpoint(server.base_url), sl.ModelParams(model="m")
        first = await sl.run_agent_loop(
            endpoint, params, messages=[*long_history(8, 2000), sl.UserMessage(content="a?")], policy=policy
        )
        assert len(first.messages) == 8 * 4 + 3  # never rewritten by the fold
        second = await sl.run_agent_loop(
            endpoint,
            params,
            messages=[*first.messages, sl.UserMessage(content="b?")],
            policy=policy,
            context=first.context,
        )
    assert len(calls) == 1 and second.turn.content == "two"


async def test_side_tasks_ask_the_api_key_resolver_like_every_other_request() -> None:
    keys = iter(f"key-{n}" for n in range(1, 100))
    resolved: list[str] = []

    def api_key() -> str:
        resolved.append(next(keys))
        return resolved[-1]

    @sl.tool
    def save_note(text: str) -> str:
        """Save a note to long-term memory."""
        return "saved"

    payloads: list[dict[str, Any]] = []
    replies = [
        Reply.stream(stream_of(tool_calls=[{"id": "m1", "name": "save_note", "arguments": {"text": "n"}}])),
        answer("Nothing more."),
        answer("Notes: logs read."),
        answer("Done."),
    ]
    async with ScriptedServer(*replies) as server:
        agent = sl.Agent(
            sl.Endpoint(server.base_url, api_key="static-key"),
            "m",
            messages=long_history(8, 2000),
            policy=sl.LoopPolicy(context_limit=4000, context=sl.ContextPolicy(memory_tools=[save_note])),
            api_key=api_key,
            interceptors=sl.Interceptors(on_payload=payloads.append),
        )
        turn = await agent.prompt("And now?")
        sent = [(r.header("authorization"), r.json) for r in server.chat_requests]
    assert turn.content == "Done."
    kinds = ["summary" if b["messages"][0]["content"] == SUMMARY_PROMPT else "other" for _, b in sent]
    assert kinds.count("summary") == 1 and len(sent) == 4
    # Every request, the memory flush's and the summary's included, carries a key the resolver gave just
    # then, never the endpoint's own; and the host's interceptor saw each of them.
    assert sorted(a for a, _ in sent) == sorted(f"Bearer {k}" for k in resolved)
    assert len(resolved) == 4 and all(a != "Bearer static-key" for a, _ in sent)
    assert len(payloads) == 4
