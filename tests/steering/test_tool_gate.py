"""The tool gate: its question, its reading, and a routed step that asks it first."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, Notice, SideTask
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import SystemMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.decision import ANSWER_GRAMMAR
from steadyloop.steering.examples import ANSWER_NOTES
from steadyloop.steering.routing import ToolRouting
from steadyloop.steering.tool_gate import (
    GATE_SCHEMA,
    KIND_SCHEMA,
    KINDS,
    asks_how,
    gate_kind,
    gate_messages,
    gate_schema,
    read_gate,
)
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capabilities import model_capabilities_for
from steadyloop.wire.endpoints import Endpoint

from ..edges._edges import mutated, mutated_text
from ._routed import run_routed, text

KIND_GATE = ToolRouting(question="kind", several=False)  # the kinds gate these tests hold
GATED = LoopPolicy(tool_routing=KIND_GATE, retry=RetryPolicy(base_delay_s=0.01, max_retries=1))


@tool
def list_dir(path: str = ".") -> str:
    """List a folder.

    Args:
        path: the folder.
    """
    return "notes.txt\ndocs/"


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return "Lisbon"


TOOLS = [list_dir.definition(), read_file.definition()]


def choose(choice: str) -> Any:
    return text(json.dumps({"choice": choice}))


async def run(server: ScriptedServer, question: str, policy: LoopPolicy = GATED) -> tuple[Any, list[Event]]:
    return await run_routed(server, question, [list_dir, read_file], policy)


def test_the_first_question_names_each_tool_in_a_line_and_ends_with_the_request() -> None:
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]}
    asked = gate_messages({**body, "tools": TOOLS})
    assert asked is not None
    system = asked[0]["content"]
    assert "- list_dir: List a folder." in system and "- read_file: Read a text file." in system
    assert "Args" not in system  # the first line of a description, not its argument docs
    assert asked[-1] == {"role": "user", "content": "Hi?"}
    # worked examples as earlier turns, each answered with the shape the schema holds the reply to
    shots = asked[1:-1]
    assert shots and [m["role"] for m in shots] == ["user", "assistant"] * (len(shots) // 2)
    kinds = {json.loads(m["content"])["about"] for m in shots if m["role"] == "assistant"}
    assert kinds == set(KINDS)  # every kind shown, so both choices are
    assert all(kind in system for kind in KINDS)
    assert gate_schema({**body, "tools": TOOLS}) == KIND_SCHEMA
    assert "Be brief." not in json.dumps(asked)  # the gate has its own instructions


def test_after_tool_results_the_question_carries_what_they_returned() -> None:
    arguments = '{"path": "city.txt"}'
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "Weather in the city in city.txt?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Lisbon\n"},
    ]
    asked = gate_messages({"messages": messages, "tools": TOOLS})
    assert asked is not None
    assert asked[-1]["content"] == (
        'Request: Weather in the city in city.txt?\nDone so far: read_file(path="city.txt") returned: Lisbon'
    )
    assert "what was done so far is enough" in asked[0]["content"]
    assert gate_schema({"messages": messages, "tools": TOOLS}) == GATE_SCHEMA  # a choice, as before


def _done_so_far(arguments: Any) -> str:
    call = {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "Save it."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "wrote 2 bytes"},
    ]
    asked = gate_messages({"messages": messages, "tools": TOOLS})
    assert asked is not None
    return str(asked[-1]["content"]).split("Done so far: ", 1)[1]


@pytest.mark.parametrize(
    ("arguments", "shown"),
    [
        ('{"path": "a.txt", "content": "hi"}', 'write_file(path="a.txt", content="hi")'),
        ('{"n": 3, "deep": {"k": [1, null]}}', 'write_file(n=3, deep={"k": [1, null]})'),
        ("{}", "write_file()"),
        # each argument cut to what tells the step apart; the whole call left out when it is too long to read
        ('{"content": "' + "x" * 500 + '"}', 'write_file(content="' + "x" * 56 + "...)"),
        ('{"content": "' + "x" * 5000 + '"}', "write_file"),
        # not an object: the name alone
        ('{"path": ', "write_file"),
        ("[1, 2]", "write_file"),
        ("NaN", "write_file"),
        (None, "write_file"),
        ({"path": "a.txt"}, "write_file"),  # a mapping where the wire has a JSON string
        ("[" * 1500 + "]" * 1500, "write_file"),
        ('{"a": ' + "[" * 995 + "]" * 995 + "}", "write_file"),  # nesting past what json reads back
    ],
)
def test_after_tool_results_each_call_is_shown_with_its_arguments(arguments: Any, shown: str) -> None:
    assert _done_so_far(arguments) == f"{shown} returned: wrote 2 bytes"


_SEED_ARGUMENTS = {"path": "a.txt", "content": "hi", "mode": {"append": False, "lines": [1, 2]}}


@given(
    st.one_of(
        mutated(_SEED_ARGUMENTS).map(lambda v: json.dumps(v, allow_nan=True)),
        mutated_text(json.dumps(_SEED_ARGUMENTS)),
        st.integers(1, 995).map(lambda depth: '{"a": ' + "[" * depth + "]" * depth + "}"),
    )
)
def test_showing_any_arguments_is_total(arguments: str) -> None:
    # mutated values, cut or spliced JSON text, nesting past what json.dumps takes back: never an error
    assert _done_so_far(arguments).startswith("write_file")


@pytest.mark.parametrize(
    "body",
    [
        {"messages": [{"role": "user", "content": "hi"}]},  # no tools
        {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "tool_choice": "required"},
        {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "tool_choice": "none"},
        {"messages": [{"role": "system", "content": "only this"}], "tools": TOOLS},  # no request
        {"messages": "not a list", "tools": TOOLS},
        {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]},
    ],
)
def test_nothing_to_ask(body: dict[str, Any]) -> None:
    assert gate_messages(body) is None


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"choice": "tool"}', "tool"),
        ('{"choice": "answer"}', "answer"),
        ('```json\n{"choice": "answer"}\n```', "answer"),
        ('{"choice": "maybe"}', None),
        ('{"about": "looking in the user\'s files"}', "tool"),
        ('{"about": "converting money between currencies"}', "tool"),
        ('{"about": "how to do something in code or a shell"}', "answer"),
        ('{"about": "translating or composing text"}', "answer"),
        ('{"about": "gossip"}', None),  # a kind that is not one
        ('{"about": 3}', None),
        ("tool", None),
        ("", None),
        ("[1, 2]", None),
    ],
)
def test_reading_the_gate(reply: str, expected: str | None) -> None:
    assert read_gate(reply) == expected


@given(st.text(max_size=300))
def test_reading_any_reply_is_total(reply: str) -> None:
    assert read_gate(reply) in (None, "tool", "answer")


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "id"]),
            st.one_of(st.none(), st.text(max_size=20), st.integers(), st.lists(st.text(max_size=5))),
        ),
        max_size=6,
    )
)
def test_building_the_question_is_total(messages: list[dict[str, Any]]) -> None:
    asked = gate_messages({"messages": messages, "tools": TOOLS})
    assert asked is None or asked[-1]["role"] == "user"


def test_tool_calls_of_the_wrong_kind_are_skipped() -> None:
    # tool_calls: 5 raised TypeError ('int' object is not iterable) out of gate_messages.
    for calls in (5, 2.5, True, {"id": "x"}, "calls"):
        body = {
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": calls}],
        }
        asked = gate_messages(body)
        assert asked is not None and asked[-1]["content"] == "hi"


@pytest.mark.parametrize(
    ("request_text", "only_how"),
    [
        ("How do I create an empty file in Bash?", True),
        ("how to make a folder", True),
        ("How can we delete a branch in git?", True),
        ("Can you show me how to write a file in Python?", True),
        ("Please explain how to rename a file.", True),
        ("  How   do I\n open notes.txt?  ", True),  # a path's dot ends no sentence
        ("How do I create an empty file in Bash? Then do it.", False),  # says more than how
        ("Create notes.txt. How do I open it?", False),
        ("How do I add a file todo.md with the text: ship it", False),
        ("How many files are there?", False),
        ("How does grep work?", False),
        ("How did you do that?", False),
        ("Show me how my files are organised.", False),
        ("Create an empty file called a.txt.", False),
        ("", False),
        ("How do I " + "x" * 500 + "?", False),  # longer than one question about how
    ],
)
def test_a_request_that_only_asks_how(request_text: str, only_how: bool) -> None:
    assert asks_how(request_text) is only_how


@pytest.mark.parametrize("kind", ["creating or changing files", "an action to do"])
def test_a_change_asked_how_to_make_is_read_as_an_answer(kind: str) -> None:
    reply = json.dumps({"about": kind})
    assert read_gate(reply) == "tool"
    assert read_gate(reply, asked_how=True) == "answer"


@pytest.mark.parametrize("kind", ["looking in the user's files", "live data (weather, prices, news)"])
def test_a_look_asked_how_to_make_is_still_a_tool(kind: str) -> None:
    # Reading changes nothing: "How do I find the file that mentions nginx?" may as well be looked up.
    assert read_gate(json.dumps({"about": kind}), asked_how=True) == "tool"


@given(st.text(max_size=500))
def test_reading_any_request_for_how_is_total(request_text: str) -> None:
    assert asks_how(request_text) in (True, False)


@given(
    st.one_of(st.text(max_size=50), st.lists(st.text(max_size=5)), st.integers(), st.none()), st.booleans()
)
def test_reading_any_kind_asked_how_is_total(kind: Any, asked_how: bool) -> None:
    # {"about": ["creating or changing files"]} is no kind: a list is not looked up as one
    assert read_gate(json.dumps({"about": kind}), asked_how=asked_how) in (None, "tool", "answer")


def test_reading_a_huge_request_for_how_is_linear() -> None:
    for huge in ("How do I " * 100_000, "How to? " * 100_000, " " * 1_000_000 + "How do I x?"):
        started = time.perf_counter()
        asks_how(huge)
        assert time.perf_counter() - started < 2.0


async def test_a_request_that_only_asks_how_to_change_files_is_answered_without_a_call() -> None:
    async with ScriptedServer(
        text(json.dumps({"about": "creating or changing files"})), text("Use touch: `touch empty.txt`.")
    ) as server:
        result, _ = await run(server, "How do I create an empty file in Bash?")
        gate, answer = (r.json for r in server.chat_requests)
    assert result.turn.content == "Use touch: `touch empty.txt`."
    assert not [c for m in result.messages for c in getattr(m, "tool_calls", ())]
    assert "tools" not in answer and answer["grammar"] == ANSWER_GRAMMAR
    assert gate["messages"][-1]["content"] == "How do I create an empty file in Bash?"


async def test_a_request_to_change_files_is_still_a_call() -> None:
    async with ScriptedServer(
        text(json.dumps({"about": "creating or changing files"})),
        text('{"name": "read_file", "arguments": {"path": "a.txt"}}'),
        choose("answer"),
        text("It says Lisbon."),
    ) as server:
        result, _ = await run(server, "Create a.txt, then tell me what it says.")
        assert len(server.chat_requests) == 4
    calls = [c for m in result.messages for c in getattr(m, "tool_calls", ())]
    assert [c.name for c in calls] == ["read_file"]


async def test_an_answer_the_gate_chose_is_asked_for_without_a_decision() -> None:
    async with ScriptedServer(choose("answer"), text("Red, blue and green.")) as server:
        result, events = await run(server, "List three colors.")
        gate, answer = (r.json for r in server.chat_requests)
    assert result.turn.content == "Red, blue and green." and not result.turn.tool_calls
    # the gate: a question of its own, at temperature 0, held to the kinds of request
    assert gate["temperature"] == 0
    assert gate["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "gate", "schema": KIND_SCHEMA},
    }
    assert "tools" not in gate and gate["messages"][-1] == {"role": "user", "content": "List three colors."}
    # the answer: the step's own messages without the tools, never opening like a call
    assert "tools" not in answer and "tool_choice" not in answer and answer["grammar"] == ANSWER_GRAMMAR
    assert answer["messages"][-1] == {"role": "user", "content": "List three colors."}
    assert [e.kind for e in events if isinstance(e, SideTask)] == ["tool_gate"]


async def test_a_tool_the_gate_chose_makes_the_decision_a_call_and_the_gate_is_asked_again() -> None:
    async with ScriptedServer(
        choose("tool"),
        text('{"name": "list_dir", "arguments": {"path": "."}}'),
        choose("answer"),
        text("It holds notes.txt and docs/."),
    ) as server:
        result, _ = await run(server, "What is in this folder?")
        first_gate, decision, second_gate, answer = (r.json for r in server.chat_requests)
    calls = [c for m in result.messages for c in getattr(m, "tool_calls", ())]
    # "." is the tool's own default, which the request never spoke of: left to the tool (unasked.py)
    assert [(c.name, c.arguments) for c in calls] == [("list_dir", {})]
    assert result.turn.content == "It holds notes.txt and docs/."
    names = [
        b["properties"]["name"]["const"]
        for b in decision["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert names == ["list_dir", "read_file"]  # a call it must be: no answer branch
    assert decision["temperature"] == 0
    assert first_gate["messages"][-1]["content"] == "What is in this folder?"
    assert second_gate["temperature"] == 0
    assert second_gate["messages"][-1]["content"].startswith("Request: What is in this folder?\nDone so far:")
    assert "list_dir() returned: notes.txt docs/" in second_gate["messages"][-1]["content"]
    # after results the answer keeps the step's tools: its prompt is then the one the server has cached
    assert answer["tools"] == decision["tools"] and answer["tool_choice"] == "none"
    assert answer["grammar"] == ANSWER_GRAMMAR and answer["messages"][-1]["role"] == "tool"


async def test_a_gate_reply_without_a_choice_latches_the_gate_off_and_the_step_is_routed() -> None:
    async with ScriptedServer(
        text("I think you should use a tool."),
        text('{"name": "answer"}'),
        text("Hello."),
    ) as server:
        result, events = await run(server, "Say hello.")
        endpoint = Endpoint(server.base_url)
        bodies = [r.json for r in server.chat_requests]
    assert result.turn.content == "Hello."
    assert not model_capabilities_for(endpoint, "m").tool_gate
    assert model_capabilities_for(endpoint, "m").tool_routing  # routing itself stays on
    assert any(isinstance(e, Notice) and e.name == "tool_gate" for e in events)
    assert "tools" in bodies[1]  # the decision, answer allowed
    assert any(
        b["properties"]["name"]["const"] == "answer"
        for b in bodies[1]["response_format"]["json_schema"]["schema"]["anyOf"]
    )


async def test_a_failed_gate_request_leaves_the_gate_on_and_the_step_goes_on() -> None:
    down = Reply.json({"error": {"message": "overloaded"}}, status=503)
    policy = LoopPolicy(tool_routing=KIND_GATE, retry=RetryPolicy(base_delay_s=0.01, max_retries=0))
    async with ScriptedServer(down, text('{"name": "answer"}'), text("Hello.")) as server:
        result, events = await run(server, "Say hello.", policy)
        endpoint = Endpoint(server.base_url)
    assert result.turn.content == "Hello."
    assert model_capabilities_for(endpoint, "m").tool_gate
    [gate] = [e for e in events if isinstance(e, SideTask)]
    assert gate.kind == "tool_gate" and gate.error and gate.step == 1
    assert gate.error_code == "503" and gate.error_type  # what a side task's failure says, the gate's too


async def test_the_gate_off_in_the_policy_sends_no_gate_question() -> None:
    policy = LoopPolicy(tool_routing=True, tool_gate=False)
    async with ScriptedServer(text('{"name": "answer"}'), text("Hello.")) as server:
        result, _ = await run(server, "Say hello.", policy)
        bodies = [r.json for r in server.chat_requests]
    assert result.turn.content == "Hello." and len(bodies) == 2 and "tools" in bodies[0]


def _listing_tools(*paths: str) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"path": {"type": "string", "enum": list(paths)}}}
    return [{"type": "function", "function": {"name": "read_file", "parameters": schema}}]


@pytest.mark.parametrize(
    ("request_text", "named"),
    [
        ("What port does config.ini set?", True),
        ("Is Falcon free? The answer is in docs/faq.md.", True),
        ("Summarise 'notes.txt', please", True),
        ("What is an .ini file?", False),  # a kind of file, not one of the user's
        ("How do I read a text file in Python?", False),
        ("What does the docs folder hold?", False),  # a bare word: the gate's question to answer
        ("config.ini.bak is what I meant", False),  # a longer name is another file
    ],
)
def test_a_request_naming_a_listed_path_needs_no_gate_question(request_text: str, named: bool) -> None:
    from steadyloop.steering.tool_gate import names_a_listed_path

    tools = _listing_tools(".", "docs", "config.ini", "docs/faq.md", "notes.txt")
    body = {"tools": tools, "messages": [{"role": "user", "content": request_text}]}
    assert names_a_listed_path(body) is named


def test_after_tool_results_naming_a_path_is_the_gate_question_again() -> None:
    from steadyloop.steering.tool_gate import names_a_listed_path

    messages = [
        {"role": "user", "content": "What port does config.ini set?"},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "port = 8042"},
    ]
    assert not names_a_listed_path({"tools": _listing_tools("config.ini"), "messages": messages})


@given(
    st.text(max_size=400),
    st.lists(st.one_of(st.text(max_size=30), st.integers(), st.none(), st.floats()), max_size=30),
)
def test_reading_a_request_for_listed_paths_is_total(request_text: str, values: list[Any]) -> None:
    from steadyloop.steering.tool_gate import names_a_listed_path

    schema = {"type": "object", "properties": {"path": {"enum": values}, "n": "not a schema"}}
    tools: list[Any] = [{"function": {"name": "t", "parameters": schema}}, "junk", {"function": None}]
    body = {"tools": tools, "messages": [{"role": "user", "content": request_text}]}
    assert names_a_listed_path(body) in (True, False)


def test_reading_a_huge_request_for_listed_paths_is_linear() -> None:
    import time

    from steadyloop.steering.tool_gate import names_a_listed_path

    tools = _listing_tools(*(f"dir{i}/file{i}.txt" for i in range(3000)))

    def cost(n: int) -> float:
        body = {"tools": tools, "messages": [{"role": "user", "content": "a.b/c " * n}]}
        start = time.perf_counter()
        assert not names_a_listed_path(body)
        return time.perf_counter() - start

    cost(1000)  # warm
    small, big = min(cost(20_000) for _ in range(3)), min(cost(160_000) for _ in range(3))
    assert big / small < 8 * 4  # 8x the input: about 8x the time, never the square


async def test_a_request_naming_a_listed_file_goes_straight_to_the_call() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a text file."""
        return "port = 8042"

    from dataclasses import replace

    parameters = json.loads(json.dumps(read_file.parameters))
    parameters["properties"]["path"]["enum"] = ["config.ini", "notes.txt"]
    read_listed = replace(read_file, parameters=parameters)
    async with ScriptedServer(
        text('{"name": "read_file", "arguments": {"path": "config.ini"}}'),
        choose("answer"),
        text("It sets port 8042."),
    ) as server:
        events: list[Event] = []
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="What port does config.ini set?")],
            tools=[read_listed],
            policy=GATED,
            on_event=events.append,
        )
        decision = server.chat_requests[0].json
    assert result.turn.content == "It sets port 8042."
    assert "gate" not in json.dumps(decision["response_format"]["json_schema"]["name"])
    assert [e.kind for e in events if isinstance(e, SideTask)] == ["tool_gate"]  # only after the result


