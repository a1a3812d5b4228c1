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


RECIPE = [
    {
        "type": "function",
        "function": {
            "name": "calories",
            "parameters": {
                "type": "object",
                "required": ["recipe"],
                "properties": {
                    "recipe": {"type": "string", "description": "e.g. 'Lasagna' or 'Soup'"},
                    "meal": {"type": "string", "description": "Could be 'Breakfast', 'Lunch', \"Dinner\"."},
                    "site": {"type": "string", "description": "The website, e.g. 'food.com'."},
                },
            },
        },
    }
]


def test_free_text_among_values_its_description_quotes_is_a_listed_choice() -> None:
    def kept(arguments: dict[str, Any], request: str) -> dict[str, Any]:
        return without_unasked(Decision("calories", arguments), request, RECIPE).arguments

    chosen = {"recipe": "Beef Lasagna", "meal": "Dinner"}
    assert kept(chosen, "How many calories in the Beef Lasagna Recipe?") == {"recipe": "Beef Lasagna"}
    assert kept(chosen, "Calories of a lasagna dinner") == chosen  # spoken of
    # "Supper" is not quoted there: free text, which words said earlier in the conversation keep; a listed
    # choice is read against the request alone (the user picks a choice where they ask)
    supper = Decision("calories", {"recipe": "Soup", "meal": "Supper"})
    assert (
        without_unasked(supper, "Soup calories", RECIPE, "We eat supper late.").arguments["meal"] == "Supper"
    )
    dinner = Decision("calories", {"recipe": "Soup", "meal": "Dinner"})
    assert "meal" not in without_unasked(dinner, "Soup calories", RECIPE, "We eat dinner late.").arguments
    # one quoted example is an example, not a list: free text, kept where the request gives it
    assert kept({"recipe": "Soup", "site": "food.com"}, "Soup calories on food.com")["site"] == "food.com"
    assert kept({"recipe": "Lasagna"}, "calories, please") == {"recipe": "Lasagna"}  # required, kept


def _strings_tool(name: str, *arguments: str) -> list[dict[str, Any]]:
    """One declared tool whose arguments are all optional strings."""
    properties = {argument: {"type": "string"} for argument in arguments}
    return [
        {
            "type": "function",
            "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
        }
    ]


def test_optional_free_text_no_word_of_the_conversation_holds_is_dropped() -> None:
    def kept(arguments: dict[str, Any], request: str, earlier: str = "") -> dict[str, Any]:
        return without_unasked(Decision("calories", arguments), request, RECIPE, earlier).arguments

    # a site nobody named is the model's, and so is a meal (the description's example copied in)
    assert kept({"recipe": "Soup", "site": "food.com", "meal": "Supper"}, "Soup calories") == {
        "recipe": "Soup"
    }
    # said in the request, or earlier in the conversation (the system prompt, an earlier message), it stays
    assert kept({"recipe": "Soup", "site": "food.com"}, "Soup calories from Food.com")["site"] == "food.com"
    assert kept({"recipe": "Soup", "site": "food.com"}, "Soup calories", "Use food.com for recipes.") == {
        "recipe": "Soup",
        "site": "food.com",
    }
    # an irregular plural speaks of its singular ("women" of "woman"), in either direction
    assert kept({"recipe": "Soup", "meal": "women's lunch"}, "soup for a woman") == {
        "recipe": "Soup",
        "meal": "women's lunch",
    }
    # what the model writes in its own words is no pick: a message, a query, a title
    commit = _strings_tool("commit", "commitMessage", "search_query", "branch")
    written = {"commitMessage": "Update the parser", "search_query": "parser bugs", "branch": "develop"}
    assert without_unasked(Decision("commit", written), "commit my changes", commit).arguments == {
        "commitMessage": "Update the parser",
        "search_query": "parser bugs",
    }
    # nor is a place in the user's files or on the web, read off the request in other words
    listing = _strings_tool("list_dir", "path", "folderName", "url")
    places = {"path": "docs", "folderName": "docs", "url": "https://example.org"}
    asked = "What is in the documentation folder?"
    assert without_unasked(Decision("list_dir", places), asked, listing).arguments == places
    # digits, codes and yes-or-no values are not judged; a required argument never is
    for value in ("2 bowls", "EN", "yes"):
        assert kept({"recipe": "Soup", "meal": value}, "Soup calories")["meal"] == value
    assert kept({"recipe": "Gazpacho"}, "cold soup calories") == {"recipe": "Gazpacho"}


