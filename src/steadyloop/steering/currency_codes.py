"""A currency named in words where a tool takes a currency: written as its ISO 4217 code; sans I/O.

Tools that take a currency take its code (``EUR``, ``USD``): exchange-rate services, payment and
accounting APIs all do. A small model writes the words the request used instead. Asked "Convert 200
euros to US dollars", the routed decision of the 1.5B model wrote ``"from_currency": "euros"`` (BFCL
multiple_95, twice, on a server with and without its prompt cache), where a native call wrote ``EUR``.
:func:`in_currency_codes` rewrites the value of an argument whose name says "currency" (``currency``,
``from_currency``, ``baseCurrency``, ``currencies``) when it names one currency only: "euros", "US
dollars", "Japanese yen", "pound sterling", "usd". A bare "dollars", "pesos" or "francs" names several
currencies and is left as written, and so is any other value, and an argument held to listed values
(``enum``), which says in what form it takes them.

Over BFCL's answer keys, all 50 currency arguments accept the code. Linear in the decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .argument_specs import listed_values
from .decision import Decision, arguments_rewritten

__all__ = ["in_currency_codes"]

# Names that each designate one currency, singular and lower-case; a plural is read by dropping its "s".
_CODES: dict[str, str] = {
    "us dollar": "USD", "united states dollar": "USD", "american dollar": "USD", "u.s. dollar": "USD",
    "euro": "EUR",
    "pound sterling": "GBP", "british pound": "GBP", "sterling": "GBP", "uk pound": "GBP",
    "pounds sterling": "GBP", "british pound sterling": "GBP",
    "yen": "JPY", "japanese yen": "JPY",
    "yuan": "CNY", "chinese yuan": "CNY", "renminbi": "CNY", "yuan renminbi": "CNY",
    "indian rupee": "INR",
    "canadian dollar": "CAD",
    "australian dollar": "AUD",
    "new zealand dollar": "NZD",
    "singapore dollar": "SGD",
    "hong kong dollar": "HKD",
    "swiss franc": "CHF",
    "mexican peso": "MXN",
    "brazilian real": "BRL",
    "south korean won": "KRW", "korean won": "KRW",
    "russian ruble": "RUB", "russian rouble": "RUB", "ruble": "RUB", "rouble": "RUB",
    "swedish krona": "SEK", "norwegian krone": "NOK", "danish krone": "DKK",
    "south african rand": "ZAR",
    "turkish lira": "TRY",
    "polish zloty": "PLN", "zloty": "PLN",
}  # fmt: skip
_KNOWN = frozenset(_CODES.values())
_NAME_WORD = re.compile(r"[a-z]+|[A-Z][a-z]*")
_SPACES = re.compile(r"\s+")
_LONGEST = 40  # characters of a currency's name


def _takes_currency(name: str) -> bool:
    return any(w.lower() in ("currency", "currencies") for w in _NAME_WORD.findall(name))


def code_for(value: str) -> str | None:
    """The ISO 4217 code ``value`` names (a known code in any case, or a name of one currency only)."""
    text = _SPACES.sub(" ", value.strip()).lower()
    if len(text) > _LONGEST:
        return None
    if text.upper() in _KNOWN:
        return text.upper()
    found = _CODES.get(text)
    if found is None and text.endswith("s"):
        found = _CODES.get(text[:-1])
    return found


def _as_codes(value: Any) -> Any:
    if isinstance(value, str):
        return code_for(value) or value
    if isinstance(value, list):
        return [_as_codes(v) if isinstance(v, str) else v for v in value]
    return value


def in_currency_codes(decision: Decision, tools: Sequence[Mapping[str, Any]]) -> Decision:
    """``decision`` with each currency argument that names one currency in words written as its code
    (see the module docstring); an answer, and a decision with nothing to write, are returned as they are."""

    def coded(key: str, value: Any, spec: Mapping[str, Any]) -> Any:
        return _as_codes(value) if _takes_currency(key) and listed_values(spec) is None else value

    return arguments_rewritten(decision, tools, coded)
