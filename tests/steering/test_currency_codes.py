"""A currency named in words where a tool takes a currency goes to the tool as its ISO 4217 code: "Convert
200 euros to US dollars" is ``EUR`` to ``USD``, whatever words the routed decision copied.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the tool gets the codes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.currency_codes import code_for, in_currency_codes
from steadyloop.steering.decision import ANSWER, Decision
from steadyloop.tools.definition import tool

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import decided_then_answered, one_tool


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("euros", "EUR"),
        ("Euro", "EUR"),
        ("US dollars", "USD"),
        ("usd", "USD"),
        (" Japanese  Yen ", "JPY"),
        ("British Pounds", "GBP"),
        ("pound sterling", "GBP"),
        ("GBP", "GBP"),
        ("dollars", None),  # US, Canadian, Australian...: nothing says which
        ("francs", None),
        ("pounds", None),
        ("all", None),  # three letters, but no code here
        ("Bitcoin", None),
        ("", None),
    ],
)
def test_a_name_of_one_currency_is_its_code(value: str, code: str | None) -> None:
    assert code_for(value) == code


CONVERT = one_tool(
    "convert",
    {
        "amount": {"type": "integer"},
        "from_currency": {"type": "string"},
        "toCurrency": {"type": "string"},
        "currencies": {"type": "array", "items": {"type": "string"}},
        "listed_currency": {"type": "string", "enum": ["Euro", "Dollar"]},
        "note": {"type": "string"},
    },
)


def test_only_currency_arguments_are_written_as_codes() -> None:
    decided = Decision(
        "convert",
        {
            "amount": 200,
            "from_currency": "euros",
            "toCurrency": "US dollars",
            "currencies": ["yen", "dollars", 3],
            "listed_currency": "Euro",  # held to listed values: their form is the tool's
            "note": "euros",  # not a currency argument
        },
        (("convert", {"from_currency": "GBP"}), ("other", {"currency": "euro"})),
    )
    written = in_currency_codes(decided, CONVERT)
    assert written.arguments == {
        "amount": 200,
        "from_currency": "EUR",
        "toCurrency": "USD",
        "currencies": ["JPY", "dollars", 3],
        "listed_currency": "Euro",
        "note": "euros",
    }
    assert written.more == (("convert", {"from_currency": "GBP"}), ("other", {"currency": "EUR"}))
    codes = Decision("convert", {"from_currency": "EUR"})
    assert in_currency_codes(codes, CONVERT) is codes
    answer = Decision(ANSWER, {})
    assert in_currency_codes(answer, CONVERT) is answer


@given(
    st.dictionaries(st.text(max_size=20), st.one_of(st.text(max_size=50), st.integers(), st.lists(st.text())))
)
def test_writing_codes_is_total(arguments: dict[str, Any]) -> None:
    written = in_currency_codes(Decision("convert", arguments), CONVERT).arguments
    assert written.keys() == arguments.keys()


def test_writing_codes_is_linear() -> None:
    assert growth(lambda n: code_for("euro " * n), 5_000) < LINEAR_BOUND

    def currencies(n: int) -> Decision:
        return in_currency_codes(Decision("convert", {"currencies": ["euros"] * n}), CONVERT)

    assert growth(currencies, 5_000) < LINEAR_BOUND


asked: list[tuple[str, str]] = []


@tool
def convert(amount: int, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency to another at today's rate."""
    asked.append((from_currency, to_currency))
    return f"{amount * 1.08:.2f} {to_currency}"


async def test_a_routed_step_sends_the_tool_codes() -> None:
    asked.clear()
    call = [{"name": "convert", "arguments": {"amount": 200, "from_currency": "euros", "to_currency": "usd"}}]
    await decided_then_answered(call, "Convert 200 euros to US dollars.", [convert], "216.00 USD.")
    assert asked == [("EUR", "USD")]
