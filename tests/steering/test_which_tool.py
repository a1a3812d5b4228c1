"""The which-tool gate and several calls a step: routing decides from the tools declared, may decline after
the gate named a tool, and takes a request that names several items as a call each.

The gate's question and reading are sans I/O; the runs go through the loop against the scripted model
server on loopback, and what the server was asked is checked from its recorded requests."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.loop import LoopPolicy
from steadyloop.messages import AssistantMessage, ToolResultMessage
from steadyloop.steering.decision import MAX_CALLS, decision_body, read_decision
from steadyloop.steering.which_tool import (
    GENERIC_WHICH_TOOL_EXAMPLES,
    NONE,
    WhichTool,
    described_tool,
    named_tool,
    opened_with_tool,
    read_which_tool,
    which_tool_messages,
    which_tool_schema,
)
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capabilities import ModelCapabilities

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import run_routed, text

ROUTED = LoopPolicy(tool_routing=True, retry=RetryPolicy(base_delay_s=0.01, max_retries=1))

ran: list[tuple[str, dict[str, Any]]] = []


@tool
def solve_quadratic(a: float, b: float, c: float) -> str:
    """Find the roots of a quadratic equation a*x^2 + b*x + c = 0."""
    ran.append(("solve_quadratic", {"a": a, "b": b, "c": c}))
    return "-1.0, -1.5"


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    ran.append(("get_weather", {"city": city}))
    return f"{city}: 18C"


TOOLS = [solve_quadratic.definition(), get_weather.definition()]


def _body(question: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}], "tools": TOOLS, **extra}


def test_the_question_names_the_declared_tools_and_ends_with_the_request() -> None:
    asked = which_tool_messages(_body("Roots of 2x^2 + 5x + 3?"))
    assert asked is not None
    last = asked[-1]["content"]
    assert last.startswith("Tools:\n- solve_quadratic: Find the roots")
    assert "- get_weather: The current weather in a city." in last
    assert last.endswith("Request: Roots of 2x^2 + 5x + 3?")
    # Before any result, only the first-step examples, each with tools of its own and a reply the schema allows.
    shots = asked[1:-1]
    assert len(shots) == 2 * sum(e.done is None for e in GENERIC_WHICH_TOOL_EXAMPLES)
    assert all("Done so far" not in m["content"] for m in shots)
    replies = [json.loads(m["content"])["tool"] for m in shots if m["role"] == "assistant"]
    assert NONE in replies and any(r != NONE for r in replies)  # both ways shown
    assert which_tool_schema(_body("x"))["properties"]["tool"]["enum"] == [
        "solve_quadratic",
        "get_weather",
        NONE,
    ]


def test_after_results_the_question_is_what_is_still_needed() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    body = {
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "Oslo: 4C"},
        ],
        "tools": TOOLS,
    }
    asked = which_tool_messages(body)
    assert asked is not None
    assert "still needs" in asked[0]["content"]
    assert asked[-1]["content"].endswith('Done so far: get_weather(city="Oslo") returned: Oslo: 4C')


def test_nothing_to_ask_without_tools_a_request_or_a_free_choice() -> None:
    assert which_tool_messages({"messages": [{"role": "user", "content": "hi"}]}) is None
    assert which_tool_messages(_body("hi", tool_choice="required")) is None
    assert which_tool_messages({"messages": [], "tools": TOOLS}) is None


def test_the_reply_names_a_declared_tool_or_none() -> None:
    assert read_which_tool('{"tool": "get_weather"}', TOOLS) == WhichTool("get_weather")
    assert read_which_tool('{"tool": "none"}', TOOLS) == WhichTool(None)
    assert read_which_tool('{"tool": "None"}', TOOLS) == WhichTool(None)
    assert read_which_tool('{"tool": "rm_rf"}', TOOLS) is None  # a name nobody declared is no reply
    assert read_which_tool('{"about": "maths"}', TOOLS) is None
    assert read_which_tool("get_weather", TOOLS) is None


@given(
    st.text(max_size=300)
    | st.recursive(
        st.none() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    ).map(json.dumps)
)
def test_any_reply_reads_as_a_declared_tool_none_or_nothing(reply: str) -> None:
    said = read_which_tool(reply, TOOLS)
    assert said is None or said.tool in (None, "solve_quadratic", "get_weather")


def test_several_calls_are_one_list_bounded_and_read_once_each() -> None:
    asked = decision_body(_body("Weather in Paris and London?"), ModelCapabilities(), several=True)
    assert asked is not None
    schema = asked["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "array" and schema["maxItems"] == MAX_CALLS
    names = [b["properties"]["name"].get("const") for b in schema["items"]["anyOf"]]
    assert names == ["solve_quadratic", "get_weather", "answer"]
    paris = {"name": "get_weather", "arguments": {"city": "Paris"}}
    london = {"name": "get_weather", "arguments": {"city": "London"}}
    decision = read_decision(json.dumps([paris, london, paris]), TOOLS)
    assert decision is not None
    assert decision.calls == (("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"}))
    declined = read_decision('[{"name": "answer"}]', TOOLS)
    assert declined is not None and declined.answers and declined.calls == ()
    # an answer item beside calls: the calls were decided
    mixed = read_decision(json.dumps([{"name": "answer"}, london]), TOOLS)
    assert mixed is not None and mixed.calls == (("get_weather", {"city": "London"}),)
    assert read_decision(json.dumps([london, {"name": "rm"}]), TOOLS) is None  # outside the schema
    assert read_decision("[]", TOOLS) is None


async def test_a_request_no_declared_tool_serves_is_answered_without_a_decision() -> None:
    ran.clear()
    async with ScriptedServer(text('{"tool": "none"}'), text("Baby Shark is a children's song.")) as server:
        result, _ = await run_routed(server, "What is Baby Shark?", [solve_quadratic, get_weather], ROUTED)
        bodies = [r.json for r in server.chat_requests]
    assert result.turn.content == "Baby Shark is a children's song."
    assert ran == [] and len(bodies) == 2
    gate = bodies[0]["response_format"]["json_schema"]["schema"]
    assert sorted(gate["properties"]["tool"]["enum"]) == ["get_weather", NONE, "solve_quadratic"]


async def test_maths_a_declared_tool_does_is_routed_to_it() -> None:
    """The kinds gate said "answer" for any maths; the which-tool gate reads the tools."""
    ran.clear()
    call = [{"name": "solve_quadratic", "arguments": {"a": 2, "b": 5, "c": 3}}]
    replies = [
        text('{"tool": "solve_quadratic"}'),
        text(json.dumps(call)),
        text('{"tool": "none"}'),
        text("The roots are -1 and -1.5."),
    ]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(
            server, "Roots of 2x^2 + 5x + 3 = 0?", [solve_quadratic, get_weather], ROUTED
        )
        bodies = [r.json for r in server.chat_requests]
    assert ran == [("solve_quadratic", {"a": 2.0, "b": 5.0, "c": 3.0})]
    assert result.turn.content == "The roots are -1 and -1.5."
    # the decision after the gate named a tool could still have declined
    items = bodies[1]["response_format"]["json_schema"]["schema"]["items"]["anyOf"]
    assert {"const": "answer"} in [b["properties"]["name"] for b in items]


async def test_the_decision_may_decline_after_the_gate_named_a_tool() -> None:
    ran.clear()
    replies = [
        text('{"tool": "get_weather"}'),
        text('[{"name": "answer"}]'),
        text("I cannot tell the future."),
    ]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(
            server, "Will it rain next year?", [solve_quadratic, get_weather], ROUTED
        )
    assert ran == [] and result.turn.content == "I cannot tell the future."


async def test_a_request_for_several_items_gets_a_call_each_in_one_step() -> None:
    ran.clear()
    calls = [{"name": "get_weather", "arguments": {"city": c}} for c in ("Paris", "London", "Paris")]
    replies = [
        text('{"tool": "get_weather"}'),
        text(json.dumps(calls)),
        text('{"tool": "none"}'),
        text("Both 18C."),
    ]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(
            server, "Weather in Paris and London?", [solve_quadratic, get_weather], ROUTED
        )
    assert ran == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"})]
    [step] = [m for m in result.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert [c.arguments["city"] for c in step.tool_calls] == ["Paris", "London"]
    assert len({c.id for c in step.tool_calls}) == 2
    assert sum(isinstance(m, ToolResultMessage) for m in result.messages) == 2
    assert result.turn.content == "Both 18C."


@tool
def find_recipe(name: str, max_calories: int) -> str:
    """Locate a recipe based on its name and calorie content."""
    ran.append(("find_recipe", {"name": name, "max_calories": max_calories}))
    return "Carbonara: 480 kcal"


async def test_a_request_opening_with_a_tools_name_is_routed_with_no_gate_question() -> None:
    """The which-tool gate answered none for this request, and the model wrote a recipe (BFCL's
    simple_python_360): opening with ``find_recipe``'s words, it asks for that tool."""
    ran.clear()
    call = [{"name": "find_recipe", "arguments": {"name": "pasta carbonara", "max_calories": 500}}]
    replies = [text(json.dumps(call)), text('{"tool": "none"}'), text("Carbonara, 480 kcal.")]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(
            server,
            "Find a recipe for pasta carbonara which contains only less than 500 calories.",
            [find_recipe, get_weather],
            ROUTED,
        )
        bodies = [r.json for r in server.chat_requests]
    assert bodies[0]["response_format"]["json_schema"]["name"] == "step"  # the decision came first
    items = bodies[0]["response_format"]["json_schema"]["schema"]["items"]["anyOf"]
    assert {"const": "answer"} in [b["properties"]["name"] for b in items]  # and could still decline
    assert ran == [("find_recipe", {"name": "pasta carbonara", "max_calories": 500})]
    assert result.turn.content == "Carbonara, 480 kcal."


