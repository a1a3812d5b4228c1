"""Every listed choice a request names, in the list the decision wrote for them; sans I/O.

A tool that takes several of its listed values at once (an ``array`` whose ``items`` hold an ``enum``:
``"categories": ["Organic", "Vegetables", "Fruits", "Dairy"]``) gets from a small model the first few the
request names and not the rest: asked for "a grocery store with organic fruits and vegetables", the 1.5B
model wrote ``["Organic", "Vegetables"]`` (BFCL simple_python_369). :func:`with_named_choices` adds to
such a list each listed value the request names (each word of the value, in order, singular or plural:
"fruits" names ``Fruits``, "picnic table" names ``Picnic Tables``), in the order the request names them.

It adds only to a list the model wrote, and holds back where the words may be something else:

- a value said inside a longer listed value of the same tool ("violin lessons" names ``Violin Lessons``,
  not ``Violins`` of another argument) or inside a name ("the Natural History Museum" names no
  ``history``: a capitalised word stands next to it);
- a value said after "no", "not", "without", "except" or "excluding" within three words;
- a decision of several calls: each call has its own share of the request's choices ("a Tennis Court
  ... in New York, then a Playground ... in Los Angeles"; "a pet-friendly library with a cafe inside,
  then a store with disabled access");
- a value shorter than three letters ("A" for a nucleotide is a word of any request);
- a request mostly in another script, which shares no words with the values.

Linear in the request for each listed value of the decision's tools.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .argument_specs import listed_values, lists_choices
from .asked import in_latin_letters
from .decision import Decision, tool_names

__all__ = ["with_named_choices"]

_WORD = re.compile(r"[^\W_]+")
_SHORTEST = 3
_NOT = frozenset(("no", "not", "without", "except", "excluding", "nor", "never"))
_NOT_REACH = 3  # words before a value that a "not" reaches


def _singular(word: str) -> str:
    """``word`` without a plural's ending: "tables" and "table", "categories" and "category"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


class _Request:
    """The request's words, with where each starts a sentence and which are capitalised."""

    __slots__ = ("capital", "opens", "words")

    def __init__(self, request: str) -> None:
        self.words: list[str] = []
        self.capital: list[bool] = []
        self.opens: list[bool] = []
        end = 0
        for match in _WORD.finditer(request):
            gap = request[end : match.start()]
            self.opens.append(not self.words or any(c in ".!?\n:" for c in gap))
            word = match.group()
            self.words.append(_singular(word.lower()))
            self.capital.append(word[0].isupper())
            end = match.end()

    def spans(self, value: str) -> list[tuple[int, int]]:
        """Where ``value``'s words stand in the request, in order, as ``(first, past_last)``."""
        words = [w.lower() for w in _WORD.findall(value)]
        if not words or sum(map(len, words)) < _SHORTEST:
            return []
        wanted = [_singular(w) for w in words]
        n = len(wanted)
        first = wanted[0]
        return [
            (i, i + n)
            for i, word in enumerate(self.words)
            if word == first and self.words[i : i + n] == wanted
        ]

    def in_a_name(self, span: tuple[int, int]) -> bool:
        """Whether a capitalised word that opens no sentence stands right before or after ``span``."""
        before, after = span[0] - 1, span[1]
        for i in (before, after):
            if 0 <= i < len(self.words) and self.capital[i] and not self.opens[i]:
                return True
        return False

    def denied(self, span: tuple[int, int]) -> bool:
        return any(w in _NOT for w in self.words[max(0, span[0] - _NOT_REACH) : span[0]])


def _choices(schema: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each argument's listed values: an ``enum`` of its own or of its items, strings only."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    listed = {str(name): listed_values(spec) for name, spec in properties.items()}
    return {
        name: [v for v in values if isinstance(v, str)]
        for name, values in listed.items()
        if values is not None
    }


def _named(request: _Request, choices: Mapping[str, list[str]]) -> dict[str, list[tuple[int, str]]]:
    """For each argument, the listed values the request names, with where: a value said inside a longer
    listed value's words, inside a name, or after a "not" is not named."""
    spans = {(name, value): request.spans(value) for name, values in choices.items() for value in values}
    longest: dict[int, int] = {}  # where a span starts: where the longest one starting there ends
    for found in spans.values():
        for start, end in found:
            longest[start] = max(end, longest.get(start, end))
    reach = max((end - start for start, end in longest.items()), default=0)

    def inside(start: int, end: int) -> bool:
        # a longer span holding this one starts at most ``reach`` words before it
        for a in range(max(0, start - reach), start + 1):
            b = longest.get(a, a)
            if a <= start and end <= b and b - a > end - start:
                return True
        return False

    named: dict[str, list[tuple[int, str]]] = {}
    for (name, value), found in spans.items():
        for span in found:
            if not inside(*span) and not request.in_a_name(span) and not request.denied(span):
                named.setdefault(name, []).append((span[0], value))
                break
    return named


def with_named_choices(decision: Decision, request: str, tools: Sequence[Mapping[str, Any]]) -> Decision:
    """``decision`` with each list of listed values holding every one of them the request names (see the
    module docstring); an answer is returned as it is."""
    if decision.answers or decision.more or not in_latin_letters(request):
        return decision
    schema = dict(tool_names(tools)).get(decision.name)
    properties = schema.get("properties") if schema is not None else None
    if schema is None or not isinstance(properties, Mapping):
        return decision
    arguments = decision.arguments
    lists = [
        k for k, v in arguments.items() if isinstance(v, list) and v and lists_choices(properties.get(k))
    ]
    if not lists:
        return decision
    named = _named(_Request(request), _choices(schema))
    fixed = dict(arguments)
    for key in lists:
        have = {v.lower() for v in arguments[key] if isinstance(v, str)}
        missing = [v for _, v in sorted(named.get(key, [])) if v.lower() not in have]
        if missing:
            fixed[key] = [*arguments[key], *missing]
    return Decision(decision.name, fixed)
