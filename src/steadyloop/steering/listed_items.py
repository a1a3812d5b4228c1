"""A call for each item a request lists, where the decision made a call for one of them; sans I/O.

Asked "the resistance of a wire ... with the resistivity of copper and aluminum", a small model writes the
call for copper and closes the list; asked for the frequency of the genotypes (AA), (Aa) and (aa), the
call for AA. The request says which items it wants, in the words the call already holds: an argument's
value that opens or sits in a list of like words ("copper and aluminum", "Paris, Lyon or Nice"), or one of
several values of an argument's ``enum`` the request names (one of several words may be named in words:
"the status and scheduled trial date" names ``status`` and ``trial_date``; "Asian Fusion" names ``Asian
Fusion`` alone). :func:`listed_calls` adds the call for each other item, the same call with only that
argument changed, in the order the request lists them.

It holds back wherever the list may not be the argument's: an item is the value of another argument in
any of the calls ("from celsius to fahrenheit"), a word that joins or asks rather than names ("and then", "and find"),
or of another shape than the value ("New York and book a room": lower-case words after a name); a tool
that takes the list as an array is not touched (only string arguments are). A decision that already made
calls with two values of the argument read the list itself and is left as it is, and so is a request whose
lists pair up ("Drama and Comedy from 2010 and 2012 respectively"). Linear in the request for each string
argument of the decision's calls and each value of its ``enum``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .decision import MAX_CALLS, Decision, tool_names

__all__ = ["listed_calls"]

# A word of a request: letters and digits, with the dots, dashes and apostrophes that sit inside names
# ("README.md", "e-mail", "O'Hare"); and each other mark but quotes, which a list is written with
# ('"A" and "B"'): a comma or "&" joins items, any other ends the list ("the nucleus? And whether",
# "J♥, Q♥, K♥ and Mike").
_WORD = re.compile(r"\w+(?:[.'/-]\w+)*|[^\w\s\"'`‘’“”]")
_AND = frozenset(("and", "or", "&"))
# "Drama and Comedy ... in 2010 and 2012 respectively": lists that pair up, item by item, across arguments.
_RESPECTIVELY = re.compile(r"\brespectively\b", re.IGNORECASE)
# An enum value's words: "trial_date" and "trial date" are both said "trial date" in a request.
_CHOICE_WORD = re.compile(r"[^\W_]+")
_LONGEST_ITEM = 3  # words in a listed value: "San Francisco" and "New York City", not a clause
_LONGEST_VALUE = 60  # characters of an argument's value read as an item

# Words that join a list to what follows or ask for something, never an item of one ("and then", "and
# the", "and find").
_NOT_ITEMS = frozenset(
    (
        "a", "also", "an", "any", "are", "as", "at", "be", "but", "by", "can", "could", "do", "does", "each",
        "for", "from", "get", "give", "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my",
        "not", "of", "on", "please", "show", "so", "some", "tell", "that", "the", "their", "them", "then",
        "there", "these", "this", "those", "to", "what", "when", "where", "which", "who", "why", "will",
        "with", "would", "you", "your",
        "about", "after", "all", "before", "between", "both", "did", "either", "he", "her", "his", "just",
        "let", "may", "might", "more", "most", "must", "need", "now", "only", "other", "our", "she", "should",
        "than", "they", "us", "want", "was", "we", "were", "whether",
        "calculate", "check", "compute", "find", "list", "look", "provide", "retrieve", "return",
        "search", "see", "send", "use",
    )
)  # fmt: skip


def _is_word(token: str) -> bool:
    return token[:1].isalnum() or token[:1] == "_"


def _shape(word: str) -> tuple[bool, bool, bool, bool]:
    """What kind of word a value is: opens with a capital, holds digits, holds letters, holds the marks of
    a name ("my-bot-id" and "focusing" are not items of one list)."""
    return (
        word[:1].isupper(),
        any(c.isdigit() for c in word),
        any(c.isalpha() for c in word),
        any(c in ".'/-" for c in word),
    )


class _Request:
    """The request's words, and where each lower-cased word of it stands."""

    __slots__ = ("at", "first", "lower", "words")

    def __init__(self, text: str) -> None:
        # "Madrid's music stores" lists Madrid
        self.words: list[str] = [w[:-2] if w[-2:].lower() == "'s" else w for w in _WORD.findall(text)]
        self.lower = [w.lower() for w in self.words]
        self.at: dict[str, list[int]] = {}
        self.first: dict[str, int] = {}  # where each word, as written, first stands
        for i, word in enumerate(self.words):
            self.at.setdefault(word.lower(), []).append(i)
            self.first.setdefault(word, i)

    def occurrences(self, value: list[str]) -> list[int]:
        """Where ``value`` (its words, lower-cased) stands in the request."""
        first = self.at.get(value[0], [])
        return [i for i in first if self.lower[i : i + len(value)] == value]

    def names(self, choice: str) -> list[tuple[int, int]]:
        """Where the request names an ``enum`` value (start and end of each place): as written, or a value
        of several words in any case with its underscores read as spaces ("trial date" names ``trial_date``)."""
        if choice in self.first:
            return [(i, i + 1) for i in self.at[choice.lower()] if self.words[i] == choice]
        words = [w.lower() for w in _CHOICE_WORD.findall(choice)]
        if len(words) < 2 or len(words) > _LONGEST_ITEM or not self.at.get(words[0]):
            return []
        return [(i, i + len(words)) for i in self.occurrences(words)]

    def item(self, start: int, shape: list[tuple[bool, bool, bool, bool]]) -> str | None:
        """The item of ``shape`` that starts at ``start``, or ``None`` when the words there are not one."""
        end = start + len(shape)
        words = self.words[start:end]
        if len(words) != len(shape) or any(
            w.lower() in _NOT_ITEMS or not _is_word(w) or _shape(w) != s
            for w, s in zip(words, shape, strict=True)
        ):
            return None
        if shape[0][0] and (self._a_name(start - 1) or self._a_name(end)):
            return None  # "Paris and New York": a name goes on past the words that would be the item
        return " ".join(words)

    def _ends_there(self, at: int) -> bool:
        """Whether the request's words stop or turn at ``at``: its end, a mark, or a word that joins."""
        return at >= len(self.words) or not _is_word(self.words[at]) or self.lower[at] in _NOT_ITEMS

    def _a_name(self, at: int) -> bool:
        return 0 <= at < len(self.words) and self.words[at][:1].isupper()

    def joined_after(self, end: int) -> int | None:
        """Where the next item starts when a list goes on at ``end`` (", ", " and ", ", or "); else ``None``."""
        lower = self.lower
        if end < len(lower) and lower[end] == ",":
            end += 1
            if end < len(lower) and lower[end] in _AND:
                end += 1
            return end
        if end < len(lower) and lower[end] in _AND:
            return end + 1
        return None

    def _joined_before(self, start: int) -> int | None:
        """Where the words that join an item to the one at ``start`` begin; ``None`` when none do."""
        lower, at = self.lower, start - 1
        if at >= 0 and lower[at] in _AND:
            return at - 1 if at >= 1 and lower[at - 1] == "," else at
        return at if at >= 0 and lower[at] == "," else None

    def listed_with(self, start: int, size: int, floor: int) -> tuple[int, int, list[str]]:
        """The list the value at ``start`` (of ``size`` words) is one of, not reaching back before
        ``floor``: where it starts and ends, and its items in order (``[]`` for no list)."""
        shape = [_shape(w) for w in self.words[start : start + size]]
        before: list[str] = []
        at = start
        while (sep := self._joined_before(at)) is not None and sep - size >= floor:  # "A, B and " before it
            found = self.item(sep - size, shape)
            if found is None:
                break
            before.append(found)
            at = sep - size
        after: list[str] = []
        end = start + size
        while (next_at := self.joined_after(end)) is not None:
            found = self.item(next_at, shape)
            if found is None:
                break
            after.append(found)
            end = next_at + size
        # Commas alone join a name to where it is ("Paris, France"): a list says "and" or "or" somewhere.
        if not any(w in _AND for w in self.lower[at:end]):
            return at, end, []
        if not shape[0][0] and not self._ends_there(end):
            return at, end, []  # "vegan, and takes under 30 minutes": a clause goes on past a plain word
        return at, end, [*reversed(before), " ".join(self.words[start : start + size]), *after]