def test_free_text_of_a_type_other_than_string_is_not_judged_as_made_up() -> None:
    loose = [{"type": "function", "function": {"name": "calories", "parameters": {
        "type": "object", "properties": {"meal": {"description": "any"}, "tags": {"type": "array"}}}}}]  # fmt: skip
    chosen = {"meal": "Supper", "tags": "vegan"}
    assert without_unasked(Decision("calories", chosen), "Soup calories", loose).arguments == chosen


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


def test_required_free_text_and_spoken_defaults_are_kept() -> None:
    # required free text stays, said or not; so does a note, written in the model's own words
    required = {"location": "Boston", "note": "windy"}
    assert _kept(required, "What's it like out?") == required
    # the schema's default stays where the request speaks of it
    assert _kept({"location": "Boston", "unit": "fahrenheit"}, "Boston in Fahrenheit")["unit"] == "fahrenheit"
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


GAME = [
    {
        "type": "function",
        "function": {
            "name": "game",
            "parameters": {
                "type": "object",
                "required": ["teams"],
                "properties": {
                    "teams": {"type": "array", "items": {"type": "string"}},
                    "venue": {"type": "string", "description": "Optional: The venue. Default is 'home'."},
                    "unit": {"type": "string", "description": "Distance unit. Defaults to miles."},
                    "date": {
                        "type": "string",
                        "description": "The day; the default value of 'null' is today.",
                    },
                    "limit": {"type": "integer", "description": "How many. Default: 5"},
                    "sep": {"type": "string", "default": ""},
                    "include_visuals": {"type": "boolean", "default": True},
                    "name": {"type": "string", "default": "Not specified"},
                    "when": {"type": "string", "description": "Defaults to the current date."},
                },
            },
        },
    }
]


def _game(arguments: dict[str, Any], request: str) -> dict[str, Any]:
    return without_unasked(Decision("game", {"teams": ["A", "B"], **arguments}), request, GAME).arguments


def test_a_default_the_schema_or_description_names_is_left_to_the_tool() -> None:
    copied = {
        "venue": "Home",
        "unit": "miles",
        "date": "null",
        "limit": 5,
        "sep": "",
        "name": "Not specified",
    }
    assert _game(copied, "Who won the game between A and B on Jan 28?") == {"teams": ["A", "B"]}
    assert _game({"limit": "5.0", "include_visuals": "true"}, "the game of A and B") == {"teams": ["A", "B"]}
    assert _game({"date": None}, "the game of A and B") == {"teams": ["A", "B"]}
    listed = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"a": {"type": "array", "default": ["x"]}, "n": {"type": "integer", "default": 1}}}}}]  # fmt: skip
    huge = {"a": ["x", "y"], "n": 10**400}
    assert without_unasked(Decision("f", {"a": ["x"], "n": 1}), "f it", listed).arguments == {}
    assert without_unasked(Decision("f", huge), "f it", listed).arguments == huge


def test_a_default_the_request_speaks_of_or_asks_for_is_kept() -> None:
    assert _game({"venue": "home"}, "A and B, at home")["venue"] == "home"
    assert _game({"limit": 5}, "the 5 games of A and B")["limit"] == 5
    # the request names the argument: the user asked for it, whatever the default
    assert _game({"include_visuals": True}, "A and B, including visual outputs")["include_visuals"] is True
    assert _game({"name": "Not specified"}, "A and B, under any name")["name"] == "Not specified"


def test_a_value_other_than_the_default_is_kept() -> None:
    # a space is not the empty default; "the current date" names no value; other values stay (free text
    # the request says: "away" unsaid would be a made-up one)
    chosen = {"sep": " ", "when": "the", "venue": "away", "unit": "km", "limit": 6}
    assert _game(chosen, "A and B, played away") == {"teams": ["A", "B"], **chosen}


POPULATION = [
    {
        "type": "function",
        "function": {
            "name": "estimate_population",
            "parameters": {
                "type": "object",
                "required": ["species"],
                "properties": {
                    "species": {"type": "string"},
                    "year": {"type": "integer", "description": "The year. Default is the current year."},
                    "as_of": {"type": "string", "description": "The date; defaults to today."},
                    "rate": {"type": "number", "description": "The rate. Default is the current rate."},
                },
            },
        },
    }
]


