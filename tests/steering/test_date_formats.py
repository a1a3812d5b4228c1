"""A date written in one form where the tool's description declares another is written in the declared
form, when the date reads one way only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.date_formats import (
    dates_named,
    declared_date_format,
    in_declared_formats,
    written_as,
)
from steadyloop.steering.decision import Decision

from ..edges._edges import LINEAR_BOUND, growth


@pytest.mark.parametrize(
    ("description", "form"),
    [
        ("The date (month-day-year) you want to get the air quality index for.", (("MM", "DD", "YYYY"), "-")),
        ("Must be in MM-DD-YYYY format.", (("MM", "DD", "YYYY"), "-")),
        ("Date of when to get the stock price. Format: yyyy-mm-dd.", (("YYYY", "MM", "DD"), "-")),
        ("in the format mm/dd/yyyy.", (("MM", "DD", "YYYY"), "/")),
        ("Date of the concert in 'mm-yyyy' format.", (("MM", "YYYY"), "-")),
        ("formatted as 'YYYY-MM-DD to YYYY-MM-DD'.", (("YYYY", "MM", "DD"), "-")),  # one form, twice
        ("Specific season in format 'YYYY-YYYY'.", None),  # two years: no date
        ("in ISO-8601 format (e.g., 'YYYY-MM-DDTHH:MM:SS')", None),  # a time too: not this rule's
        ("either YYYY-MM-DD or MM/DD/YYYY", None),  # two forms
        ("The city to search in.", None),
    ],
)
def test_the_form_a_description_declares(description: str, form: Any) -> None:
    assert declared_date_format(description) == form


MDY = (("MM", "DD", "YYYY"), "-")


@pytest.mark.parametrize(
    ("value", "form", "written"),
    [
        ("2022-08-16", MDY, "08-16-2022"),
        ("2022/8/16", MDY, "08-16-2022"),
        ("August 16, 2022", MDY, "08-16-2022"),
        ("16 Aug 2022", MDY, "08-16-2022"),
        ("16/08/2022", MDY, "08-16-2022"),  # 16 is no month
        ("08-16-2022", (("YYYY", "MM", "DD"), "-"), "2022-08-16"),
        ("2022-04", (("MM", "YYYY"), "-"), "04-2022"),
        ("2021-01-01", (("MM", "DD", "YY"), "-"), "01-01-21"),
        ("03/04/2022", MDY, None),  # March 4 or 3 April: nothing says which
        ("2022-04", MDY, None),  # no day to write
        ("2022-13-01", MDY, None),  # no month 13
        ("next Friday", MDY, None),
        ("2022-08-16 to 2022-08-20", MDY, None),  # a range, not a date
    ],
)
def test_a_date_written_in_a_declared_form(value: str, form: Any, written: str | None) -> None:
    assert written_as(value, form) == written


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "air_quality",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city."},
                    "date": {"type": "string", "description": "The date (month-day-year) you want."},
                    "days": {"type": "integer", "description": "How many days, counted as dd."},
                },
            },
        },
    }
]


def test_a_decision_has_its_dates_in_the_declared_form_and_nothing_else_changed() -> None:
    decided = Decision(
        "air_quality",
        {"location": "2022-08-16", "date": "2022-08-16", "days": 3},
        (("air_quality", {"date": "08-16-2022"}), ("other", {"date": "2022-08-16"})),
    )
    fixed = in_declared_formats(decided, TOOLS)
    # "location" declares no form, an undeclared tool's arguments are left alone
    assert fixed.arguments == {"location": "2022-08-16", "date": "08-16-2022", "days": 3}
    assert fixed.more == (("air_quality", {"date": "08-16-2022"}), ("other", {"date": "2022-08-16"}))
    answer = Decision("answer", {})
    assert in_declared_formats(answer, TOOLS) is answer


def _one_argument(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    parameters = {"type": "object", "properties": {name: spec}}
    return [{"type": "function", "function": {"name": "book", "parameters": parameters}}]


@pytest.mark.parametrize(
    ("name", "spec", "value", "sent"),
    [
        # nothing declares a form: a date in words goes as ISO 8601, when the argument speaks of a date
        ("start_date", {"type": "string", "description": "The start."}, "10th December 2022", "2022-12-10"),
        ("startDate", {"type": "string"}, "Dec 10, 2022", "2022-12-10"),
        ("when", {"type": "string", "description": "The date to book."}, "December 10 2022", "2022-12-10"),
        ("start_date", {"type": "string"}, "10/12/2022", "10/12/2022"),  # numbers: nothing says otherwise
        ("start_date", {"type": "string"}, "December 2022", "December 2022"),  # no day: no whole date
        ("title", {"type": "string", "description": "The talk's title."}, "May 5, 2022", "May 5, 2022"),
        ("update", {"type": "string"}, "May 5, 2022", "May 5, 2022"),  # "update" is no date
        # JSON Schema's "date" format is ISO's full-date
        ("day", {"type": "string", "format": "date"}, "16/08/2022", "2022-08-16"),
        ("day", {"type": "string", "format": "date"}, "03/04/2022", "03/04/2022"),  # reads two ways
        # a description that declares two forms: nothing says which one
        ("date", {"type": "string", "description": "YYYY-MM-DD or MM/DD/YYYY"}, "May 5, 2022", "May 5, 2022"),
        # a declared form wins over ISO
        ("date", {"type": "string", "description": "month-day-year"}, "10th December 2022", "12-10-2022"),
    ],
)
def test_a_date_in_words_goes_as_iso_where_no_form_is_declared(
    name: str, spec: dict[str, Any], value: str, sent: str
) -> None:
    decided = Decision("book", {name: value})
    assert in_declared_formats(decided, _one_argument(name, spec)).arguments == {name: sent}


@pytest.mark.parametrize(
    ("request_text", "value", "sent"),
    [
        # the request names the 8th of March: the value is month first
        ("Any Music events around Philadelphia, PA on the 8th of March 2023?", "03/08/2023", "2023-03-08"),
        ("Book it for March 8, 2023 please", "08/03/2023", "2023-03-08"),  # day first, then
        ("Book it for 8 Mar. 2023", "03.08.2023", "2023-03-08"),
        ("Book it for the 3rd of August 2023", "03/08/2023", "2023-08-03"),
        # the request names both readings, or neither: nothing says which
        ("From March 8, 2023 to August 3, 2023", "03/08/2023", "03/08/2023"),
        ("Book it for 03/08/2023", "03/08/2023", "03/08/2023"),
        ("Book it for the 8th of Smarch 2023", "03/08/2023", "03/08/2023"),
        ("", "03/08/2023", "03/08/2023"),
        # a day and month alike read one way only
        ("", "03/03/2023", "2023-03-03"),
    ],
)
def test_a_date_in_numbers_that_reads_two_ways_is_read_by_the_date_the_request_names(
    request_text: str, value: str, sent: str
) -> None:
    tools = _one_argument("date", {"type": "string", "description": "The date in the format 'YYYY-MM-DD'."})
    decided = Decision("book", {"date": value})
    assert in_declared_formats(decided, tools, request_text).arguments == {"date": sent}


def test_dates_named_in_words() -> None:
    said = "Fly out on the 8th of March 2023, back March 12, 2023; not on 5 Smarch 2023 or in May 2023."
    assert dates_named(said) == {(2023, 3, 8), (2023, 3, 12)}
    assert growth(lambda n: dates_named("the 8th of March 2023, " * n), 2_000) < LINEAR_BOUND


_FORMS = st.sampled_from(["MM-DD-YYYY", "(month-day-year)", "yyyy/mm/dd", "mm-yyyy", "DD.MM.YY"])


@given(
    st.one_of(st.text(max_size=200), _FORMS),
    st.one_of(st.text(max_size=40), st.from_regex(r"\d{1,4}[-/.]\d{1,4}([-/.]\d{1,4})?", fullmatch=True)),
)
def test_reading_dates_is_total(description: str, value: str) -> None:
    form = declared_date_format(description)
    if form is not None:
        written = written_as(value, form)
        assert written is None or isinstance(written, str)


def test_reading_dates_is_linear() -> None:
    assert growth(lambda n: declared_date_format("mm-dd " * n), 5_000) < LINEAR_BOUND
    assert growth(lambda n: written_as("2022-" * n, MDY), 5_000) < LINEAR_BOUND
    assert growth(lambda n: written_as("May " * n + "5, 2022", MDY), 5_000) < LINEAR_BOUND