def _named_choices(request: _Request, allowed: set[str]) -> dict[str, int]:
    """The ``enum`` values the request names, and where it first does, in that order. A value named only
    inside a longer one is not named ("Asian Fusion" names ``Asian Fusion``, not ``Asian`` as well)."""
    places = {v: found for v in allowed if (found := request.names(v))}
    ends: dict[int, set[int]] = {}  # where each named value ends, by where it starts
    for found in places.values():
        for start, end in found:
            ends.setdefault(start, set()).add(end)

    def inside_longer(start: int, end: int) -> bool:
        # a value is at most _LONGEST_ITEM words, so one holding this place starts at most that far before
        return any(
            e >= end and (s, e) != (start, end)
            for s in range(max(0, end - _LONGEST_ITEM), start + 1)
            for e in ends.get(s, ())
        )

    first: dict[str, int] = {}  # where each value is first named on its own
    for value, found in places.items():
        alone = [start for start, end in found if not inside_longer(start, end)]
        if alone:
            first[value] = alone[0]
    return dict(sorted(first.items(), key=lambda named: named[1]))


def _listed(request: _Request, value: str, enum: Sequence[Any] | None, spare: int) -> tuple[int, list[str]]:
    """Where the list the request names ``value`` in starts, and its items (``value`` among them, as the
    call wrote it); ``[]`` for no list. A value the request also names outside a list, more often than
    ``spare`` other arguments hold it, is read as named alone ("predict 'Spending Score'" after a list
    of the data's columns)."""
    allowed = None if enum is None else {v for v in enum if isinstance(v, str)}
    if allowed is not None:
        named = _named_choices(request, allowed)
        if value in named and len(named) > 1:
            return next(iter(named.values())), list(named)
    words = [w.lower() for w in _WORD.findall(value)]
    if not words or len(words) > _LONGEST_ITEM or len(value) > _LONGEST_VALUE:
        return 0, []
    found: tuple[int, list[str]] | None = None
    alone = 0
    walked = 0  # each word is walked over once, however often the value stands in the request
    for start in request.occurrences(words):
        if start < walked:
            continue  # within a list already read
        first, walked, items = request.listed_with(start, len(words), walked)
        if len(items) < 2:
            alone += 1
        elif found is None:
            found = first, items
    if found is None or alone > spare or (allowed is not None and not allowed.issuperset(found[1])):
        return 0, []
    first, items = found
    return first, [value if i.lower() == value.lower() else i for i in items]