def _estimated(arguments: dict[str, Any], request: str, earlier: str = "") -> dict[str, Any]:
    decided = Decision("estimate_population", {"species": "panda", **arguments})
    return without_unasked(decided, request, POPULATION, earlier).arguments


def test_a_present_the_model_made_up_is_left_to_the_tool() -> None:
    request = "Estimate the population of pandas in the wild in China."
    assert _estimated({"year": 2023, "as_of": "2023-10-01"}, request) == {"species": "panda"}
    # "current rate" is no time: a rate the model wrote is judged as any other number, and kept
    assert _estimated({"rate": 0.015}, request) == {"species": "panda", "rate": 0.015}


def test_a_present_the_conversation_speaks_of_is_kept() -> None:
    # the request speaks of a time: the value may be the model's reading of it
    assert _estimated({"year": 2024}, "pandas in China next year")["year"] == 2024
    assert _estimated({"as_of": "2023-03-10"}, "pandas in China on Wednesday")["as_of"] == "2023-03-10"
    # the conversation writes one of the value's numbers
    assert _estimated({"year": 2021}, "pandas in China, 2021 figures")["year"] == 2021
    assert (
        _estimated({"as_of": "2026-12-07"}, "pandas in China", earlier="The date is 2026-12-07.")["as_of"]
        == "2026-12-07"
    )


@given(
    description=st.text(max_size=300),
    value=st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
)
def test_any_description_is_read_and_only_its_argument_is_dropped(description: str, value: Any) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "description": description}}}}}]  # fmt: skip
    out = without_unasked(Decision("f", {"a": value, "b": value}), "a request", tools).arguments
    assert out.get("b", "missing") is value
    assert out.keys() <= {"a", "b"}


def test_a_description_is_read_in_time_linear_in_it() -> None:
    def timed(n: int) -> float:
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
            "properties": {"a": {"type": "string", "description": "Default is '" * n}}}}}]  # fmt: skip
        started = time.perf_counter()
        without_unasked(Decision("f", {"a": "x"}), "a request", tools)
        return time.perf_counter() - started

    timed(1_000)
    assert timed(100_000) < 100 * max(timed(1_000), 1e-4) * 4


@given(
    request=st.text(max_size=200),
    arguments=st.dictionaries(
        st.sampled_from(["location", "unit", "detail", "order", "note", "x"]),
        st.none()
        | st.integers()
        | st.floats()
        | st.text(max_size=12)
        | st.sampled_from(["rain", "snow", "DESC"]),
    ),
)
def test_any_decision_keeps_its_calls_and_loses_only_optional_choices(
    request: str, arguments: dict[str, Any]
) -> None:
    out = without_unasked(Decision("weather", arguments), request, WEATHER)
    assert out.name == "weather"
    dropped = arguments.keys() - out.arguments.keys()
    assert dropped <= {"unit", "detail", "order", "kind", "note"}
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


stations: list[dict[str, str]] = []


@tool
def forecast(location: str, station: str = "") -> str:
    """The forecast at a location, from one weather station if one is named."""
    stations.append({"location": location, "station": station})
    return f"{location}: rain"


async def _forecast(system: str) -> list[dict[str, str]]:
    stations.clear()
    call = [{"name": "forecast", "arguments": {"location": "Boston", "station": "Logan Airport"}}]
    replies = [text(json.dumps(call)), text(json.dumps([{"name": ANSWER}])), text("Rain in Boston.")]
    async with ScriptedServer(*replies) as server:
        policy = LoopPolicy(tool_routing=True, tool_gate=False, retry=RetryPolicy(max_retries=0))
        await run_routed(server, "Will it rain in Boston?", [forecast], policy, system=system)
    return stations


async def test_a_routed_step_drops_free_text_nobody_gave_and_keeps_what_the_system_prompt_said() -> None:
    assert await _forecast("") == [{"location": "Boston", "station": ""}]
    kept = await _forecast("The user reads the Logan Airport station.")
    assert kept == [{"location": "Boston", "station": "Logan Airport"}]