# -- a request that names a declared tool -----------------------------------------------------------------


def _tools(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]


def _asked(question: str, *names: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": question}], "tools": _tools(*names), **extra}


def test_two_words_of_a_tools_name_in_the_request_name_that_tool() -> None:
    genotype = "What is the genotype frequency of AA if the allele frequency of A is 0.3?"
    assert named_tool(_asked(genotype, "get_weather", "calculate_genotype_frequency")) == (
        "calculate_genotype_frequency"
    )
    # camelCase and a plural: "Final Price" in the name, "final prices" in the request
    assert named_tool(_asked("Work out the final prices after tax.", "calculateFinalPrice")) == (
        "calculateFinalPrice"
    )
    assert named_tool(_asked("Book two Movie tickets for tonight.", "Movies_1_BuyMovieTickets")) == (
        "Movies_1_BuyMovieTickets"
    )


def test_one_shared_word_or_only_common_words_name_no_tool() -> None:
    assert named_tool(_asked("What's the weather in Oslo?", "get_weather_alerts")) is None
    # "calculate" and "search" name what half of all tools do
    assert named_tool(_asked("Calculate it, then search.", "calculate_search_score")) is None
    assert named_tool(_asked("Roots of 2x^2 + 5x + 3 = 0?", "solve_quadratic")) is None
    assert named_tool(_asked("To be or not", "be_or_not")) is None  # words under four letters


def _after_a_call(body: dict[str, Any], name: str) -> dict[str, Any]:
    """``body`` with a call of ``name`` and its result after the request."""
    call = {"id": "c1", "type": "function", "function": {"name": name}}
    body["messages"] += [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    return body


def test_after_a_tool_ran_or_without_a_request_no_tool_is_named() -> None:
    later = _after_a_call(
        _asked("The genotype frequency, please.", "calculate_genotype_frequency"),
        "calculate_genotype_frequency",
    )
    assert named_tool(later) is None
    assert named_tool({"messages": [], "tools": _tools("genotype_frequency")}) is None
    assert named_tool({"messages": "x", "tools": "y"}) is None


@given(
    st.recursive(st.none() | st.text() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_any_body_names_or_describes_a_declared_tool_or_none(body: Any) -> None:
    body = body if isinstance(body, dict) else {"messages": body, "tools": body}
    for read in (named_tool, described_tool, opened_with_tool):
        said = read(body)
        assert said is None or isinstance(said, str)


def test_the_check_is_linear_in_the_request_and_the_names() -> None:
    def timed(n: int) -> float:
        body = _asked("frequency genotype " * n, *(f"tool{i}_aaaa_bbbb" for i in range(n // 100)))
        started = time.perf_counter()
        named_tool(body)
        return time.perf_counter() - started

    timed(1_000)
    assert timed(200_000) < 200 * max(timed(1_000), 1e-4) * 4


# -- a request that opens by calling a declared tool by its name ------------------------------------------

_HOSTS = (
    "read_file",
    "list_dir",
    "search_text",
    "write_file",
    "get_weather",
    "set_timer",
    "add",
    "find_flute",
)


@pytest.mark.parametrize(
    ("request_text", "called"),
    [
        ("Set a timer for 10 minutes for my tea.", "set_timer"),
        ("Set a 25 minute timer for studying.", "set_timer"),  # a number and its unit between
        ("Please get the weather in Paris.", "get_weather"),
        ("Can you search the text for nginx?", "search_text"),
        ("Read the files in docs.", "read_file"),  # a plural
        ("Add 2 and 3.", "add"),
        ("Start a 3 minute timer labelled eggs.", None),  # another verb
        ("Write a short list of tips for naming files.", None),  # the name's words, not in a row
        ("List three colors.", None),
        ("How do I set a timer?", None),  # asks how: not the opening
        ("What's the weather like in Berlin?", None),
        ("Timer: set it.", None),  # out of order
        # a name between (a capital inside the sentence), not any word
        ("Find a Yamaha flute with an open hole, available for sale.", "find_flute"),
        ("Find a flute for a beginner.", "find_flute"),
        ("Find the best flute for a beginner.", None),
        ("Find a Yamaha or Pearl flute.", None),
    ],
)
def test_a_request_opening_with_a_tools_name_calls_it(request_text: str, called: str | None) -> None:
    assert opened_with_tool(_asked(request_text, *_HOSTS)) == called


def test_a_name_said_after_a_tool_ran_calls_nothing() -> None:
    later = _after_a_call(_asked("Set a timer for tea.", "set_timer"), "set_timer")
    assert opened_with_tool(later) is None


def test_reading_the_opening_is_linear_in_the_request_and_the_names() -> None:
    def work(n: int) -> None:
        opened_with_tool(_asked("set a the " * n, *(f"set_a{i}_timer" for i in range(n))))

    assert growth(work, 2_000) < LINEAR_BOUND


# -- a request that says what a declared tool does, in its description's words ----------------------------


def _described(question: str, *tools: tuple[str, str]) -> dict[str, Any]:
    declared = [{"type": "function", "function": {"name": n, "description": d}} for n, d in tools]
    return {"messages": [{"role": "user", "content": question}], "tools": declared}


_ZODIAC = ("get_zodiac_compatibility", "Retrieve the compatibility score between two Zodiac signs.")
_AREA = ("integrate", "Calculate the area under a curve for a specified function between two x values.")


def test_a_phrase_of_a_tools_description_in_the_request_describes_that_tool() -> None:
    aries = "Find the compatibility score in percentage of Aries with Gemini."
    assert described_tool(_described(aries, _AREA, _ZODIAC)) == "get_zodiac_compatibility"
    # the words that join a phrase are set aside: "area under a curve" and "area under the curve" share it
    assert described_tool(_described("The area under the curve of x^3 from 2 to 5?", _ZODIAC, _AREA)) == (
        "integrate"
    )
    # the name is not read here: that is named_tool's part
    assert described_tool(_described("Zodiac compatibility of Leo?", _AREA, _ZODIAC)) is None


def test_one_shared_word_or_a_shared_verb_describes_no_tool() -> None:
    assert described_tool(_described("What is the area of a circle of radius 2?", _AREA)) is None
    # "calculate" and "find" start half of all descriptions: "calculate the area" is the word "area"
    assert described_tool(_described("Calculate the area, then find it.", _AREA)) is None
    assert described_tool(_described("Name four fruits.", _ZODIAC, _AREA)) is None


def test_after_a_tool_ran_or_without_descriptions_no_tool_is_described() -> None:
    later = _after_a_call(
        _described("The compatibility score of Leo and Virgo.", _ZODIAC), "get_zodiac_compatibility"
    )
    assert described_tool(later) is None
    assert described_tool(_asked("The compatibility score of Leo and Virgo.", "zodiac")) is None
    assert described_tool({"messages": "x", "tools": "y"}) is None


def test_the_description_check_is_linear_in_the_request_and_the_descriptions() -> None:
    def timed(n: int) -> float:
        tools = [(f"tool{i}", f"word{i} other{i} " * 50) for i in range(n // 100)]
        body = _described("compatibility score " * n, *tools)
        started = time.perf_counter()
        described_tool(body)
        return time.perf_counter() - started

    timed(1_000)
    assert timed(200_000) < 200 * max(timed(1_000), 1e-4) * 4


async def test_a_request_naming_a_tool_goes_to_the_decision_without_the_gate() -> None:
    ran.clear()
    call = [{"name": "solve_quadratic", "arguments": {"a": 2, "b": 5, "c": 3}}]
    replies = [text(json.dumps(call)), text('{"tool": "none"}'), text("The roots are -1 and -1.5.")]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(
            server, "Solve the quadratic 2x^2 + 5x + 3 = 0.", [solve_quadratic, get_weather], ROUTED
        )
        bodies = [r.json for r in server.chat_requests]
    assert ran == [("solve_quadratic", {"a": 2.0, "b": 5.0, "c": 3.0})]
    assert result.turn.content == "The roots are -1 and -1.5."
    # the first request is the decision (it may still decline); the gate is asked only after the result
    first = bodies[0]["response_format"]["json_schema"]["schema"]
    assert "items" in first and "tool" not in first.get("properties", {})
    assert len(bodies) == 3


async def test_a_request_in_a_tools_description_words_goes_to_the_decision_without_the_gate() -> None:
    ran.clear()
    call = [{"name": "solve_quadratic", "arguments": {"a": 1, "b": -3, "c": 2}}]
    replies = [text(json.dumps(call)), text('{"tool": "none"}'), text("The roots are 1 and 2.")]
    async with ScriptedServer(*replies) as server:
        # no two words of "solve_quadratic" in it, but "quadratic equation" from its description
        result, _ = await run_routed(
            server,
            "What are the roots of the quadratic equation x^2 - 3x + 2?",
            [get_weather, solve_quadratic],
            ROUTED,
        )
        bodies = [r.json for r in server.chat_requests]
    assert ran == [("solve_quadratic", {"a": 1.0, "b": -3.0, "c": 2.0})]
    assert result.turn.content == "The roots are 1 and 2."
    assert "items" in bodies[0]["response_format"]["json_schema"]["schema"]
    assert len(bodies) == 3
