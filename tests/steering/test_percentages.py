"""A rate the request gives in percent goes to the tool in the form its description declares: "5%" is
``5.0`` for an argument described "as a percentage" and ``0.05`` for one described "as a decimal",
whichever the routed decision wrote; a description that declares neither leaves the model's value.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the tool gets the declared form."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.decision import ANSWER, Decision
from steadyloop.steering.percentages import in_declared_percentages, percentages_written
from steadyloop.tools.definition import tool

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import decided_then_answered, one_tool


@pytest.mark.parametrize(
    ("request_text", "written"),
    [
        ("an annual interest rate of 5% compounded monthly", {"5"}),
        ("rates of 3.5 % and 4 percent, then 2 per cent", {"3.5", "4", "2"}),
        ("version 5.5%s, v2%, no rate here", set[str]()),
        ("", set[str]()),
    ],
)
def test_the_percentages_a_request_writes(request_text: str, written: set[str]) -> None:
    assert percentages_written(request_text) == {Decimal(w) for w in written}


RATES = one_tool(
    "compound_interest",
    {
        # each form as BFCL's tools declare it
        "annual_rate": {"type": "number", "description": "The interest rate for a year as a percentage."},
        "depreciation": {"type": "integer", "description": "The annual depreciation rate in percentage."},
        "rate": {"type": "number", "description": "The annual interest rate. Enter as a decimal. E.g, 5% is 0.05"},
        "yield_rate": {"type": "number", "description": "The annual yield in decimal form."},
        "growth": {"type": "number", "description": "The annual growth rate."},  # neither: the model's
        # "a decimal value" says it takes fractions of a unit, not that a percentage is written as one
        "score": {"type": "number", "description": "A decimal value: the confidence as a percentage, 0.0 to 100.0."},
        "rates": {"type": "array", "items": {"type": "number"}, "description": "The rates, as percentages."},
        "label": {"type": "string", "description": "A percentage, as text."},
    },
)  # fmt: skip
ASKED = "An investment at 5% a year, 3 percent depreciation, growing 7%, scored 80%, rates 2.5% and 4%."


def test_a_percentage_is_written_in_the_form_the_description_declares() -> None:
    decided = Decision(
        "compound_interest",
        {
            "annual_rate": 0.05,  # a decimal where a percentage is declared
            "depreciation": 0.03,
            "rate": 5,  # a percentage where a decimal is declared
            "yield_rate": 7.0,
            "growth": 0.07,  # no form declared: left as written
            "score": 80.0,
            "rates": [0.025, 4, "x"],
            "label": "0.05",
        },
    )
    assert in_declared_percentages(decided, RATES, ASKED).arguments == {
        "annual_rate": 5.0,
        "depreciation": 3,  # an integer argument gets an integer
        "rate": 0.05,
        "yield_rate": 0.07,
        "growth": 0.07,
        "score": 80.0,
        "rates": [2.5, 4, "x"],
        "label": "0.05",
    }


def test_a_value_already_in_the_declared_form_or_no_percentage_the_request_wrote_is_left() -> None:
    right = Decision("compound_interest", {"annual_rate": 5, "rate": 0.05, "depreciation": 3})
    assert in_declared_percentages(right, RATES, ASKED) is right
    # 0.06 is no percentage the request wrote, read either way
    unasked = Decision("compound_interest", {"annual_rate": 0.06, "rate": 6, "score": 0, "growth": True})
    assert in_declared_percentages(unasked, RATES, ASKED) is unasked
    assert in_declared_percentages(
        Decision("compound_interest", {"rate": 5}), RATES, "five per year"
    ).arguments == {"rate": 5}
    answer = Decision(ANSWER, {})
    assert in_declared_percentages(answer, RATES, ASKED) is answer


@given(
    st.dictionaries(
        st.sampled_from(["annual_rate", "depreciation", "rate", "rates", "label"]) | st.text(max_size=20),
        st.one_of(
            st.integers(),
            st.floats(),
            st.booleans(),
            st.text(max_size=20),
            st.lists(st.one_of(st.floats(), st.integers(), st.text(max_size=3))),
        ),
    ),
    st.text(max_size=200)
    | st.lists(st.sampled_from(["5%", "0.5 %", "1e9%", "NaN%", "100 percent"])).map(" ".join),
)
def test_writing_declared_percentages_is_total(arguments: dict[str, Any], request: str) -> None:
    written = in_declared_percentages(Decision("compound_interest", arguments), RATES, request).arguments
    assert written.keys() == arguments.keys()


def test_writing_declared_percentages_is_linear() -> None:
    def rates(n: int) -> Decision:
        return in_declared_percentages(Decision("compound_interest", {"rates": [0.05] * n}), RATES, "5% " * n)

    assert growth(rates, 5_000) < LINEAR_BOUND
    long_description = one_tool("f", {"rate": {"type": "number", "description": "percentage " * 5_000}})
    assert in_declared_percentages(Decision("f", {"rate": 0.05}), long_description, "5%").arguments == {
        "rate": 5.0
    }


asked: list[float] = []


@tool
def compound_interest(principal: int, annual_rate: float, years: int) -> str:
    """Calculate compound interest.

    Args:
        principal: The initial amount invested.
        annual_rate: The interest rate for a year as a percentage.
        years: The time the money is invested for, in years.
    """
    asked.append(annual_rate)
    return "12833.59"


async def test_a_routed_step_sends_the_tool_the_declared_form() -> None:
    asked.clear()
    call = [{"name": "compound_interest", "arguments": {"principal": 10000, "annual_rate": 0.05, "years": 5}}]
    await decided_then_answered(
        call,
        "Find the compound interest on $10000 at an annual interest rate of 5% for 5 years.",
        [compound_interest],
        "It grows to $12,833.59.",
    )
    assert asked == [5.0]
