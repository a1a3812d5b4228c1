"""A follow-up the earlier answer already holds ("how many is that?" after a listing) is answered from the
conversation: the gate is shown the exchange before the request and may file it as already said."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, MessageUpdate, SideTask
from steadyloop.loop import LoopPolicy, LoopResult, run_agent_loop
from steadyloop.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.examples import ALREADY_SAID, FIRST_EXAMPLES, FOLLOW_UP_EXAMPLES, KINDS, GateExamples
from steadyloop.steering.grounding import AnswerGaps, count_gaps, counted_earlier
from steadyloop.steering.routing import ToolRouting
from steadyloop.steering.tool_gate import (
    FOLLOW_UP_SCHEMA,
    KIND_SCHEMA,
    earlier_exchange,
    gate_messages,
    gate_schema,
    read_gate,
)
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint

from ._routed import text


@tool
def list_dir(path: str = ".") -> str:
    """List a folder.

    Args:
        path: the folder.
    """
    return "a.md\nb.md"


TOOLS = [list_dir.definition()]
LISTING = "docs holds a.md, b.md and c.md."
FOLLOW_UP = [
    {"role": "user", "content": "List the docs folder."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.md\nb.md\nc.md"},
    {"role": "assistant", "content": LISTING},
    {"role": "user", "content": "How many is that?"},
]
WITH_FOLLOW_UPS = GateExamples(first=FIRST_EXAMPLES, later=(), follow_ups=FOLLOW_UP_EXAMPLES)


def test_the_earlier_exchange_is_the_request_before_and_the_last_answer_text_to_it() -> None:
    assert earlier_exchange(FOLLOW_UP) == ("List the docs folder.", LISTING)
    # a first request has none; nor has an earlier request answered only with calls
    assert earlier_exchange(FOLLOW_UP[:1]) is None
    assert earlier_exchange([*FOLLOW_UP[:3], FOLLOW_UP[4]]) is None
    # content given as parts is read as its text
    parts = [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": "Hello"},
    ]
    assert earlier_exchange([*parts, {"role": "user", "content": "And?"}]) == ("Hi", "Hello")
    # long ones are cut short: the gate's question stays small
    long = [{"role": "user", "content": "x" * 5000}, {"role": "assistant", "content": "y" * 5000}]
    before, answer = earlier_exchange([*long, {"role": "user", "content": "ok?"}]) or ("", "")
    assert len(before) == len(answer) == 600


def test_a_follow_up_is_shown_with_the_exchange_before_it_and_may_be_already_said() -> None:
    body = {"messages": FOLLOW_UP, "tools": TOOLS}
    asked = gate_messages(body, WITH_FOLLOW_UPS)
    assert asked is not None
    assert asked[-1] == {
        "role": "user",
        "content": f"Earlier request: List the docs folder.\nEarlier answer: {LISTING}\nRequest: How many is that?",
    }
    assert ALREADY_SAID in asked[0]["content"]
    shown = {json.loads(m["content"])["about"] for m in asked if m["role"] == "assistant"}
    assert shown == {*KINDS, ALREADY_SAID}  # a follow-up that needs a tool is shown too
    assert gate_schema(body, WITH_FOLLOW_UPS) == FOLLOW_UP_SCHEMA
    assert read_gate(json.dumps({"about": ALREADY_SAID})) == "answer"


def test_a_first_request_and_examples_without_follow_ups_ask_as_before() -> None:
    first = {"messages": FOLLOW_UP[-1:], "tools": TOOLS}
    asked = gate_messages(first, WITH_FOLLOW_UPS)
    assert asked is not None and asked[-1]["content"] == "How many is that?"
    assert ALREADY_SAID not in json.dumps(asked) and gate_schema(first, WITH_FOLLOW_UPS) == KIND_SCHEMA
    plain = GateExamples(first=FIRST_EXAMPLES, later=())
    asked = gate_messages({"messages": FOLLOW_UP, "tools": TOOLS}, plain)
    assert asked is not None and asked[-1]["content"] == "How many is that?"
    assert gate_schema({"messages": FOLLOW_UP, "tools": TOOLS}, plain) == KIND_SCHEMA


_MESSAGE = st.dictionaries(
    st.sampled_from(["role", "content", "tool_calls"]),
    st.one_of(
        st.none(),
        st.sampled_from(["user", "assistant", "tool"]),
        st.text(max_size=30),
        st.integers(),
        st.lists(st.dictionaries(st.sampled_from(["type", "text"]), st.text(max_size=5)), max_size=2),
    ),
)


@given(st.lists(st.one_of(_MESSAGE, st.integers(), st.none()), max_size=8))
def test_reading_the_earlier_exchange_of_any_messages_is_total(messages: list[Any]) -> None:
    found = earlier_exchange(messages)
    assert found is None or (all(isinstance(s, str) and s for s in found))
    asked = gate_messages({"messages": messages, "tools": TOOLS}, WITH_FOLLOW_UPS)
    assert asked is None or asked[-1]["role"] == "user"


async def test_a_follow_up_filed_as_already_said_is_answered_without_a_call() -> None:
    policy = LoopPolicy(
        tool_routing=ToolRouting(question="kind", examples=WITH_FOLLOW_UPS, several=False),
        retry=RetryPolicy(base_delay_s=0.01, max_retries=1),
    )
    events: list[Event] = []
    async with ScriptedServer(text(json.dumps({"about": ALREADY_SAID})), text("That is 3 files.")) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[
                UserMessage(content="List the docs folder."),
                AssistantMessage(content=LISTING),
                UserMessage(content="How many is that?"),
            ],
            tools=[list_dir],
            policy=policy,
            on_event=events.append,
        )
        gate, answer = (r.json for r in server.chat_requests)
    assert result.turn.content == "That is 3 files." and not result.turn.tool_calls
    assert gate["response_format"]["json_schema"]["schema"] == FOLLOW_UP_SCHEMA
    assert gate["messages"][-1]["content"].startswith("Earlier request: List the docs folder.")
    # the answer is written with the conversation in front of it, and no tools to call
    assert "tools" not in answer and answer["messages"][-1] == {
        "role": "user",
        "content": "How many is that?",
    }
    assert [e.kind for e in events if isinstance(e, SideTask)] == ["tool_gate"]


BULLETED = "- a.md\n- b.md\n- docs/"
COUNTED = [
    {"role": "user", "content": "List the files here."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
    {"role": "tool", "tool_call_id": "c1", "content": BULLETED},
    {"role": "assistant", "content": "Here: a.md, b.md and docs/."},
    {"role": "user", "content": "How many files are in that list?"},
]


def test_a_count_that_refers_back_is_held_to_the_earlier_result() -> None:
    assert counted_earlier(COUNTED) == ("How many files are in that list?", BULLETED)
    for request in ("how many of them are folders?", "What is the number of entries listed?"):
        assert counted_earlier([*COUNTED[:-1], {"role": "user", "content": request}]) is not None
    # a count that asks nothing of the earlier result, and one that is no count, are not held
    for request in ("How many planets are there?", "How many files start with a letter that is a vowel?"):
        assert counted_earlier([*COUNTED[:-1], {"role": "user", "content": request}]) is None
    assert counted_earlier([*COUNTED[:-1], {"role": "user", "content": "Read that list."}]) is None
    # a tool ran for the question already: the usual check holds its answer
    assert counted_earlier([*COUNTED, *COUNTED[1:3]]) is None
    # the earlier request got no result, or one that says no count, or two
    assert counted_earlier([COUNTED[0], COUNTED[3], COUNTED[4]]) is None
    prose = [*COUNTED[:2], {**COUNTED[2], "content": "Some text."}, *COUNTED[3:]]
    assert counted_earlier(prose) is None
    two = [*COUNTED[:3], COUNTED[2], *COUNTED[3:]]
    assert counted_earlier(two) is None
    assert counted_earlier(COUNTED[-1:]) is None


def test_only_the_count_is_held() -> None:
    assert count_gaps("There are 3 entries.", BULLETED, "how many in that list?") == AnswerGaps()
    assert count_gaps("Two files and one folder.", BULLETED, "how many in that list?") == AnswerGaps()
    wrong = count_gaps("There are 8 files, like z.md.", BULLETED, "how many files are in that list?")
    assert wrong == AnswerGaps(count="2 files and 1 folder (3 entries in all)")
    assert count_gaps("", BULLETED, "how many in that list?") == AnswerGaps()


@given(st.lists(st.one_of(_MESSAGE, st.integers(), st.none()), max_size=8))
def test_reading_a_count_of_any_messages_is_total(messages: list[Any]) -> None:
    found = counted_earlier(messages)
    assert found is None or all(isinstance(s, str) for s in found)


@tool
def listing(path: str = ".") -> str:
    """List a folder."""
    return BULLETED


async def ask_how_many_after_a_listing(
    *answers: str,
) -> tuple[LoopResult, list[Event], list[dict[str, Any]]]:
    """One routed run asking "How many files are in that list?" after a listing of ``BULLETED``, the
    model answering ``answers`` in turn: the result, its events, and the bodies sent."""
    policy = LoopPolicy(
        tool_routing=ToolRouting(question="kind", examples=WITH_FOLLOW_UPS, several=False),
        retry=RetryPolicy(base_delay_s=0.01, max_retries=1),
    )
    events: list[Event] = []
    replies = [text(json.dumps({"about": ALREADY_SAID})), *(text(a) for a in answers)]
    async with ScriptedServer(*replies) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m", temperature=0.2),
            messages=[
                UserMessage(content="List the files here."),
                AssistantMessage(tool_calls=(ToolCall("c1", "listing", {}),)),
                ToolResultMessage(call_id="c1", content=BULLETED, name="listing"),
                AssistantMessage(content="Here: a.md, b.md and docs/."),
                UserMessage(content="How many files are in that list?"),
            ],
            tools=[listing],
            policy=policy,
            on_event=events.append,
        )
    return result, events, [r.json for r in server.chat_requests]


def shown(events: list[Event]) -> str:
    return "".join(e.delta for e in events if isinstance(e, MessageUpdate) and e.kind == "text")


async def test_a_miscounted_follow_up_is_sent_back_once_and_shown_right() -> None:
    result, events, bodies = await ask_how_many_after_a_listing(
        "There are 8 files.", "There are 2 files and 1 folder."
    )
    _, first, again = bodies
    # the wrong count is never shown: the answer is held, then passed on whole
    assert result.turn.content == shown(events) == "There are 2 files and 1 folder."
    assert first["temperature"] == 0 and "tools" not in first
    assert again["messages"][-2] == {"role": "assistant", "content": "There are 8 files."}
    assert "the tool returned 2 files and 1 folder (3 entries in all)" in again["messages"][-1]["content"]


async def test_a_count_wrong_again_after_the_correction_gives_way_to_the_count_read_off_the_listing() -> None:
    # In a fresh clone, asked how many files docs/ held, the 1.5B model answered "12 entries" before and
    # after the correction: the answer shown is then the count the runtime read, with what it counted.
    result, events, _ = await ask_how_many_after_a_listing(
        "There are 3 entries.", "There are 3 entries in the list."
    )
    counted = f"2 files and 1 folder (3 entries in all).\n\n{BULLETED.strip()}"
    assert result.turn.content == shown(events) == counted
