"""Optional choices the request never spoke of are left to the tool: a decided call that picked a value of an
optional ``enum`` argument the user did not name loses that argument, so the tool's default stands.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the tool gets the call without the unasked choice."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.loop import LoopPolicy
from steadyloop.steering import ToolRouting
from steadyloop.steering.decision import ANSWER, Decision
from steadyloop.steering.unasked import without_unasked
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy

from ._routed import run_routed, text

WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {
                "type": "object",
                "required": ["location"],
                "properties": {
                    "location": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "fahrenheit"},
                    "detail": {"type": "string", "enum": ["basic", "detailed"]},
                    "order": {"type": "string", "enum": ["ASC", "DESC"]},
                    "kind": {"type": "string", "enum": ["rain", "snow"]},
                    "note": {"type": "string"},
                },
            },
        },
    }
]


def _kept(arguments: dict[str, Any], request: str) -> dict[str, Any]:
    return without_unasked(Decision("weather", arguments), request, WEATHER).arguments


def test_an_optional_listed_choice_the_request_never_named_is_dropped() -> None:
    assert _kept({"location": "Boston, MA", "unit": "celsius"}, "What's the weather in Boston?") == {
        "location": "Boston, MA"
    }
    # every call of the decision is read
    both = Decision(
        "weather", {"location": "Boston", "unit": "celsius"}, (("weather", {"location": "Nice"}),)
    )
    assert without_unasked(both, "Weather in Boston and Nice", WEATHER).calls == (
        ("weather", {"location": "Boston"}),
        ("weather", {"location": "Nice"}),
    )


def test_a_choice_the_request_speaks_of_is_kept_in_its_own_words() -> None:
    assert _kept({"location": "Boston", "unit": "celsius"}, "Weather in Boston, in Celsius") == {
        "location": "Boston",
        "unit": "celsius",
    }
    assert (
        _kept({"location": "Boston", "detail": "detailed"}, "Boston's weather in detail")["detail"]
        == "detailed"
    )
    assert (
        _kept({"location": "Boston", "order": "DESC"}, "Boston, newest first, descending")["order"] == "DESC"
    )


def test_a_choice_where_the_request_names_the_argument_itself_is_kept() -> None:
    # "Comic" is no value of the list; the user still asked for a kind, and "rain" is the model's reading
    assert (
        _kept({"location": "Boston", "kind": "rain"}, "Boston, the comic kind of weather")["kind"] == "rain"
    )
    # the whole word names it: "kindly" does not
    assert "kind" not in _kept({"location": "Boston", "kind": "rain"}, "Kindly tell me Boston's weather")


def test_a_request_in_another_script_is_not_read_against_the_values() -> None:
    # "use Celsius to show the temperature": no word of it is a word of the value
    chosen = {"location": "Shanghai, China", "unit": "celsius"}
    assert _kept(chosen, "我想知道上海目前的天气状况，可以帮我查询吗？顺便使用摄氏度来显示温度。") == chosen
    assert _kept(chosen, "¿Qué tiempo hace en Shanghái hoy, por favor?") == {"location": "Shanghai, China"}


def test_required_free_text_and_default_values_are_kept() -> None:
    required = {"location": "Boston", "unit": "fahrenheit", "note": "windy"}
    assert _kept(required, "What's it like out?") == required  # the default and free text stay
    # a value of codes only ("es-ES" for "in Spanish", "C") is not judged
    short = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"u": {"type": "string", "enum": ["C", "F"]}}}}}]  # fmt: skip
    assert without_unasked(Decision("weather", {"u": "C"}), "in celsius", short).arguments == {"u": "C"}
    assert without_unasked(Decision("weather", {"u": "F"}), "no unit named", short).arguments == {"u": "F"}
    free = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"free": {"type": "string", "enum": ["True", "False"]},
                                         "year": {"type": "string", "enum": ["2016", "2017"]}}}}}]  # fmt: skip
    kept = {"free": "True", "year": "2017"}
    assert (
        without_unasked(Decision("weather", kept), "free to enter, from six years ago", free).arguments
        == kept
    )
    assert without_unasked(Decision(ANSWER, {}), "anything", WEATHER) == Decision(ANSWER, {})


@given(
    request=st.text(max_size=200),
    arguments=st.dictionaries(
        st.sampled_from(["location", "unit", "detail", "order", "x"]),
        st.none()
        | st.integers()
        | st.floats()
        | st.text(max_size=12)
        | st.sampled_from(["rain", "snow", "DESC"]),
    ),
)
def test_any_decision_keeps_its_calls_and_loses_only_optional_listed_choices(
    request: str, arguments: dict[str, Any]
) -> None:
    out = without_unasked(Decision("weather", arguments), request, WEATHER)
    assert out.name == "weather"
    dropped = arguments.keys() - out.arguments.keys()
    assert dropped <= {"unit", "detail", "order", "kind"}
    assert all(out.arguments[k] is arguments[k] for k in out.arguments)


def test_the_reading_is_linear_in_the_request() -> None:
    def timed(n: int) -> float:
        request = "snowfall descending details " * n
        started = time.perf_counter()
        without_unasked(
            Decision("weather", {"location": "x", "kind": "rain", "order": "ASC"}), request, WEATHER
        )
        return time.perf_counter() - started

    timed(1_000)
    assert timed(100_000) < 100 * max(timed(1_000), 1e-4) * 4


asked: list[dict[str, Any]] = []


@tool
def weather(location: str, unit: Literal["celsius", "fahrenheit"] = "fahrenheit") -> str:
    """The current weather at a location."""
    asked.append({"location": location, "unit": unit})
    return f"{location}: 64F" if unit == "fahrenheit" else f"{location}: 18C"


async def _run(routing: ToolRouting | bool) -> list[dict[str, Any]]:
    asked.clear()
    policy = LoopPolicy(
        tool_routing=routing, tool_gate=False, retry=RetryPolicy(base_delay_s=0.01, max_retries=1)
    )
    call = [{"name": "weather", "arguments": {"location": "Boston, MA", "unit": "celsius"}}]
    replies = [text(json.dumps(call)), text(json.dumps([{"name": ANSWER}])), text("64F in Boston.")]
    async with ScriptedServer(*replies) as server:
        await run_routed(server, "What's the weather in Boston?", [weather], policy)
    return asked


async def test_a_routed_step_leaves_an_unasked_choice_to_the_tool() -> None:
    assert await _run(True) == [{"location": "Boston, MA", "unit": "fahrenheit"}]


async def test_a_host_may_keep_the_model_s_choices() -> None:
    assert await _run(ToolRouting(drop_unasked=False)) == [{"location": "Boston, MA", "unit": "celsius"}]