async def test_a_request_calling_a_tool_by_its_name_is_not_sorted_by_kind() -> None:
    # The kinds gate filed "Set a timer for 10 minutes for my tea." as one to answer, and the 1.5B model
    # wrote steps for a kitchen timer; the request opens with the declared tool's name as a command.
    @tool
    def set_timer(minutes: int, label: str) -> str:
        """Start a countdown timer."""
        return f"timer '{label}' set for {minutes} minutes"

    async with ScriptedServer(
        text('{"name": "set_timer", "arguments": {"minutes": 10, "label": "tea"}}'),
        choose("answer"),
        text("A 10 minute timer for your tea is running."),
    ) as server:
        events: list[Event] = []
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="Set a timer for 10 minutes for my tea.")],
            tools=[list_dir, set_timer],
            policy=GATED,
            on_event=events.append,
        )
    calls = [c for m in result.messages for c in getattr(m, "tool_calls", ())]
    assert [(c.name, c.arguments) for c in calls] == [("set_timer", {"minutes": 10, "label": "tea"})]
    assert result.turn.content == "A 10 minute timer for your tea is running."
    assert [e.kind for e in events if isinstance(e, SideTask)] == ["tool_gate"]  # only after the result


@pytest.mark.parametrize(
    ("kind", "noted"),
    [("translating or composing text", True), ("general knowledge", False), ("chat", False)],
)
async def test_an_answer_is_told_that_a_text_is_asked_for_when_the_gate_reads_one(
    kind: str, noted: bool
) -> None:
    # "Translate 'good morning' into Spanish." was answered "Good morning!": the quoted words read as said
    # to the model. The kind the gate read is told to the answer (examples.ANSWER_NOTES).
    async with ScriptedServer(text(json.dumps({"about": kind})), text("Buenos días.")) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[
                SystemMessage(content="You are a helpful assistant."),
                UserMessage(content="Translate 'good morning' into Spanish."),
            ],
            tools=[list_dir],
            policy=GATED,
        )
        answered = server.chat_requests[1].json
    assert result.turn.content == "Buenos días."
    system = answered["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are a helpful assistant.")
    assert system["content"].endswith(ANSWER_NOTES["translating or composing text"]) is noted
    assert "tools" not in answered


