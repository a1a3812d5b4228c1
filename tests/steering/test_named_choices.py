"""A list of listed choices the model started holds every one the request names: "organic fruits and
vegetables" is ``["Organic", "Vegetables", "Fruits"]``, not the two the model wrote.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the tool gets the whole list."""

from __future__ import annotations

from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.decision import ANSWER, Decision
from steadyloop.steering.named_choices import with_named_choices
from steadyloop.tools.definition import tool

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import decided_then_answered

CATEGORIES = ["Organic", "Vegetables", "Fruits", "Dairy", "Seafood", "Bakery"]


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": ["location"]}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


GROCERY = [
    _tool(
        "grocery",
        {
            "location": {"type": "string"},
            "categories": {"type": "array", "items": {"type": "string", "enum": CATEGORIES}},
        },
    )
]
SHOP = [
    _tool(
        "shop",
        {
            "location": {"type": "string"},
            "services": {
                "type": "array",
                "items": {"type": "string", "enum": ["Guitar Lessons", "Violin Lessons"]},
            },
            "instruments": {
                "type": "array",
                "items": {"type": "string", "enum": ["Guitars", "Violins", "Drums"]},
            },
        },
    )
]
MUSEUM = [
    _tool(
        "museum",
        {
            "location": {"type": "string"},
            "features": {
                "type": "array",
                "items": {"type": "string", "enum": ["timings", "exhibitions", "history"]},
            },
        },
    )
]


def _listed(
    request: str, categories: list[Any], tools: list[dict[str, Any]] = GROCERY, key: str = "categories"
) -> Any:
    name = tools[0]["function"]["name"]
    decided = with_named_choices(Decision(name, {"location": "Houston", key: categories}), request, tools)
    return decided.arguments[key]


def test_every_listed_choice_the_request_names_joins_the_list_the_model_started() -> None:
    request = "Find a grocery store near me with organic fruits and vegetables in Houston."
    assert _listed(request, ["Organic", "Vegetables"]) == ["Organic", "Vegetables", "Fruits"]
    # in the order the request names them, singular or plural, whatever the case
    assert _listed("a store with seafood, a bakery and dairy", ["seafood"]) == ["seafood", "Bakery", "Dairy"]
    # a list already whole, or one value not listed, is left as it is
    assert _listed(request, ["Organic", "Fruits", "Vegetables"]) == ["Organic", "Fruits", "Vegetables"]
    assert _listed("fruits and cheese", ["Cheese"]) == ["Cheese", "Fruits"]


def test_a_list_nobody_started_and_an_answer_are_left_alone() -> None:
    request = "Find a grocery store with organic fruits in Houston."
    bare = Decision("grocery", {"location": "Houston"})
    assert with_named_choices(bare, request, GROCERY) == bare
    empty = Decision("grocery", {"location": "Houston", "categories": []})
    assert with_named_choices(empty, request, GROCERY) == empty
    answer = Decision(ANSWER, {})
    assert with_named_choices(answer, request, GROCERY) is answer


def test_words_that_may_be_something_else_add_nothing() -> None:
    # said inside a longer listed value: "violin lessons" is the service, not the instrument
    request = "Find a local guitar shop that also offers violin lessons in Nashville."
    assert _listed(request, ["Guitars"], SHOP, "instruments") == ["Guitars"]
    # said inside a name
    request = "Get me information about Natural History Museum in London including timings and exhibitions."
    assert _listed(request, ["timings", "exhibitions"], MUSEUM, "features") == ["timings", "exhibitions"]
    # said after a "no"
    assert _listed("organic food but no dairy or seafood", ["Organic"]) == ["Organic"]
    # a request in another script shares no words with the values
    assert _listed("请找休斯顿卖有机水果和蔬菜的商店 fruits", ["Organic"]) == ["Organic"]


def test_a_decision_of_several_calls_keeps_each_call_s_own_share() -> None:
    request = "A grocery in Houston with fruits, and one in Austin with dairy."
    decided = Decision(
        "grocery",
        {"location": "Houston", "categories": ["Fruits"]},
        (("grocery", {"location": "Austin", "categories": ["Dairy"]}),),
    )
    assert with_named_choices(decided, request, GROCERY) == decided


_VALUES = st.one_of(
    st.text(max_size=30), st.integers(), st.none(), st.lists(st.text(max_size=10), max_size=4), st.floats()
)


@given(
    request=st.one_of(
        st.text(max_size=300), st.sampled_from(["fruits and dairy", "no fruits", "Fruits Dairy"])
    ),
    categories=st.lists(_VALUES, max_size=5),
    enum=st.lists(st.one_of(st.text(max_size=20), st.sampled_from(CATEGORIES), st.integers()), max_size=8),
)
def test_naming_choices_is_total(request: str, categories: list[Any], enum: list[Any]) -> None:
    tools = [_tool("grocery", {"categories": {"type": "array", "items": {"enum": enum}}, "other": "junk"})]
    decided = with_named_choices(Decision("grocery", {"categories": categories, "n": 1}), request, tools)
    listed = decided.arguments["categories"]
    assert listed[: len(categories)] == categories  # only ever added to, at the end
    assert all(v in enum for v in listed[len(categories) :])


def test_naming_choices_is_linear() -> None:
    # the words of a longer value again and again: each short match is held against the longer ones
    assert (
        growth(lambda n: _listed("violin lessons " * n, ["Guitars"], SHOP, "instruments"), 5_000)
        < LINEAR_BOUND
    )
    assert growth(lambda n: _listed("fruits " * n, ["Dairy"]), 5_000) < LINEAR_BOUND


asked: list[list[str]] = []


@tool
def grocery(location: str, categories: list[Literal["Organic", "Vegetables", "Fruits", "Dairy"]]) -> str:
    """Grocery stores near a place that sell these kinds of food."""
    asked.append(list(categories))
    return f"Green Market, {location}"


async def test_a_routed_step_sends_the_tool_every_choice_the_request_named() -> None:
    asked.clear()
    call = [
        {"name": "grocery", "arguments": {"location": "Houston", "categories": ["Organic", "Vegetables"]}}
    ]
    question = "Find a grocery store near me with organic fruits and vegetables in Houston."
    await decided_then_answered(call, question, [grocery], "Green Market.")
    assert asked == [["Organic", "Vegetables", "Fruits"]]
