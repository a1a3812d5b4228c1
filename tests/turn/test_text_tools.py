"""A server that takes no tools: the tools go into the prompt and the calls are read back from the text."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Downgrade, Event, Notice
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capabilities import model_capabilities_for
from steadyloop.turn.text_tools import describe_tools, tools_as_text
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.failures import classify_failure

# vLLM's answer to a request with tools when it was started without a tool-call parser.
VLLM_NO_TOOLS = {
    "object": "error",
    "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18C, clear"


def test_vllms_refusal_reads_as_tools_unsupported() -> None:
    failure = classify_failure(400, VLLM_NO_TOOLS)
    assert (failure.kind, failure.field) == ("tools_unsupported", "tools")


def test_tools_are_described_and_the_transcript_written_as_text() -> None:
    body = {
        "model": "m",
        "tools": [_weather_schema()],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "Paris: 18C"},
            {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "Rome: 25C"}]},
        ],
    }
    out = tools_as_text(body)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(out)
    system, _question, assistant, results = out["messages"]
    assert system["content"].startswith("Be brief.\n\nYou can call the tools listed below.")
    assert "- get_weather" in system["content"] and '"city"' in system["content"]
    assert "tool_calls" not in assistant
    assert assistant["content"].count("<tool_call>") == 2 and '"Rome"' in assistant["content"]
    assert results == {
        "role": "user",
        "content": "<tool_response>\nParis: 18C\n</tool_response>\n<tool_response>\nRome: 25C\n</tool_response>",
    }
    # Without a system message, one is added in front; the description is the same text every time.
    bare = tools_as_text({"tools": body["tools"], "messages": [{"role": "user", "content": "hi"}]})
    assert bare["messages"][0] == {"role": "system", "content": describe_tools(body["tools"])}


def _weather_schema() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }


async def test_a_server_without_tools_runs_the_loop_with_calls_recovered_from_text() -> None:
    refusal = Reply.json(VLLM_NO_TOOLS, status=400)
    written_call = Reply.stream(
        stream_of('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>')
    )
    answer = Reply.stream(stream_of("It is 18C and clear in Paris."))
    events: list[Event] = []
    async with ScriptedServer(refusal, written_call, answer) as server:
        endpoint = Endpoint(server.base_url)
        result = await run_agent_loop(
            endpoint,
            ModelParams(model="m"),
            messages=[UserMessage(content="Weather in Paris?")],
            tools=[get_weather],
            policy=LoopPolicy(retry=RetryPolicy(base_delay_s=0.01)),
            on_event=events.append,
        )
        sent = [request.json for request in server.chat_requests]
    assert result.turn.content == "It is 18C and clear in Paris."
    assert "tools" in sent[0] and "tools" not in sent[1] and "tools" not in sent[2]
    assert "get_weather" in sent[1]["messages"][0]["content"]
    # The call and its result travel as text, in the spelling the prompt asked for.
    later = sent[2]["messages"]
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in later)
    assert any("<tool_response>" in str(m["content"]) and "18C" in str(m["content"]) for m in later)
    assert model_capabilities_for(endpoint, "m").native_tools is False
    assert [e.field for e in events if isinstance(e, Downgrade)] == ["tools"]
    names = [e.name for e in events if isinstance(e, Notice)]
    assert "downgrade" in names and "recovery" in names


_KEYS = [
    "tools",
    "messages",
    "role",
    "content",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "tool_choice",
    "text",
]
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=6)
    | st.sampled_from(["assistant", "tool", "system"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=5))
def test_any_body_is_rewritten_without_tools_and_without_raising(body: dict[str, Any]) -> None:
    out = tools_as_text(body)
    assert "tools" not in out and "tool_choice" not in out
    if isinstance(body.get("messages"), list):
        assert all(not (isinstance(m, dict) and m.get("role") == "tool") for m in out["messages"])


def test_a_call_whose_arguments_nest_deep_is_still_written() -> None:
    call = {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "[" * 1000}}
    out = tools_as_text({"messages": [{"role": "assistant", "content": None, "tool_calls": [call]}]})
    assert out["messages"][0]["content"].startswith('<tool_call>{"name": "get_weather", "arguments": "[[[')
