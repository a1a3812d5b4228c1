"""A rate the request gives in percent, written in the form the tool's description declares; sans I/O.

A tool's rate argument says in its description which form it takes: "The interest rate for a year as a
percentage." (5 for 5%), "The annual interest rate, as a decimal. E.g., 5% is 0.05" (0.05), or neither
("The annual interest rate."). A small model writes one form whatever the description says. Asked "Find
the compound interest for an investment of $10000 with an annual interest rate of 5% compounded monthly"
with ``compound_interest(annual_rate)`` described "as a percentage", the 1.5B model wrote ``0.05`` both
natively and routed (BFCL multiple_129).

:func:`in_declared_percentages` rewrites a number argument whose value is a percentage the request wrote
("5%", "3.5 percent", "2 per cent") in the other form than the one its description declares: ``0.05`` as
``5.0`` where the description says "percent" or "percentage" and nothing of decimals, and ``5`` as
``0.05`` where it says "as a decimal" or "in decimal form", or shows a percentage as a decimal ("5% is 0.05"). A
description that declares neither form leaves the value as the model wrote it. The date rule does the
same for dates (``date_formats.py``), and the currency rule for currencies.

Over BFCL's answer keys (every entry whose request writes a percentage and whose key takes one for a
number argument): the keys of descriptions that declare decimals all take the decimal; of those that say
"percentage", the keys of the simple, multiple and live categories take the percentage, and three
parallel-multiple entries take the decimal against their own description. Linear in the decision and
the request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from .decision import Decision, arguments_rewritten

__all__ = ["in_declared_percentages", "percentages_written"]

# A percentage as a request writes it: "5%", "3.5 %", "2 percent", "7 per cent".
_PERCENTAGE = re.compile(
    r"(?<![\w.])(\d{1,6}(?:\.\d{1,6})?)\s*(?:%(?!\w)|percent\b|per\s+cent\b)", re.IGNORECASE
)
# A description that declares the decimal form: in words ("as a decimal", "in decimal form"; not "a decimal
# value", which says only that it takes a fraction of a unit), or by showing a percentage as one.
_DECIMAL_DECLARED = re.compile(
    r"\b(?:as|in|to) (?:an? )?(?:decimal|fraction)\b|\bdecimal (?:form|fraction|format)\b"
    r"|\d\s*%\s*(?:is|=|would be(?: represented as)?|as|->|→)\s*0?\.\d",
    re.IGNORECASE,
)
_PERCENT_DECLARED = re.compile(r"\b(?:percent(?:age)?s?|per\s+cent)\b", re.IGNORECASE)
_NUMBER_TYPES = frozenset({"number", "integer", "float", "double"})
_LONGEST_DESCRIPTION = 4000  # characters read of a description; a longer one is read no further
_HUNDRED = Decimal(100)


def percentages_written(request: str) -> frozenset[Decimal]:
    """The percentages ``request`` writes, as numbers of percent ("5%" is 5)."""
    return frozenset(Decimal(m.group(1)) for m in _PERCENTAGE.finditer(request))


def _declared_form(spec: Mapping[str, Any]) -> str | None:
    """``"percent"``, ``"decimal"``, or ``None`` for a description that declares neither. One that shows
    a percentage as a decimal ("5% is 0.05") speaks of both, and declares the decimal."""
    said = " ".join(str(spec.get(k, "")) for k in ("description", "title"))[:_LONGEST_DESCRIPTION]
    if _DECIMAL_DECLARED.search(said):
        return "decimal"
    return "percent" if _PERCENT_DECLARED.search(said) else None


def _takes_number(spec: Mapping[str, Any]) -> bool:
    kind = spec.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return any(isinstance(k, str) and k in _NUMBER_TYPES for k in kinds)


def _exact(value: object) -> Decimal | None:
    """``value`` as the decimal it was written as (``0.05`` is 0.05, not the binary float's expansion)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        exact = Decimal(repr(value))
    except InvalidOperation:
        return None
    return exact if exact.is_finite() else None


def _as_number(value: Decimal, integer: bool) -> int | float:
    """``value`` as a JSON number: an integer where the argument takes one and the value is whole."""
    if integer and value == value.to_integral_value():
        return int(value)
    return float(value)


def in_declared_percentages(decision: Decision, tools: Sequence[Mapping[str, Any]], request: str) -> Decision:
    """``decision`` with each number argument that is a percentage ``request`` wrote, in the other form
    than its tool's description declares, written in the declared one (see the module docstring); an
    answer, and a decision with nothing to write, are returned as they are."""
    written = percentages_written(request)
    if not written:
        return decision

    def declared(value: Any, form: str, integer: bool) -> Any:
        exact = _exact(value)
        if exact is None or exact == 0:
            return value
        if form == "decimal" and exact in written:
            return _as_number(exact / _HUNDRED, integer=False)
        if form == "percent" and exact not in written and exact * _HUNDRED in written:
            return _as_number(exact * _HUNDRED, integer=integer)
        return value

    def rewrite(_key: str, value: Any, spec: Mapping[str, Any]) -> Any:
        items = spec.get("items")
        if isinstance(value, list) and isinstance(items, Mapping) and _takes_number(items):
            # A list of rates: its own description or its items' declares their form.
            form = _declared_form(spec) or _declared_form(items)
            integer = items.get("type") == "integer"
            return value if form is None else [declared(v, form, integer) for v in value]
        if not _takes_number(spec) or (form := _declared_form(spec)) is None:
            return value
        return declared(value, form, spec.get("type") == "integer")

    return arguments_rewritten(decision, tools, rewrite)