def test_the_kind_read_from_a_gate_reply() -> None:
    assert gate_kind('{"about": "maths"}') == "maths"
    assert gate_kind('{"about": "cooking"}') is None  # no kind of ours
    assert gate_kind('{"choice": "tool"}') is None and gate_kind(None) is None and gate_kind("x") is None


def _file_and_city_tools() -> list[dict[str, Any]]:
    def fn(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        schema = {"type": "object", "properties": properties, "required": required}
        return {"type": "function", "function": {"name": name, "parameters": schema}}

    paths = {"type": "string", "enum": ["city.txt", "notes.txt", "docs/faq.md"]}
    return [
        fn("read_file", {"path": paths}, ["path"]),
        fn(
            "search_text",
            {"pattern": {"type": "string"}, "path": {**paths, "enum": [".", *paths["enum"]]}},
            ["pattern"],
        ),
        fn("get_weather", {"city": {"type": "string"}}, ["city"]),
    ]


def test_a_request_naming_a_file_is_first_a_call_on_that_file() -> None:
    from steadyloop.steering.tool_gate import tools_on_named_paths

    tools = _file_and_city_tools()
    asked = {"tools": tools, "messages": [{"role": "user", "content": "Weather in the city in city.txt?"}]}
    # the tools that need nothing but the file, held to it: reading it
    [reading] = tools_on_named_paths(asked) or []
    assert reading["function"]["name"] == "read_file"
    assert reading["function"]["parameters"]["properties"]["path"]["enum"] == ["city.txt"]
    assert tools[0]["function"]["parameters"]["properties"]["path"]["enum"][0] == "city.txt"  # untouched
    # without such a tool, every tool that lists the file, each held to it
    [searching] = tools_on_named_paths({**asked, "tools": tools[1:]}) or []
    assert searching["function"]["parameters"]["properties"]["path"]["enum"] == ["city.txt"]
    # nothing named, or a tool already ran: nothing to narrow
    assert (
        tools_on_named_paths({**asked, "messages": [{"role": "user", "content": "Weather in Oslo?"}]}) is None
    )
    ran = [
        *asked["messages"],
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "read_file"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Lisbon"},
    ]
    assert tools_on_named_paths({**asked, "messages": ran}) is None


def test_a_folder_the_host_found_below_the_listed_ones_is_taken_by_the_argument_listing_folders() -> None:
    from steadyloop.steering.tool_gate import tools_on_named_paths

    def fn(name: str, values: list[str]) -> dict[str, Any]:
        schema = {
            "type": "object",
            "properties": {"path": {"type": "string", "enum": values}},
            "required": ["path"],
        }
        return {"type": "function", "function": {"name": name, "parameters": schema}}

    tools = [fn("list_dir", [".", "src", "src/app"]), fn("read_file", ["README.md", "src/app/main.py"])]
    asked = {"tools": tools, "messages": [{"role": "user", "content": "How many files are in src/app/cli?"}]}

    def held(also: list[str]) -> dict[str, list[str]] | None:
        found = tools_on_named_paths(asked, also)
        if found is None:
            return None
        return {
            t["function"]["name"]: t["function"]["parameters"]["properties"]["path"]["enum"] for t in found
        }

    assert held(["src/app/cli/"]) == {"list_dir": ["src/app/cli"]}
    assert held(["src/app/cli/", "src/app/"]) == {"list_dir": ["src/app", "src/app/cli"]}
    # a path with no trailing slash is a file, or a listed value: the listing does not grow
    assert held(["src/app/cli"]) is None
    assert held(["src/app/other.py"]) is None
    assert held(["/", ""]) is None
    assert tools[0]["function"]["parameters"]["properties"]["path"]["enum"] == [".", "src", "src/app"]
    # no argument lists a folder it is under: nothing to hold
    assert tools_on_named_paths({**asked, "tools": tools[1:]}, ["src/app/cli/"]) is None


async def test_a_routed_step_on_a_named_file_reads_it_before_anything_else() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a text file."""
        return "Lisbon"

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: 18C"

    listed_parameters = {
        **read_file.parameters,
        "properties": {"path": {"type": "string", "enum": ["city.txt", "notes.txt"]}},
    }
    from dataclasses import replace

    reading = replace(read_file, parameters=listed_parameters)
    async with ScriptedServer(
        text('{"name": "read_file", "arguments": {"path": "city.txt"}}'),
        choose("tool"),
        # the same call again, its result in the prompt: asked once more without that tool
        text('{"name": "read_file", "arguments": {"path": "city.txt"}}'),
        text('{"name": "get_weather", "arguments": {"city": "Lisbon"}}'),
        choose("answer"),
        text("18C in Lisbon."),
    ) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="What is the weather in the city named in city.txt?")],
            tools=[reading, get_weather],
            policy=GATED,
        )
        bodies = [r.json for r in server.chat_requests]
    calls = [(c.name, c.arguments) for m in result.messages for c in getattr(m, "tool_calls", ())]
    assert calls == [("read_file", {"path": "city.txt"}), ("get_weather", {"city": "Lisbon"})]
    assert result.turn.content == "18C in Lisbon."
    first, _gate, repeated, again = bodies[:4]
    # no gate question first: the decision, held to a call of read_file on city.txt, tools sent unchanged
    [only] = first["response_format"]["json_schema"]["schema"]["anyOf"]
    assert only["properties"]["name"] == {"const": "read_file"}
    assert only["properties"]["arguments"]["properties"]["path"]["enum"] == ["city.txt"]
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["get_weather", "read_file"]
    assert first["response_format"]["json_schema"]["name"] == "step"
    names = [
        b["properties"]["name"]["const"]
        for b in repeated["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert sorted(names) == ["get_weather", "read_file"]
    names = [
        b["properties"]["name"]["const"] for b in again["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert names == ["get_weather"]


def test_a_free_text_path_argument_takes_the_host_paths_of_its_kind() -> None:
    """A folder too big to list in a schema: the host's paths still hold the argument that takes them."""
    from steadyloop.steering.tool_gate import tools_on_named_paths

    def fn(name: str, path: dict[str, Any]) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"path": path}, "required": ["path"]}
        return {"type": "function", "function": {"name": name, "parameters": schema}}

    free = {"type": "string"}
    tools = [fn("read_file", free), fn("list_dir", free), fn("get_weather", free)]
    asked = {"tools": tools, "messages": [{"role": "user", "content": "How do I run the tests?"}]}
    taken: dict[str, Any] = {"read_file": ("path", "file"), "list_dir": ("path", "folder")}

    def held(also: list[str], arguments: dict[str, Any] | None = taken) -> dict[str, list[str]] | None:
        found = tools_on_named_paths(asked, also, arguments)
        if found is None:
            return None
        return {
            t["function"]["name"]: t["function"]["parameters"]["properties"]["path"]["enum"] for t in found
        }

    assert held(["README.md"]) == {"read_file": ["README.md"]}
    assert held(["tests/", "./"]) == {"list_dir": ["tests", "."]}
    assert held(["README.md", "tests/"]) == {"read_file": ["README.md"], "list_dir": ["tests"]}
    assert held(["README.md"], None) is None  # without the host's word, a free argument takes nothing
    assert held([]) is None
    # a listed argument keeps its own reading: only what it lists
    listed = [fn("read_file", {"type": "string", "enum": ["setup.py"]})]
    assert tools_on_named_paths({**asked, "tools": listed}, ["README.md"], taken) is None
    # once a tool ran for the request, nothing is narrowed
    ran = [
        *asked["messages"],
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "read_file"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "# App"},
    ]
    assert tools_on_named_paths({**asked, "messages": ran}, ["README.md"], taken) is None


