"""bench/bfcl.py without bfcl-eval: the tools and messages steadyloop is given, and the first step asked of a
scripted server on loopback, each way."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply as Scripted
from steadyloop.testing.server import ScriptedServer

from ._bench import load

score = load("bfcl_score")
bfcl = load("bfcl")

TOOL = {
    "type": "function",
    "function": {
        "name": "math_factorial",
        "description": "Calculate the factorial of a given number. Note that the provided function is in Python 3 syntax.",
        "parameters": {
            "type": "object",
            "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        },
    },
}
FUNCTION = {
    "name": "math.factorial",
    "description": "Calculate the factorial of a given number.",
    "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}}, "required": ["number"]},
}


def entry(category: str = "simple_python", id: str = "e0", *, messages: Any = None) -> Any:
    asked = messages or ({"role": "user", "content": "What is 5 factorial?"},)
    answer = None if category in score.IRRELEVANCE else ({"math.factorial": {"number": [5]}},)
    return score.Entry(id, category, tuple(asked), (FUNCTION,), (TOOL,), answer)


# -- what steadyloop is given ---------------------------------------------------------------------------


async def test_the_tools_keep_bfcls_schema_and_their_bodies_do_nothing() -> None:
    (tool,) = bfcl.steadyloop_tools([TOOL])
    assert tool.definition() == {**TOOL, "function": {**TOOL["function"]}}
    ran = await tool.execute({"number": 5}, sl.ToolContext(call_id="c1", name=tool.name))
    assert ran == bfcl.NOT_RUN


def test_a_name_steadyloop_refuses_is_an_error_before_asking() -> None:
    bad = {"type": "function", "function": {**TOOL["function"], "name": "math.factorial"}}
    with pytest.raises(sl.InvalidInput):
        bfcl.steadyloop_tools([bad])


def test_a_leading_system_message_becomes_the_system_prompt() -> None:
    system, messages = bfcl.split_messages(
        [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    )
    assert system == "Be terse." and messages == [sl.UserMessage(content="Hi")]
    assert bfcl.split_messages([{"role": "user", "content": "Hi"}])[0] is None


# -- the first step, asked of a scripted server -----------------------------------------------------------


def call(*calls: tuple[str, dict[str, Any]]) -> Any:
    listed = [{"id": f"c{i}", "name": name, "arguments": args} for i, (name, args) in enumerate(calls)]
    return Scripted.stream(stream_of(tool_calls=listed))


async def test_steadyloop_stops_after_the_first_step_and_its_calls_are_scored() -> None:
    both = call(("math_factorial", {"number": 5}), ("math_factorial", {"number": 6}))
    async with ScriptedServer(both, Scripted.stream(stream_of("never asked"))) as server:
        target = bfcl.Target(sl.Endpoint(server.base_url), "m", None, raw=None)
        reply = await bfcl.ask(target, "default", entry())
        (sent,) = server.chat_requests
    assert reply.calls == [{"math_factorial": {"number": 5}}, {"math_factorial": {"number": 6}}]
    assert reply.requests == 1 and not reply.error and reply.seconds > 0
    assert sent.json["temperature"] == 0 and [t["function"]["name"] for t in sent.json["tools"]] == [
        "math_factorial"
    ]
    assert sent.json["messages"] == [{"role": "user", "content": "What is 5 factorial?"}]


async def test_steadyloop_text_is_no_call() -> None:
    async with ScriptedServer(Scripted.stream(stream_of("5! is 120."))) as server:
        target = bfcl.Target(sl.Endpoint(server.base_url), "m", None, raw=None)
        reply = await bfcl.ask(target, "default", entry())
    assert reply.calls is None and reply.text == "5! is 120."


async def test_the_raw_client_sends_bfcls_request_as_is() -> None:
    from openai import AsyncOpenAI

    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c0",
                            "type": "function",
                            "function": {"name": "math_factorial", "arguments": '{"number": 5}'},
                        }
                    ],
                },
            }
        ],
    }
    async with ScriptedServer(Scripted.json(body)) as server:
        raw = AsyncOpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        try:
            reply = await bfcl.ask(bfcl.Target(sl.Endpoint(server.base_url), "m", None, raw), "raw", entry())
        finally:
            await raw.close()
        (sent,) = server.chat_requests
    assert reply.calls == [{"math_factorial": {"number": 5}}]
    assert sent.json == {
        "model": "m",
        "messages": [{"role": "user", "content": "What is 5 factorial?"}],
        "temperature": 0,
        "tools": [TOOL],
    }


def test_the_steadyloop_ways_have_the_commands_policy() -> None:
    target = bfcl.Target(sl.Endpoint("http://127.0.0.1:9/v1"), "m", 8192, raw=None)
    default, routed = target.policy(False), target.policy(True)
    assert not default.tool_routing and routed.tool_routing and routed.tool_gate
    assert routed.context_limit == default.context_limit == 8192 and routed.context is not None


def test_none_of_this_needs_bfcl_eval() -> None:
    assert "bfcl_eval" not in sys.modules
