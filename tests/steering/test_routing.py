"""Tool routing: a step asked as a decision held to a schema, then a call or a streamed answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import EndpointError
from steadyloop.events import Event, Notice, UsageReport
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.decision import ANSWER, ANSWER_GRAMMAR, decision_body, decision_schema, read_decision
from steadyloop.steering.routing import ToolRouting
from steadyloop.testing.chunks import stream_of, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import Tool, tool
from steadyloop.turn import RetryPolicy
from steadyloop.turn.capabilities import ModelCapabilities, model_capabilities_for
from steadyloop.wire.endpoints import Endpoint

from ._routed import run_routed, text

ROUTED = LoopPolicy(
    tool_routing=ToolRouting(several=False),
    tool_gate=False,
    retry=RetryPolicy(base_delay_s=0.01, max_retries=1),
)


@tool
def list_dir(path: str = ".") -> str:
    """List a folder."""
    return "notes.txt\ndocs/"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 18C"


TOOLS = [get_weather.definition(), list_dir.definition()]


async def run(server: ScriptedServer, question: str) -> tuple[Any, list[Event]]:
    return await run_routed(server, question, [get_weather, list_dir], ROUTED)


def test_the_schema_allows_each_tool_with_its_arguments_or_an_answer() -> None:
    schema = decision_schema(TOOLS)
    names = [b["properties"]["name"]["const"] for b in schema["anyOf"]]
    assert names == ["get_weather", "list_dir", ANSWER]
    weather = schema["anyOf"][0]
    assert weather["properties"]["arguments"] == get_weather.parameters
    assert weather["required"] == ["name", "arguments"]


def test_the_decision_keeps_the_prompt_and_asks_at_temperature_zero() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "temperature": 0.8}
    asked = decision_body(body, ModelCapabilities())
    assert asked is not None
    assert asked["messages"] == body["messages"] and asked["tools"] == body["tools"]
    assert asked["tool_choice"] == "none" and asked["temperature"] == 0
    assert asked["response_format"]["json_schema"]["schema"] == decision_schema(TOOLS)
    no_temperature = ModelCapabilities(chosen_temperature=False)
    assert decision_body(body, no_temperature)["temperature"] == 0.8  # type: ignore[index]
    assert decision_body({"model": "m", "messages": []}, ModelCapabilities()) is None


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"name": "list_dir", "arguments": {"path": "docs"}}', ("list_dir", {"path": "docs"})),
        (
            '```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```',
            ("get_weather", {"city": "Oslo"}),
        ),
        ('{"name": "answer"}', (ANSWER, {})),
        ('{"name": "list_dir", "arguments": "{\\"path\\": \\".\\"}"}', ("list_dir", {"path": "."})),
        ('{"name": "rm_rf", "arguments": {}}', None),
        ("The folder has two files.", None),
        ('{"name": "list_dir", "arguments": [1]}', None),
        ("", None),
    ],
)
def test_reading_a_decision(reply: str, expected: tuple[str, dict[str, Any]] | None) -> None:
    decision = read_decision(reply, TOOLS)
    assert (None if decision is None else (decision.name, decision.arguments)) == expected


@given(st.text(max_size=400))
def test_reading_any_reply_is_total(reply: str) -> None:
    decision = read_decision(reply, TOOLS)
    assert decision is None or decision.name in ("get_weather", "list_dir", ANSWER)


async def test_a_decided_call_runs_and_the_answer_streams_after_it() -> None:
    async with ScriptedServer(
        text('{"name": "list_dir", "arguments": {"path": "."}}'),
        text('{"name": "answer"}'),
        text("The folder holds notes.txt and docs/."),
    ) as server:
        result, events = await run(server, "What is in this folder?")
        bodies = [r.json for r in server.chat_requests]
    assert [c.name for c in result.messages[1].tool_calls] == ["list_dir"]
    assert result.turn.content == "The folder holds notes.txt and docs/."
    first, second, third = bodies
    assert first["response_format"]["type"] == "json_schema" and first["temperature"] == 0
    assert first["tool_choice"] == "none"
    assert second["messages"] == third["messages"]  # the answer reuses the decision's prompt
    assert "response_format" not in third and third["tool_choice"] == "none"
    assert third["grammar"] == ANSWER_GRAMMAR  # an answer may not open like a call
    shown = "".join(e.delta for e in events if e.type == "message_update" and e.kind == "text")
    assert shown == "The folder holds notes.txt and docs/."  # the decisions were never shown as text


async def test_an_answer_that_looks_like_a_call_stays_an_answer() -> None:
    written = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'
    async with ScriptedServer(text('{"name": "answer"}'), text(written)) as server:
        result, _ = await run(server, "How do tools look?")
    assert result.turn.content == written and not result.turn.tool_calls and result.steps == 1


async def test_a_server_that_ignores_the_schema_latches_routing_off() -> None:
    async with ScriptedServer(text("Sure, here are the files."), text("Hello there.")) as server:
        result, events = await run(server, "Say hello.")
        bodies = [r.json for r in server.chat_requests]
        endpoint = Endpoint(server.base_url)
    assert result.turn.content == "Hello there."
    assert "response_format" in bodies[0] and "response_format" not in bodies[1]
    assert not model_capabilities_for(endpoint, "m").tool_routing
    assert any(isinstance(e, Notice) and e.name == "tool_routing" for e in events)


def test_the_decision_is_held_below_its_own_ceiling_in_the_models_spelling() -> None:
    body = {"model": "m", "messages": [], "tools": TOOLS}
    modern = ModelCapabilities(legacy_token_limit=False)
    assert decision_body(body, ModelCapabilities(), ceiling=1024)["max_tokens"] == 1024
    assert decision_body(body, modern, ceiling=1024)["max_completion_tokens"] == 1024
    asked = decision_body({**body, "max_completion_tokens": 200}, ModelCapabilities(), ceiling=1024)
    assert asked["max_completion_tokens"] == 200 and "max_tokens" not in asked  # a lower ceiling stands
    assert decision_body({**body, "max_tokens": 9000}, modern, ceiling=1024)["max_tokens"] == 1024
    assert "max_tokens" not in decision_body(body, ModelCapabilities())  # no ceiling asked: none set


async def test_a_decision_cut_at_its_ceiling_sends_the_step_as_usual_and_routing_stays_on() -> None:
    ran_on = Reply.stream(
        stream_of('{"name": "get_weather", "arguments": {"city": "Paris\\n\\n', finish="length")
    )
    async with ScriptedServer(ran_on, text("Paris is sunny.")) as server:
        result, events = await run(server, "Weather in Paris?")
        bodies = [r.json for r in server.chat_requests]
        endpoint = Endpoint(server.base_url)
    assert result.turn.content == "Paris is sunny."
    assert bodies[0]["max_tokens"] == 1024 and "response_format" not in bodies[1]
    assert model_capabilities_for(endpoint, "m").tool_routing  # one long decision is no broken server
    (notice,) = [e.text for e in events if isinstance(e, Notice) and e.name == "tool_routing"]
    assert "ceiling" in notice


async def test_a_decision_that_falls_into_a_loop_sends_the_step_as_usual() -> None:
    # Stopped mid-string, a looping decision would be repaired into a call with the loop as its value.
    looping = Reply.stream(
        stream_of(['{"name": "get_weather", "arguments": {"city": "', *(["Paris, "] * 400)], finish=None),
        stall_after=300,
    )
    async with ScriptedServer(looping, text("Paris is sunny.")) as server:
        result, events = await run(server, "Weather in Paris?")
        endpoint = Endpoint(server.base_url)
    assert result.turn.content == "Paris is sunny." and not result.turn.tool_calls
    assert model_capabilities_for(endpoint, "m").tool_routing
    notices = {e.name: e.text for e in events if isinstance(e, Notice)}
    assert "loop" in notices["repetition"] and "fell into a loop" in notices["tool_routing"]


async def test_a_refused_schema_latches_structured_output_and_the_step_goes_as_usual() -> None:
    refusal = Reply.json(
        {"error": {"message": "Unrecognized request argument supplied: response_format"}}, status=400
    )
    async with ScriptedServer(refusal, text("unused"), text("Hi.")) as server:
        result, _ = await run(server, "Say hi.")
        bodies = [r.json for r in server.chat_requests]
        endpoint = Endpoint(server.base_url)
    assert not model_capabilities_for(endpoint, "m").structured_output
    assert result.turn.content == "Hi."  # the reply to the schema-less decision is not the user's answer
    assert "response_format" in bodies[0] and all("response_format" not in b for b in bodies[1:])


async def test_routing_off_sends_the_step_as_it_always_was() -> None:
    async with ScriptedServer(text("Hello.")) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="hi")],
            tools=[list_dir],
        )
        body = server.chat_requests[0].json
    assert result.turn.content == "Hello." and "response_format" not in body


def test_decision_schema_skips_malformed_entries() -> None:
    schema = decision_schema([{"type": "function"}, {"function": {"name": 3}}, *TOOLS])
    assert len(schema["anyOf"]) == 3
    assert json.dumps(schema)


def test_tool_choice_shapes_the_decision() -> None:
    body: dict[str, Any] = {"model": "m", "messages": [], "tools": TOOLS}
    required = decision_body({**body, "tool_choice": "required"}, ModelCapabilities())
    assert required is not None
    names = [
        b["properties"]["name"]["const"]
        for b in required["response_format"]["json_schema"]["schema"]["anyOf"]
    ]
    assert names == ["get_weather", "list_dir"]
    named = decision_body(
        {**body, "tool_choice": {"type": "function", "function": {"name": "list_dir"}}}, ModelCapabilities()
    )
    assert named is not None
    [only] = named["response_format"]["json_schema"]["schema"]["anyOf"]
    assert only["properties"]["name"]["const"] == "list_dir"
    assert decision_body({**body, "tool_choice": "none"}, ModelCapabilities()) is None
    unknown = {"type": "function", "function": {"name": "nope"}}
    assert decision_body({**body, "tool_choice": unknown}, ModelCapabilities()) is None


async def test_the_call_just_made_again_is_read_as_the_choice_to_answer() -> None:
    # "." is list_dir's default: the first call goes out without it (unasked.py), and the second, with
    # it, is still the same call
    again = text('{"name": "list_dir", "arguments": {"path": "."}}')
    async with ScriptedServer(again, again, text("It holds notes.txt and docs/.")) as server:
        result, _ = await run(server, "What is in this folder?")
        bodies = [r.json for r in server.chat_requests]
    calls = [c for m in result.messages if hasattr(m, "tool_calls") for c in m.tool_calls]
    assert [c.name for c in calls] == ["list_dir"]
    assert result.turn.content == "It holds notes.txt and docs/." and len(bodies) == 3
    assert "response_format" not in bodies[2]


async def test_a_call_made_two_steps_back_again_is_read_as_the_choice_to_answer() -> None:
    # two calls in turn, then the first again: without a look past the last step, a small model's
    # ping-pong runs until the loop guard stops the run
    listing = text('{"name": "list_dir", "arguments": {"path": "."}}')
    weather = text('{"name": "get_weather", "arguments": {"city": "Oslo"}}')
    async with ScriptedServer(listing, weather, listing, text("Done.")) as server:
        result, _ = await run(server, "What is in this folder?")
        bodies = [r.json for r in server.chat_requests]
    calls = [c.name for m in result.messages if hasattr(m, "tool_calls") for c in m.tool_calls]
    assert calls == ["list_dir", "get_weather"]
    assert result.turn.content == "Done." and len(bodies) == 4 and "response_format" not in bodies[3]


async def test_an_answered_step_reports_one_read_of_the_prompt_and_both_replies() -> None:
    decision = Reply.stream(stream_of('{"name": "answer"}', usage=usage_chunk(400, 6, cached=380)))
    reply = Reply.stream(stream_of("Hello.", usage=usage_chunk(400, 3, cached=400)))
    async with ScriptedServer(decision, reply) as server:
        result, events = await run(server, "Say hello.")
    [report] = [e for e in events if isinstance(e, UsageReport)]
    usage = report.turn
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (400, 380, 9)
    assert usage.total_tokens == 409 and result.usage.prompt_tokens == 400


@tool
def list_files(path: str = ".") -> str:
    """List a folder as bullets."""
    return "- docs/ (folder)\n- README.md\n- pyproject.toml"


async def run_listing(
    server: ScriptedServer, question: str = "What is in this folder?", tools: Sequence[Tool] = (list_files,)
) -> tuple[Any, list[Event], list[dict[str, Any]]]:
    events: list[Event] = []
    result = await run_agent_loop(
        Endpoint(server.base_url),
        ModelParams(model="m", temperature=0.2),
        messages=[UserMessage(content=question)],
        tools=tools,
        policy=ROUTED,
        on_event=events.append,
    )
    return result, events, [r.json for r in server.chat_requests]


def shown_text(events: list[Event]) -> str:
    return "".join(e.delta for e in events if e.type == "message_update" and e.kind == "text")


async def test_an_answer_that_leaves_out_a_listed_entry_is_asked_again_and_shown_once() -> None:
    complete = "It holds docs/, README.md and pyproject.toml."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("It holds docs/ and README.md."),
        text(complete),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert result.turn.content == complete
    assert shown_text(events) == complete  # the first answer was held back, never shown
    answered, asked_again = bodies[2], bodies[3]
    assert answered["temperature"] == 0 and asked_again["temperature"] == 0
    assert asked_again["messages"][:-2] == answered["messages"]
    said, told = asked_again["messages"][-2:]
    assert said == {"role": "assistant", "content": "It holds docs/ and README.md."}
    assert told["role"] == "user" and "pyproject.toml" in told["content"]
    assert any(isinstance(e, Notice) and e.name == "grounding" for e in events)


async def test_a_held_answer_says_once_as_it_starts_that_it_is_written_and_checked() -> None:
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("It holds docs/ and README.md."),
        text("It holds docs/, README.md and pyproject.toml."),
    ) as server:
        _result, events, _bodies = await run_listing(server)
    held = [i for i, e in enumerate(events) if isinstance(e, Notice) and e.name == "answer_held"]
    texts = [i for i, e in enumerate(events) if e.type == "message_update" and e.kind == "text"]
    assert len(held) == 1 and held[0] < texts[0]  # once for both requests, before anything is shown
    assert events[held[0]].step == events[texts[0]].step


async def test_a_made_up_path_is_sent_back_and_a_worse_second_answer_is_not_taken() -> None:
    first = "It holds docs/, README.md, pyproject.toml and tests/cli/."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(first),
        text("Nothing."),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert "tests/cli/" in bodies[3]["messages"][-1]["content"]
    assert result.turn.content == first and shown_text(events) == first


@tool
def read_notes(path: str) -> str:
    """Read a file."""
    raise FileNotFoundError(f"{path}: no such file; the working folder holds setup.cfg, setup.py")


async def test_a_figure_from_nowhere_after_every_tool_failed_gives_way_to_the_failure() -> None:
    # Told requirements.txt was not there, the 1.5B model answered "The project requires Python 3.8 or
    # higher." and, sent back, said it again: the failure is what is shown.
    made_up = "The project requires Python 3.8 or higher."
    async with ScriptedServer(
        text('{"name": "read_notes", "arguments": {"path": "requirements.txt"}}'),
        text('{"name": "answer"}'),
        text(made_up),
        text(made_up),
    ) as server:
        result, events, bodies = await run_listing(
            server, "Which Python version does this project require?", tools=(read_notes,)
        )
    assert "3.8" in bodies[3]["messages"][-1]["content"]  # sent back, naming what no tool returned
    failure = (
        "FileNotFoundError: requirements.txt: no such file; the working folder holds setup.cfg, setup.py"
    )
    assert result.turn.content == failure and shown_text(events) == failure


async def test_an_answer_that_says_what_failed_after_every_tool_failed_stands() -> None:
    honest = "There is no requirements.txt; setup.cfg or setup.py may say."
    async with ScriptedServer(
        text('{"name": "read_notes", "arguments": {"path": "requirements.txt"}}'),
        text('{"name": "answer"}'),
        text(honest),
    ) as server:
        result, _events, bodies = await run_listing(
            server, "Which Python version does this project require?", tools=(read_notes,)
        )
    assert len(bodies) == 3 and result.turn.content == honest


async def test_an_answer_true_to_its_results_is_asked_once() -> None:
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("docs/, README.md, pyproject.toml"),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert len(bodies) == 3 and result.turn.content == "docs/, README.md, pyproject.toml"
    assert not any(isinstance(e, Notice) and e.name == "grounding" for e in events)


async def test_an_answer_still_short_of_the_listing_after_the_correction_gives_way_to_the_listing() -> None:
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("There are three entries."),
        text("It holds docs/ and README.md."),
    ) as server:
        result, events, _ = await run_listing(server)
    listing = "- docs/ (folder)\n- README.md\n- pyproject.toml"
    assert result.turn.content == listing and shown_text(events) == listing


async def test_a_miscounted_listing_is_sent_back_with_its_count_and_the_right_count_is_shown() -> None:
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("There are 5 entries."),
        text("There are 3 entries."),
    ) as server:
        result, events, bodies = await run_listing(server, "How many entries are in this folder?")
    told = bodies[3]["messages"][-1]["content"]
    assert "3 entries: 2 files and 1 folder" in told
    assert result.turn.content == "There are 3 entries." and shown_text(events) == "There are 3 entries."
    assert any(isinstance(e, Notice) and e.name == "grounding" and "wrong count" in e.text for e in events)


async def test_a_count_stated_unasked_and_wrong_is_sent_back_and_then_gives_way_to_the_listing() -> None:
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("There are 5 files: docs/, README.md and pyproject.toml."),
        text("docs/, README.md and pyproject.toml."),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert "the tool returned 3 entries: 2 files and 1 folder" in bodies[3]["messages"][-1]["content"]
    assert result.turn.content == "docs/, README.md and pyproject.toml."
    assert shown_text(events) == result.turn.content  # the wrong count was never shown
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("There are 5 files: docs/, README.md and pyproject.toml."),
        text("There are 6 files: docs/, README.md and pyproject.toml."),
    ) as server:
        result, events, _ = await run_listing(server)
    assert result.turn.content == "- docs/ (folder)\n- README.md\n- pyproject.toml"


async def test_an_answer_that_writes_out_a_call_is_sent_back_for_one_in_words() -> None:
    written = 'It holds:\n```json\n{"name": "list_files", "arguments": {"path": "docs"}}\n```'
    in_words = "It holds docs/, README.md and pyproject.toml."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(written),
        text(in_words),
    ) as server:
        result, events, bodies = await run_listing(server, "Where are the docs?")
    told = bodies[3]["messages"][-1]["content"]
    assert "speaks to the user of list_files" in told and "say in words" in told
    assert result.turn.content == in_words and shown_text(events) == in_words
    assert any(isinstance(e, Notice) and "tools spoken of" in e.text for e in events)


async def test_an_answer_still_writing_out_a_call_when_sent_back_gives_way_to_the_results() -> None:
    # Asked about a lease, the 1.5B model searched, read todo.txt, and answered 'The file contains the
    # following lines:' and a fenced call reading todo.txt again; the results are what it had to say.
    written = 'The file contains the following lines:\n```json\n{"name": "list_files", "arguments": {}}\n```'
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(written),
        text(written),
    ) as server:
        result, events, bodies = await run_listing(server, "Where are the docs?")
    assert len(bodies) == 4
    assert result.turn.content == "- docs/ (folder)\n- README.md\n- pyproject.toml"
    assert shown_text(events) == result.turn.content


async def test_an_answer_handing_on_the_tools_output_is_shown_without_saying_so() -> None:
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("The tool returned: docs/, README.md and pyproject.toml."),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert len(bodies) == 3  # not sent back: asked again, the model said it again
    assert result.turn.content == "docs/, README.md and pyproject.toml."
    assert shown_text(events) == result.turn.content


async def test_a_count_of_a_folder_the_tools_did_not_list_is_not_held_to_the_listing_they_made() -> None:
    # Asked about src/app/cli, the model listed src: holding its answer to that listing's count would
    # "correct" it to the wrong folder's.
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {"path": "src"}}'),
        text('{"name": "answer"}'),
        text("There are 5 entries."),
    ) as server:
        result, events, bodies = await run_listing(server, "How many entries are in src/app/cli?")
    assert len(bodies) == 3 and result.turn.content == "There are 5 entries."
    assert not any(isinstance(e, Notice) and e.name == "grounding" for e in events)
    # listed where it was asked, the same count is sent back
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {"path": "./src/app/cli/"}}'),
        text('{"name": "answer"}'),
        text("There are 5 entries."),
        text("There are 3 entries."),
    ) as server:
        result, _events, bodies = await run_listing(server, "How many entries are in src/app/cli?")
    assert len(bodies) == 4 and result.turn.content == "There are 3 entries."


@tool
def read_poem(path: str) -> str:
    """Read a text file."""
    return "Roses are red\nViolets are blue\nSugar is sweet\n\nAnd so are you"


async def test_a_miscounted_file_is_sent_back_with_its_lines_and_the_right_count_is_shown() -> None:
    async with ScriptedServer(
        text('{"name": "read_poem", "arguments": {"path": "poem.txt"}}'),
        text('{"name": "answer"}'),
        text("There are 10 lines in poem.txt."),
        text("There are 5 lines in poem.txt."),
    ) as server:
        result, events, bodies = await run_listing(server, "How many lines are in poem.txt?", [read_poem])
    told = bodies[3]["messages"][-1]["content"]
    assert "Your count is wrong: the tool returned 5 lines, 4 of them not blank." in told
    assert result.turn.content == "There are 5 lines in poem.txt."
    assert shown_text(events) == "There are 5 lines in poem.txt."  # the wrong count was never shown


async def test_a_count_still_wrong_after_the_correction_gives_way_to_the_count_read_off_the_result() -> None:
    # Neither wrong count is shown: the answer is the count the runtime read off the listing, and the
    # listing it counted, as an answer still short of a listing gives way to the listing.
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("There are 5 entries."),
        text("There are 6 entries."),
    ) as server:
        result, events, _ = await run_listing(server, "How many entries are in this folder?")
    counted = "3 entries: 2 files and 1 folder.\n\n- docs/ (folder)\n- README.md\n- pyproject.toml"
    assert result.turn.content == shown_text(events) == counted


FULL_AFTER_OUTPUT = (
    Path(__file__).resolve().parents[1] / "data" / "captures" / "cache_full_after_output.response.txt"
)


async def test_a_held_answer_cut_by_a_full_shared_cache_is_asked_again_and_shown_once() -> None:
    # Nothing of a held answer has been shown when llama-server ends its stream for a full shared cache
    # (a real capture: some text, then the 500 in the stream), so it is sent again rather than ending the run.
    complete = "It holds docs/, README.md and pyproject.toml."
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        Reply.from_capture(FULL_AFTER_OUTPUT),
        text(complete),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert result.turn.content == complete and shown_text(events) == complete
    assert bodies[3] == bodies[2]  # the same answer request, sent again whole
    assert [e.type for e in events].count("retry") == 1


async def test_a_shown_answer_cut_by_a_full_shared_cache_is_not_asked_again() -> None:
    # Without tool results the answer streams to the caller as it comes: what was shown is not shown twice.
    async with ScriptedServer(
        text('{"name": "answer"}'), Reply.from_capture(FULL_AFTER_OUTPUT), text("never asked")
    ) as server:
        with pytest.raises(EndpointError):
            await run_agent_loop(
                Endpoint(server.base_url),
                ModelParams(model="m"),
                messages=[UserMessage(content="Say hello.")],
                tools=[list_files],
                policy=ROUTED,
            )
        assert len(server.chat_requests) == 2


async def test_a_decision_cut_by_a_full_shared_cache_is_asked_again() -> None:
    # A decision is JSON read by the routing, never shown: cut after some of it, it is sent again.
    async with ScriptedServer(
        Reply.from_capture(FULL_AFTER_OUTPUT),
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text("It holds docs/, README.md and pyproject.toml."),
    ) as server:
        result, _events, bodies = await run_listing(server)
    assert result.turn.content == "It holds docs/, README.md and pyproject.toml."
    assert bodies[1] == bodies[0]


async def test_a_held_answer_stopped_in_a_loop_is_shown_with_the_loop_written_once() -> None:
    listed = "It holds:\n- docs/\n- README.md\n- pyproject.toml"
    async with ScriptedServer(
        text('{"name": "list_files", "arguments": {}}'),
        text('{"name": "answer"}'),
        text(listed + "\n" + "- pyproject.toml\n" * 200),
    ) as server:
        result, events, bodies = await run_listing(server)
    assert result.turn.content == listed and shown_text(events) == listed
    assert len(bodies) == 3  # whole with its loop written once: nothing to send back
    assert any(isinstance(e, Notice) and e.name == "repetition" for e in events)
