"""Optional choices the request never spoke of, left to the tool; sans I/O.

Held to a call's schema, a small model writes every argument the schema offers, and for an optional one
held to a list of values (``enum``) it picks one, most often the first: "the weather in Boston" becomes
``{"location": "Boston, MA", "unit": "celsius"}`` where the tool's default is fahrenheit. The user asked
for no unit; the tool's own default is the answer to a question nobody put. :func:`without_unasked` drops
such an argument from a decided call: optional, one of its listed values (its ``enum``, or two or more
values its description quotes: "could be 'Breakfast', 'Lunch', 'Dinner'"), and none of the value's words
in the request (one word's first five letters beginning the other's: "in detail" speaks of "detailed",
"descending" of "DESC"). A required argument, or one whose value or own name the request speaks of
("in the Comic genre" names ``genre``), is kept as the model wrote it, and so is a value of codes only
(``es-ES`` is "in Spanish"), one with digits or a yes or no ("free to enter" is ``"True"``), and every
choice where most of the request's letters are not Latin (a request in Chinese shares no word with an
English value).

Free text is held to the same test against more words: an optional string argument with no listed
values, set to words that appear nowhere in the request or the conversation before it (the system prompt,
earlier messages), is dropped: "the schedule of Manchester United's next 6 games in the Premier League"
became ``{"location": "London"}`` beside the team and the league, a place nobody gave. Words of the
conversation count here because free text is where a value said earlier ("I live in Lyon") comes back.
A value with digits, of codes only, or a yes or no is kept, as above; so is one whose argument the
request names, one the model writes in its own words (a ``message``, a ``query``, a ``title``: "Update
the parser" for "commit my changes" is no pick), and one that names a file, a folder or an address
(``path``, ``folder``, ``url``: "docs" for "the documentation folder" is the request read, not a guess).

An optional argument whose default is the present ("Default is the current year", "Defaults to today")
set to a date, a year or a time is dropped when the conversation speaks of no time (no "today", "next",
"this", month or weekday) and writes none of the value's numbers: the model's present is its training
data's ("the population of pandas in the wild in China" got ``"year": 2023``).

The same holds for any optional argument whose value is the default its schema or its description names
("Default is 'home'", "Defaults to 'miles'", ``"default": "Not specified"``; ``defaults.py``): the model
copied the tool's own default into the call, which leaves the call as it was and, for a reader of the
call, says the user chose it. It is dropped unless the request speaks of the value or names the argument
("including visual outputs" for ``include_visuals``, whose default is true). Linear in the request and
the decision.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .asked import in_latin_letters
from .decision import Decision, tool_names
from .defaults import at_default

__all__ = ["without_unasked"]

_WORD = re.compile(r"[^\W_]+")
_NAME_PARTS = re.compile(r"(?<=[a-z])(?=[A-Z])")  # "sortOrder" is "sort Order"; "_" already splits
_STEM = 5
_SHORTEST = 3  # a shorter word begins too many others ("c" and "celsius")
_YES_NO = frozenset(("true", "false", "yes", "no", "y", "n", "on", "off"))
# A value a description quotes: "could be 'Breakfast', 'Lunch', 'Dinner'", 'e.g. "asc" or "desc"'.
_QUOTED = re.compile(r"'([^'\n]{1,40})'|\"([^\"\n]{1,40})\"")
# Words of a value that say nothing of it ("Place of Worship" speaks of a place and of worship).
_EMPTY = frozenset(("a", "an", "and", "at", "by", "for", "in", "of", "on", "or", "the", "to", "with"))


# Plurals that do not begin as their singular does ("women" is not "woman" in five letters).
_IRREGULAR = {
    "women": "woman",
    "men": "man",
    "children": "child",
    "people": "person",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
}


# A description whose default is the present: "Default is the current year", "Defaults to today",
# "default is now".
_PRESENT = re.compile(
    r"\b(?:(?:current|present|today'?s)\s+(?:year|date|day|time|season|month|week|timestamp|datetime)"
    r"|today|now)\b",
    re.IGNORECASE,
)
_DEFAULT = re.compile(r"\bdefault", re.IGNORECASE)
# Words by which a request speaks of a time: a value of that time may be the model's reading of them.
_TIME_WORD = re.compile(
    r"\b(?:today|tomorrow|tonight|yesterday|now|next|last|this|coming|upcoming|ago|current|currently|recent"
    r"|latest|week|weekend|month|year|season|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+")


def _numbers(text: str) -> set[str]:
    return {m.lstrip("0") or "0" for m in _NUMBER.findall(text)}


def _stems(text: str) -> set[str]:
    words = (m.lower() for m in _WORD.findall(text))
    return {_IRREGULAR.get(w, w)[:_STEM] for w in words if w not in _EMPTY}


class _Said:
    """The request's words, for "does it speak of this word": one word's first five letters begin the
    other's ("DESC" and "descending", "detailed" and "in detail"), of three letters or more. And its
    numbers, and whether it speaks of a time at all."""

    __slots__ = ("beginnings", "numbers", "stems", "timed")

    def __init__(self, request: str) -> None:
        self.stems = _stems(request)
        self.beginnings = {s[:k] for s in self.stems for k in range(_SHORTEST, len(s) + 1)}
        self.numbers = _numbers(request)
        self.timed = _TIME_WORD.search(request) is not None

    def speaks_of(self, stem: str) -> bool:
        if stem in self.stems or (len(stem) >= _SHORTEST and stem in self.beginnings):
            return True
        return any(stem[:k] in self.stems for k in range(_SHORTEST, len(stem)))


def _speaks_of_value(value: Any, said: _Said) -> bool:
    if isinstance(value, bool) or value is None:
        return False  # a yes or no, or nothing, is never a word of the request
    if isinstance(value, int | float):
        return any(said.speaks_of(w) for w in _stems(str(value) if isinstance(value, int) else f"{value:g}"))
    return isinstance(value, str) and any(said.speaks_of(w) for w in _stems(value))


def _listed(value: str, spec: Mapping[str, Any]) -> bool:
    """Whether ``value`` is one of the argument's listed values: its ``enum``, or, for free text, two or
    more values its description quotes ("could be 'Breakfast', 'Lunch', 'Dinner'")."""
    enum = spec.get("enum")
    if isinstance(enum, list):
        return True
    description = spec.get("description")
    if not isinstance(description, str):
        return False
    quoted = [a or b for a, b in _QUOTED.findall(description)]
    return len(quoted) >= 2 and value.lower() in {q.lower() for q in quoted}


# Arguments whose value the model writes in its own words (a commit message, an issue's body, a search
# query): "Update the parser" for "commit my changes" shares no word with the request and is no pick. And
# arguments that name a place in the user's own files or on the web, which the model reads off the request
# in other spellings ("docs" for "the documentation folder"): dropped, the call would look somewhere else.
_NOT_PICKS = frozenset(
    (
        "body", "caption", "comment", "comments", "content", "description", "message", "note", "notes",
        "prompt", "query", "reason", "subject", "summary", "text", "title",
        "dir", "directory", "file", "filename", "filepath", "folder", "path", "uri", "url",
    )
)  # fmt: skip


def _unjudged(value: str, words: set[str]) -> bool:
    """Whether ``value`` is one the request would not share words with: a code ("es-ES" for "in
    Spanish"), a number ("2017" for "six years ago") or a yes or no ("free to enter" is ``"True"``)."""
    return (
        all(len(w) < _SHORTEST for w in words) or any(c.isdigit() for c in value) or value.lower() in _YES_NO
    )


def _made_up(name: str, value: str, spec: Mapping[str, Any], heard: _Said) -> bool:
    """Whether free text ``value`` of a string argument with no listed values has no word the
    conversation holds (``heard``: the request and what came before it); never for an argument the
    model writes in its own words, or one that names a file, a folder or an address (``_NOT_PICKS``)."""
    if spec.get("type") != "string" or "enum" in spec:
        return False
    if any(w.lower() in _NOT_PICKS for w in _WORD.findall(_NAME_PARTS.sub(" ", name))):
        return False
    words = _stems(value)
    return bool(words) and not _unjudged(value, words) and not any(heard.speaks_of(w) for w in words)


def _present_made_up(value: Any, spec: Mapping[str, Any], heard: _Said) -> bool:
    """Whether ``value`` is a date, year or time the model wrote for an argument whose default is the
    present ("Default is the current year") while the conversation speaks of no time and writes none of
    its numbers: the model's "now" is its training data's, not today (2023 for "the population of pandas
    in China")."""
    if isinstance(value, bool) or not isinstance(value, int | str) or heard.timed:
        return False
    description = spec.get("description")
    if not isinstance(description, str) or not (
        _DEFAULT.search(description) and _PRESENT.search(description)
    ):
        return False
    numbers = _numbers(str(value))
    return bool(numbers) and not numbers & heard.numbers


def _unasked(name: str, value: Any, schema: Mapping[str, Any], said: _Said, heard: _Said) -> bool:
    properties = schema.get("properties")
    spec = properties.get(name) if isinstance(properties, Mapping) else None
    required = schema.get("required")
    if not isinstance(spec, Mapping) or (isinstance(required, list) and name in required):
        return False
    if any(len(w) >= _SHORTEST + 1 and w in said.stems for w in _stems(_NAME_PARTS.sub(" ", name))):
        # The request names the argument itself ("a movie in the Comic genre" for ``genre``): it asked for
        # a choice there, and the model's value ("Comedy") is its reading of the words it was given. The
        # whole word, not a beginning: "showing" does not name ``show_type``.
        return False
    if at_default(name, value, schema):
        return not _speaks_of_value(value, said)
    if _present_made_up(value, spec, heard):
        return True
    if not isinstance(value, str):
        return False
    if not _listed(value, spec):
        return _made_up(name, value, spec, heard)
    words = _stems(value)
    return not _unjudged(value, words) and not any(said.speaks_of(w) for w in words)


def without_unasked(
    decision: Decision, request: str, tools: Sequence[Mapping[str, Any]], earlier: str = ""
) -> Decision:
    """``decision`` without the optional arguments its calls chose and the request never spoke of: a
    listed value, a default, or free text no word of the conversation holds (see the module docstring);
    an answer is returned as it is.

    Args:
        request: the user's request, before any tool ran for it.
        tools: the declared tools (OpenAI format), for each argument's schema.
        earlier: the text of the conversation before the request (system prompt, earlier messages):
            free text said there is not made up.
    """
    if decision.answers or not in_latin_letters(request):
        return decision
    schemas = dict(tool_names(tools))
    said = _Said(request)
    heard = _Said(f"{earlier}\n{request}") if earlier else said
    calls: list[tuple[str, dict[str, Any]]] = []
    for name, arguments in decision.calls:
        schema = schemas.get(name, {})
        calls.append((name, {k: v for k, v in arguments.items() if not _unasked(k, v, schema, said, heard)}))
    (name, arguments), *more = calls
    return Decision(name, arguments, tuple(more))
