"""A call for each item a request lists: where the decision made a call for one item of a list the request
names ("copper and aluminum", the genotypes AA, Aa and aa of an ``enum``), the step holds a call for each.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the calls reach the tools in one step."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.loop import LoopPolicy
from steadyloop.messages import AssistantMessage
from steadyloop.steering import ToolRouting
from steadyloop.steering.decision import ANSWER, MAX_CALLS, Decision
from steadyloop.steering.listed_items import listed_calls
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.turn import RetryPolicy

from ._routed import run_routed, text

GENOTYPE = [
    {
        "type": "function",
        "function": {
            "name": "genotype_frequency",
            "parameters": {
                "type": "object",
                "properties": {
                    "allele_frequency": {"type": "number"},
                    "genotype": {"type": "string", "enum": ["AA", "Aa", "aa"]},
                },
            },
        },
    }
]


CHOICE_VALUES = ["x", "x y", "x_y_z", "y", "Paris", "Paris_and_x"]
CHOICES = [
    {
        "type": "function",
        "function": {
            "name": "t",
            "parameters": {
                "properties": {"a": {"type": "string"}, "b": {"type": "string", "enum": CHOICE_VALUES}}
            },
        },
    }
]


def _calls(decision: Decision, request: str, tools: list[dict[str, Any]] | None = None) -> list[Any]:
    return [arguments for _, arguments in listed_calls(decision, request, tools or []).calls]


def test_the_other_items_of_a_list_get_a_call_each_in_the_order_listed() -> None:
    resistance = Decision("resistance", {"length": 5, "area": 0.01, "material": "copper"})
    asked = "The resistance of a wire 5m long, 0.01m² in section, with the resistivity of copper and aluminum"
    assert _calls(resistance, asked) == [
        {"length": 5, "area": 0.01, "material": "copper"},
        {"length": 5, "area": 0.01, "material": "aluminum"},
    ]
    # the value may stand anywhere in the list, and an item may be a name of several words
    london = Decision("weather", {"city": "London"})
    assert [c["city"] for c in _calls(london, "Weather in Paris, London and Rome?")] == [
        "Paris",
        "London",
        "Rome",
    ]
    francisco = Decision("hotels", {"city": "San Francisco"})
    assert [c["city"] for c in _calls(francisco, "hotels in San Francisco or Los Angeles")] == [
        "San Francisco",
        "Los Angeles",
    ]
    files = Decision("read_file", {"path": "README.md"})
    assert [c["path"] for c in _calls(files, "Read README.md and CHANGELOG.md.")] == [
        "README.md",
        "CHANGELOG.md",
    ]


def test_an_enum_s_values_the_request_names_get_a_call_each() -> None:
    decision = Decision("genotype_frequency", {"allele_frequency": 0.7, "genotype": "AA"})
    asked = (
        "The dominant allele's frequency is 0.7. What are the frequencies of the homozygous dominant "
        "genotype (AA), the heterozygous genotype (Aa), and the homozygous recessive genotype (aa)?"
    )
    assert [c["genotype"] for c in _calls(decision, asked, GENOTYPE)] == ["AA", "Aa", "aa"]
    # a list the enum does not allow is not the argument's
    assert _calls(decision, "genotype AA and BB, frequency 0.7", GENOTYPE) == [decision.arguments]


def _one_tool(name: str, argument: str, enum: list[str]) -> list[dict[str, Any]]:
    properties = {"case": {"type": "string"}, argument: {"type": "string", "enum": enum}}
    return [{"type": "function", "function": {"name": name, "parameters": {"properties": properties}}}]


def test_an_enum_value_of_several_words_is_named_in_words() -> None:
    case = _one_tool("case_status", "details", ["status", "trial_date"])
    first = Decision(
        "case_status",
        {"case": "XY1234", "details": "status"},
        (("case_status", {"case": "GH5678", "details": "status"}),),
    )
    asked = "What is the status and scheduled trial date for case XY1234, and case GH5678?"
    assert [(c["case"], c["details"]) for c in _calls(first, asked, case)] == [
        ("XY1234", "status"),
        ("XY1234", "trial_date"),
        ("GH5678", "status"),
        ("GH5678", "trial_date"),
    ]
    # a value named only inside a longer one is not named: "Asian Fusion" is one cuisine, not two
    food = _one_tool("restaurants", "category", ["Asian", "Asian Fusion", "Italian"])
    fusion = Decision("restaurants", {"case": "Santa Clara", "category": "Asian Fusion"})
    assert _calls(fusion, "I'm craving Asian Fusion cuisine in Santa Clara.", food) == [fusion.arguments]
    both = _calls(fusion, "Asian Fusion or plain Asian food in Santa Clara?", food)
    assert [c["category"] for c in both] == ["Asian Fusion", "Asian"]


def test_a_list_that_may_not_be_the_argument_s_is_left_alone() -> None:
    def unchanged(decision: Decision, request: str) -> None:
        assert _calls(decision, request) == [decision.arguments], request

    unchanged(Decision("hotel", {"city": "Paris"}), "Book a room in Paris, France for two nights.")
    unchanged(Decision("hotel", {"city": "New York"}), "Find a hotel in New York and book a room.")
    unchanged(Decision("weather", {"city": "Paris"}), "Weather in Paris and New York")
    unchanged(Decision("weather", {"city": "London"}), "Weather in New York and London")
    unchanged(Decision("convert", {"from": "celsius", "to": "fahrenheit"}), "From celsius and fahrenheit, 5")
    unchanged(Decision("search", {"query": "flights"}), "Search flights and then book the cheapest one")
    unchanged(
        Decision("movies", {"genre": "Drama", "year": 2010}),
        "Drama and Comedy movies from 2010 and 2012 respectively",
    )
    unchanged(Decision("weather", {"city": "Paris"}), "Weather in Paris")
    unchanged(Decision("lookup", {"organelle": "nucleus"}), "DNA in the nucleus? And whether it has a role")
    unchanged(Decision("recipe", {"diet": "vegan"}), "A recipe that is vegan, and takes under 30 minutes")
    unchanged(Decision("poker", {"player2": "Mike"}), "John has 8♥, J♥, Q♥, K♥ and Mike has 9♠, J♠, Q♠, K♠")
    assert listed_calls(Decision(ANSWER, {}), "Paris and London", []) == Decision(ANSWER, {})


def test_a_decision_that_read_the_list_itself_is_kept() -> None:
    made = Decision("weather", {"city": "Paris"}, (("weather", {"city": "London"}),))
    assert listed_calls(made, "Weather in Paris, London and Rome?", []) == made
    stores = Decision("stock", {"city": "Berlin"}, (("stock", {"city": "Madrid"}),))
    assert listed_calls(stores, "A Yamaha P125 in Berlin and Madrid's music stores", []) == stores


def test_a_value_also_named_alone_or_given_several_values_is_not_read_as_listed() -> None:
    target = Decision("regression", {"target": "Spending Score"})
    asked = "Columns: 'Gender', 'Marital Status', and 'Spending Score'. Predict 'Spending Score' from age."
    assert listed_calls(target, asked, []) == target
    savings = Decision(
        "savings", {"energy": "solar", "months": 12}, (("savings", {"energy": "wind", "months": 8}),)
    )
    assert listed_calls(savings, "solar energy for 12 months and wind energy for 8 months", []) == savings


def test_an_item_another_argument_holds_in_any_call_is_not_listed_again() -> None:
    rates = Decision("rate", {"base": "USD", "target": "AUD"}, (("rate", {"base": "USD", "target": "CAD"}),))
    assert listed_calls(rates, "Rates of USD to AUD and USD to CAD", []) == rates
    shows = Decision(
        "shows",
        {"service": "Netflix", "titles": ["Friends"]},
        (("shows", {"service": "Hulu", "titles": ["Lost"]}),),
    )
    assert listed_calls(shows, "Ratings on Netflix for 'Friends', and Hulu for 'Lost'", []) == shows


def test_a_list_is_one_argument_s_and_calls_stay_within_a_step_s_bound() -> None:
    # the sequences are listed; the reference, of the same value, is not a list of its own
    dna = Decision("analyze", {"sequence": "AGCTTAGCTA", "reference": "AGCTTAGCTA", "mutation": "insertion"})
    asked = 'Analyze "AGCTTAGCTA" and "AGCTTAGGCTA" against the reference "AGCTTAGCTA" for insertions'
    assert [(c["sequence"], c["reference"]) for c in _calls(dna, asked)] == [
        ("AGCTTAGCTA", "AGCTTAGCTA"),
        ("AGCTTAGGCTA", "AGCTTAGCTA"),
    ]
    many = ", ".join(f"Town{chr(65 + i)}" for i in range(MAX_CALLS)) + " and TownZ"
    decision = Decision("weather", {"city": "TownA"})
    assert listed_calls(decision, f"Weather in {many}", []) == decision


@given(
    request=st.text(max_size=300)
    | st.lists(st.sampled_from(["Paris", "and", ",", "or", "x", "y", "z", "AA", " "])).map(" ".join),
    arguments=st.dictionaries(
        st.sampled_from(["a", "b"]) | st.text(max_size=8),
        st.none()
        | st.integers()
        | st.floats()
        | st.text(max_size=20)
        | st.sampled_from(["Paris", "x", "x y", "AA"]),
        max_size=4,
    ),
    more=st.lists(
        st.dictionaries(
            st.text(max_size=4) | st.just("city"),
            st.text(max_size=8) | st.lists(st.integers(), max_size=2) | st.just("Paris"),
            max_size=2,
        ),
        max_size=3,
    ),
)
def test_any_request_and_decision_give_a_decision_within_the_bound(
    request: str, arguments: dict[str, Any], more: list[dict[str, Any]]
) -> None:
    decision = Decision("t", arguments, tuple(("t", m) for m in more))
    for tools, choices in ((GENOTYPE, set[str]()), (CHOICES, set(CHOICE_VALUES))):
        out = listed_calls(decision, request, tools)
        assert 1 <= len(out.calls) <= max(MAX_CALLS, len(decision.calls))
        # every call made is one of the decision's with string values changed to words of the request or
        # to an enum's values
        for name, made in out.calls:
            assert name == "t"
            assert any(
                made.keys() == was.keys()
                and all(
                    made[k] is v or (isinstance(made[k], str) and (made[k] in request or made[k] in choices))
                    for k, v in was.items()
                )
                for _, was in decision.calls
            )


def test_the_reading_is_linear_in_the_request() -> None:
    def timed(n: int) -> float:
        request = "x, " * n + "x and y " + "x or " * n
        started = time.perf_counter()
        listed_calls(Decision("t", {"a": "x", "b": "x y"}), request, [])
        # an enum's values of one and several words, each named everywhere, some inside others
        listed_calls(Decision("t", {"a": "x", "b": "x y"}), request + " x y z" * n, CHOICES)
        return time.perf_counter() - started

    timed(1_000)
    assert timed(100_000) < 100 * max(timed(1_000), 1e-4) * 4


ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    ran.append(city)
    return f"{city}: 18C"


async def test_a_routed_step_calls_each_listed_item_in_one_step() -> None:
    ran.clear()
    policy = LoopPolicy(
        tool_routing=True, tool_gate=False, retry=RetryPolicy(base_delay_s=0.01, max_retries=1)
    )
    one_call = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    replies = [text(json.dumps(one_call)), text(json.dumps([{"name": ANSWER}])), text("Both are 18C.")]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(server, "What's the weather in Paris and Lyon?", [get_weather], policy)
    assert ran == ["Paris", "Lyon"]
    [step] = [m for m in result.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert [c.arguments["city"] for c in step.tool_calls] == ["Paris", "Lyon"]
    assert result.turn.content == "Both are 18C."


async def test_without_several_calls_a_step_keeps_its_one_call() -> None:
    ran.clear()
    policy = LoopPolicy(
        tool_routing=ToolRouting(several=False),
        tool_gate=False,
        retry=RetryPolicy(base_delay_s=0.01, max_retries=1),
    )
    replies = [
        text(json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})),
        text(json.dumps({"name": ANSWER})),
        text("Paris is 18C."),
    ]
    async with ScriptedServer(*replies) as server:
        await run_routed(server, "What's the weather in Paris and Lyon?", [get_weather], policy)
    assert ran == ["Paris"]