@given(
    st.lists(st.text(max_size=30), max_size=6),
    st.dictionaries(
        st.text(max_size=10), st.tuples(st.text(max_size=10), st.sampled_from(["file", "folder"]))
    ),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=20,
    ),
)
def test_free_path_arguments_read_any_tools_totally(
    also: list[str], taken: dict[str, Any], tools: Any
) -> None:
    from steadyloop.steering.tool_gate import tools_on_named_paths

    body = {
        "tools": [tools] if not isinstance(tools, list) else tools,
        "messages": [{"role": "user", "content": "x"}],
    }
    found = tools_on_named_paths(body, also, taken)
    assert found is None or isinstance(found, list)


@pytest.mark.parametrize(
    ("request_text", "asks"),
    [
        ("What is in this folder?", True),
        ("What's inside the recipes directory?", True),
        ("List the files in the current folder.", True),
        ("Show me everything in the current directory.", True),
        ("Which files are in src?", True),
        ("Can you show me this directory's contents?", True),
        ("List the recipes folder, then read the file in it: what fruit does it use?", False),
        ("List the src folder and then read main.py", False),
        ("What is the largest file in docs?", False),
        ("How many files are in docs?", False),
        ("Read notes.txt", False),
    ],
)
def test_a_request_that_only_asks_what_a_place_holds(request_text: str, asks: bool) -> None:
    from steadyloop.steering.tool_gate import asks_contents

    assert asks_contents(request_text) is asks


@given(st.text(max_size=500))
def test_reading_whether_contents_are_asked_is_total(text: str) -> None:
    from steadyloop.steering.tool_gate import asks_contents

    assert isinstance(asks_contents(text), bool)
