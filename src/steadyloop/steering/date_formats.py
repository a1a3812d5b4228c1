"""A date written in one form where the tool's schema declares another; sans I/O.

A tool's description often says how it takes a date: "The date (month-day-year) you want ...", "in the
format MM-DD-YYYY", "Format: yyyy-mm-dd". A small model writes the form it writes most, whatever the
description says: asked "What is the air quality index in London 2022/08/16?" of a tool whose date is
"(month-day-year)", the 1.5B model wrote ``2022-08-16`` (BFCL simple_python_196; the answer key wants
``08-16-2022``). :func:`in_declared_formats` rewrites such a value into the declared form when the value is
a date read one way only: year first (``2022-08-16``, ``2022/08``), a month's name (``August 16, 2022``),
or day and month told apart by a number over 12. A value already in the declared form, one that is not a
whole date, or a description that declares two different forms, is left as it is.

A schema's ``"format": "date"`` declares ISO 8601's ``YYYY-MM-DD`` (JSON Schema's full-date). Where nothing
declares a form, a whole date written in words (``10th December 2022``, ``December 10, 2022``) of an
argument that speaks of a date (its name or its description says "date") goes to the tool as
``2022-12-10``: words are the user's way of saying a date, and the form every date parser reads is ISO's
(BFCL simple_python_382: "starting from 10th December 2022" was copied into ``start_date`` as it was
said). A date in numbers is left as the model wrote it there: nothing says the tool reads it otherwise.

A date in numbers whose day and month are both 12 or under (``03/08/2023``) is read by the request: where
the request names, in words, the date one reading gives and not the other ("on the 8th of March 2023"),
that reading it is. Asked that, the routed decision wrote ``03/08/2023`` for a date the tool declares as
``'YYYY-MM-DD'`` (BFCL live_multiple_663-162-5), where a native call wrote ``2023-03-08``.

Every function here is linear in its input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .decision import Decision, arguments_rewritten

__all__ = ["dates_named", "declared_date_format", "in_declared_formats", "written_as"]

_FIELD = r"(?:yyyy|yy|mm|dd)"
# "MM-DD-YYYY", "yyyy-mm-dd", "mm/dd/yyyy", "MM-YYYY": the same separator between the fields.
_CODED = re.compile(rf"(?<![\w-])({_FIELD})([-/.])({_FIELD})(?:\2({_FIELD}))?(?![\w-])", re.IGNORECASE)
# "(month-day-year)", "day/month/year".
_WORDED = re.compile(r"\b(month|day|year)([-/])(month|day|year)(?:\2(month|day|year))?\b", re.IGNORECASE)
_WORD_FIELDS = {"month": "MM", "day": "DD", "year": "YYYY"}

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_YEAR_FIRST = re.compile(r"(\d{4})([-/.])(\d{1,2})(?:\2(\d{1,2}))?")
_NUMBERS = re.compile(r"(\d{1,2})([-/.])(\d{1,2})\2(\d{4})")
_MONTH_FIRST = re.compile(r"([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})", re.IGNORECASE)
_DAY_FIRST = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\s+([a-z]+)\.?,?\s+(\d{4})", re.IGNORECASE)
# A date in words inside a request: "March 8, 2023", "8th of March 2023", "8 Mar. 2023".
_NAMED_MONTH_FIRST = re.compile(r"\b([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b", re.IGNORECASE)
_NAMED_DAY_FIRST = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+)\.?,?\s+(\d{4})\b", re.IGNORECASE
)
_ISO: tuple[tuple[str, ...], str] = (("YYYY", "MM", "DD"), "-")
# "start_date", "startDate", "The date of", "Dates to book"; not "update".
_SPEAKS_OF_DATE = re.compile(r"(?:(?<![^\W_])[dD]|(?<=[a-z])D)ates?(?![a-z])")


def declared_date_format(description: str) -> tuple[tuple[str, ...], str] | None:
    """The date form ``description`` declares, as its fields in order (``("MM", "DD", "YYYY")``) and their
    separator; ``None`` when it declares none, or two different ones."""
    return _one_form(_forms_in(description))


def _forms_in(description: str) -> set[tuple[tuple[str, ...], str]]:
    """Every date form ``description`` writes out, coded ("MM-DD-YYYY") or in words ("month/day/year")."""
    found: set[tuple[tuple[str, ...], str]] = set()
    for match in _CODED.finditer(description):
        fields = tuple(f.upper() for f in match.group(1, 3, 4) if f)
        found.add((fields, match.group(2)))
    for match in _WORDED.finditer(description):
        fields = tuple(_WORD_FIELDS[f.lower()] for f in match.group(1, 3, 4) if f)
        found.add((fields, match.group(2)))
    return found


def _one_form(found: set[tuple[tuple[str, ...], str]]) -> tuple[tuple[str, ...], str] | None:
    usable = {f for f in found if _usable(f[0])}
    return usable.pop() if len(usable) == 1 and len(found) == 1 else None


def _usable(fields: tuple[str, ...]) -> bool:
    kinds = [f[0] for f in fields]  # Y, M or D
    return len(set(kinds)) == len(kinds) and "M" in kinds and "Y" in kinds


def dates_named(text: str) -> frozenset[tuple[int, int, int]]:
    """The dates ``text`` names with a word for the month, as (year, month, day)."""
    named: set[tuple[int, int, int]] = set()
    for match in _NAMED_MONTH_FIRST.finditer(text):
        if (month := _MONTHS.get(match.group(1).lower())) is not None:
            named.add((int(match.group(3)), month, int(match.group(2))))
    for match in _NAMED_DAY_FIRST.finditer(text):
        if (month := _MONTHS.get(match.group(2).lower())) is not None:
            named.add((int(match.group(3)), month, int(match.group(1))))
    return frozenset(named)


def _read_date(value: str, named: frozenset[tuple[int, int, int]] = frozenset()) -> dict[str, int] | None:
    """The year, month and (when written) day of a date ``value`` can be read as in one way only, or in one
    way only of those ``named`` holds (dates the request names in words)."""
    text = value.strip()
    found: dict[str, int] | None = None
    if match := _YEAR_FIRST.fullmatch(text):
        found = {"Y": int(match.group(1)), "M": int(match.group(3))}
        if match.group(4):
            found["D"] = int(match.group(4))
    elif match := _NUMBERS.fullmatch(text):
        first, second, year = int(match.group(1)), int(match.group(3)), int(match.group(4))
        if first > 12 >= second:
            found = {"Y": year, "M": second, "D": first}
        elif second > 12 >= first or first == second:
            found = {"Y": year, "M": first, "D": second}
        else:  # both 12 or under: month first or day first, and only a date the request names says which
            readings = [(m, d) for m, d in ((first, second), (second, first)) if (year, m, d) in named]
            if len(readings) == 1:
                found = {"Y": year, "M": readings[0][0], "D": readings[0][1]}
    elif (match := _MONTH_FIRST.fullmatch(text)) and match.group(1).lower() in _MONTHS:
        found = {"Y": int(match.group(3)), "M": _MONTHS[match.group(1).lower()], "D": int(match.group(2))}
    elif (match := _DAY_FIRST.fullmatch(text)) and match.group(2).lower() in _MONTHS:
        found = {"Y": int(match.group(3)), "M": _MONTHS[match.group(2).lower()], "D": int(match.group(1))}
    if found is None or not 1 <= found["M"] <= 12 or not 1 <= found.get("D", 1) <= 31:
        return None
    return found


def written_as(
    value: str, form: tuple[tuple[str, ...], str], named: frozenset[tuple[int, int, int]] = frozenset()
) -> str | None:
    """``value`` written in ``form`` (from :func:`declared_date_format`); ``None`` when it is no date read
    one way only (``named``: the dates the request names, which may tell day and month apart), or lacks
    a field the form has (a day)."""
    date = _read_date(value, named)
    fields, separator = form
    if date is None or any(f[0] not in date for f in fields):
        return None
    parts = []
    for field in fields:
        number = date[field[0]]
        parts.append(
            f"{number % 100:02d}"
            if field == "YY"
            else f"{number:04d}"
            if field == "YYYY"
            else f"{number:02d}"
        )
    return separator.join(parts)


def _in_words(value: str) -> bool:
    """Whether ``value`` is written as a whole date with a word for its month ("10th December 2022", "Dec
    10, 2022"); whether the word is a month is left to :func:`written_as`, which reads it."""
    text = value.strip()
    return (_MONTH_FIRST.fullmatch(text) or _DAY_FIRST.fullmatch(text)) is not None


def _date_written_for(
    key: str, value: str, schema: Mapping[str, Any], named: frozenset[tuple[int, int, int]]
) -> str | None:
    """``value`` as the argument ``key`` (of ``schema``) takes its dates; ``None`` to leave it as it is."""
    description = schema.get("description")
    description = description if isinstance(description, str) else ""
    if schema.get("format") == "date":
        return written_as(value, _ISO, named)
    forms = _forms_in(description)
    if forms:
        # two forms declared, or one this module cannot write: nothing says which to use
        form = _one_form(forms)
        return None if form is None else written_as(value, form, named)
    if _in_words(value) and (_SPEAKS_OF_DATE.search(key) or _SPEAKS_OF_DATE.search(description)):
        return written_as(value, _ISO)
    return None


def in_declared_formats(
    decision: Decision, tools: Sequence[Mapping[str, Any]], request: str = ""
) -> Decision:
    """``decision`` with each string argument that is a date written in another form than its schema
    declares written in that form, and a date in words where none is declared written as ISO 8601's
    ``YYYY-MM-DD`` (see the module docstring); ``request`` may tell a date's day and month apart."""
    named = dates_named(request) if request else frozenset[tuple[int, int, int]]()

    def dated(key: str, value: Any, spec: Mapping[str, Any]) -> Any:
        written = _date_written_for(key, value, spec, named) if isinstance(value, str) and spec else None
        return value if written is None else written

    return arguments_rewritten(decision, tools, dated)