def _enum(schema: Mapping[str, Any], argument: str) -> Sequence[Any] | None:
    properties = schema.get("properties")
    spec = properties.get(argument) if isinstance(properties, Mapping) else None
    enum = spec.get("enum") if isinstance(spec, Mapping) else None
    return enum if isinstance(enum, list) else None


def _said_by_argument(calls: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, set[str]]:
    """Every value the decision's calls give, lower-cased, by argument name (lists and objects read through)."""
    said: dict[str, set[str]] = {}
    for _, arguments in calls:
        for argument, value in arguments.items():
            found = said.setdefault(argument, set())
            stack: list[Any] = [value]
            while stack:  # not recursive: a model's arguments may nest deeper than Python's stack
                item = stack.pop()
                if isinstance(item, list | tuple):
                    stack.extend(item)
                elif isinstance(item, dict):
                    stack.extend(item.values())
                elif item is not None:
                    found.add(str(item).lower())
    return said


def _fanned(
    call: tuple[str, dict[str, Any]],
    request: _Request,
    schema: Mapping[str, Any],
    decided: Sequence[tuple[str, dict[str, Any]]],
    said: Mapping[str, set[str]],
) -> list[tuple[str, dict[str, Any]]]:
    """``call``, and a call for each other item of the lists its string arguments open, in order."""
    calls = [call]
    name, arguments = call
    taken: set[int] = set()  # a list is one argument's: "the sequence A and B against the reference A"
    for argument, value in arguments.items():
        if not isinstance(value, str) or not value.strip():
            continue
        # an item another argument holds, in any call, is that argument's ("Friends', and Hulu")
        made = {a[argument] for n, a in decided if n == name and isinstance(a.get(argument), str)}
        if len(made) > 1:
            continue  # the decision gave this argument several values: it read the request's list itself
        others = set().union(*(v for k, v in said.items() if k != argument)) - {value.lower()}
        spare = sum(isinstance(v, str) and v.lower() == value.lower() for v in arguments.values()) - 1
        at, listed = _listed(request, value, _enum(schema, argument), spare)
        items = [i for i in listed if i.lower() not in others]
        if len(items) < 2 or at in taken or len(calls) * len(items) > MAX_CALLS:
            continue  # no list, or another argument's, or more calls than a step holds
        taken.add(at)
        calls = [(name, {**args, argument: item}) for _, args in calls for item in items]
    return calls


def listed_calls(decision: Decision, request: str, tools: Sequence[Mapping[str, Any]]) -> Decision:
    """``decision`` with a call for each other item of a list the request names one of its values in.

    Args:
        decision: the routed step's decision; an answer is returned as it is.
        request: the user's request, before any tool ran for it.
        tools: the declared tools (OpenAI format), for the ``enum`` of each argument.
    """
    if decision.answers or _RESPECTIVELY.search(request):
        return decision
    schemas = dict(tool_names(tools))
    words = _Request(request)
    said = _said_by_argument(decision.calls)
    calls: list[tuple[str, dict[str, Any]]] = []
    for call in decision.calls:
        for made in _fanned(call, words, schemas.get(call[0], {}), decision.calls, said):
            if made not in calls:
                calls.append(made)
    if len(calls) > MAX_CALLS:
        return decision
    (name, arguments), *more = calls
    return Decision(name, arguments, tuple(more))
