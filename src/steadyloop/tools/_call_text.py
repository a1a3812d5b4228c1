"""Reading JSON call envelopes out of a model's text, within a budget (internal to ``recovery``).

A ``Reader`` is made once per reply. It knows the declared tool names (only those become calls) and how
much text it may still hand to the JSON repairer: the repairer reads about a character a microsecond, so
a reply full of almost-JSON would otherwise cost a tenth of a second per 100 KB on the event loop. Beyond
the budget only strict JSON is read. Every text is measured for nesting before a recursive reader sees
it, and each part of a reply is read once, so the whole reading is linear in the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from .._nesting import too_deep
from ..arguments import REPAIR_OVERHEAD, read_arguments, repair_value, without_strings

__all__ = ["MAX_BLOCKS", "REPAIR_BUDGET", "Found", "Reader", "Span"]

#: Tagged blocks (or markers, or fences) one reply is read for: far more calls than any model makes in
#: one reply, and a bound on the work a reply of nothing but openers can cause.
MAX_BLOCKS = 1000

#: Characters of almost-JSON one reply may have repaired; at about a microsecond each, ~16 ms.
REPAIR_BUDGET = 16_000

# A call before its id is given: name, arguments, and the argument text when there is one to keep.
Found = tuple[str, dict[str, Any], str | None]
# A span of the text to take out, and the calls it held.
Span = tuple[int, int, list[Found]]

_DECODER = json.JSONDecoder()
_SEPARATORS = " \t\r\n;,"
_NAME_KEYS = ("name", "tool_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args")


class Reader:
    """Reads call envelopes for one reply: declared names only, repairs within a budget.

    Args:
        names: the tools the model was given.
    """

    __slots__ = ("_deep", "budget", "names")

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        self.budget = REPAIR_BUDGET
        self._deep: dict[str, bool] = {}

    def declared(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names

    def too_deep(self, text: str) -> bool:
        """``too_deep``, remembered for the last few texts: finders that fail hand the same text on."""
        found = self._deep.get(text)
        if found is None:
            if len(self._deep) >= 8:
                self._deep.clear()
            found = self._deep[text] = too_deep(text)
        return found

    def spend(self, size: int) -> bool:
        """Take ``size`` characters (plus a repair's own cost) from the budget, if they are there."""
        cost = size + REPAIR_OVERHEAD
        if cost > self.budget:
            return False
        self.budget -= cost
        return True

    def repair(self, text: str) -> Any:
        """Almost-JSON read with its strings shielded, or ``None`` when over the budget, too deep or hopeless."""
        if self.too_deep(text) or self.budget < REPAIR_OVERHEAD:
            return None
        value, spent = repair_value(text, self.budget)
        self.budget -= spent
        return value

    def decode_values(self, text: str, start: int, limit: int, *, single: bool) -> tuple[int, list[Any]]:
        """Strict JSON values from ``start``, split by whitespace, ``;`` or ``,``; and where reading stopped.

        Nothing past ``limit`` is read, and nothing from a stretch of text nested too deep.
        """
        # Read from a copy of just this stretch: a decoding error counts the lines of everything before
        # it, which over the whole reply, once per stretch, would be quadratic.
        stretch = text[start:limit]
        values: list[Any] = []
        if self.too_deep(stretch):
            return start, values
        position, end = 0, len(stretch)
        while position < end:
            try:
                value, position_after = _DECODER.raw_decode(stretch, position)
            except (ValueError, RecursionError):
                break
            values.append(value)
            position = position_after
            if single:
                break
            after = position
            while after < end and stretch[after] in _SEPARATORS:
                after += 1
            if after >= end or stretch[after] not in "{[":
                position = after if after >= end else position
                break
            position = after
        return start + position, values

    def json_calls(self, text: str, *, tagged: bool) -> list[Found]:
        """The calls in a text that is one or more JSON call envelopes, or ``[]`` if it is anything else.

        Args:
            text: the text, trimmed.
            tagged: a tag said this is a call. Then an envelope that cannot be read whole is repaired
                and, failing that, still named by its ``"name"`` field; untagged text must be clean JSON
                from end to end, or end where JSON would and repair.
        """
        if not text.startswith(("{", "[")):
            return []
        end, values = self.decode_values(text, 0, len(text), single=False)
        if not values or end < len(text):
            if not tagged and not _only_json(text):
                return []  # an untagged object with words around it is an example, not a call
            if tagged:
                return self.repaired_calls(text)
            repaired = self.repair(text)
            values = repaired if isinstance(repaired, list) else [repaired]
        found: list[Found] = []
        for value in values:
            calls = self.from_value(value, tagged=tagged)
            if not calls:
                if tagged:
                    continue
                return []
            found.extend(calls)
        return found

    def repaired_calls(self, text: str) -> list[Found]:
        """The calls in a tagged text that is not clean JSON: repaired, or, where nothing could be read,
        at least named."""
        repaired = self.repair(text)
        if not isinstance(repaired, dict | list):
            return self.named_call(text)
        values = repaired if isinstance(repaired, list) else [repaired]
        return [call for value in values for call in self.from_value(value, tagged=True)]

    def named_call(self, text: str) -> list[Found]:
        """A tagged call nothing could read but its ``"name"`` field: no arguments, the text kept."""
        named = _named(text)
        return [(named, {}, text)] if named is not None and self.declared(named) else []

    def from_value(self, value: Any, *, tagged: bool) -> list[Found]:
        """Calls from a decoded envelope or list of envelopes; ``[]`` when any of them is not a call."""
        items = value if isinstance(value, list) else [value]
        found: list[Found] = []
        for item in items:
            call = self.envelope(item, tagged=tagged)
            if call is None:
                return []
            found.append(call)
        return found

    def envelope(self, item: Any, *, tagged: bool) -> Found | None:
        """``{"name"|"tool_name": .., "arguments"|"parameters"|"args": ..}`` or OpenAI's ``{"function": {..}}``.

        Only a declared tool is a call. Untagged, it must carry arguments (an object with a name is often
        just data) that can be read; tagged, unreadable arguments are kept as text for the model to see.
        """
        if not isinstance(item, dict):
            return None
        if isinstance(item.get("function"), dict):
            item = item["function"]
        name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str) and item[k]), None)
        if name is None or not self.declared(name):
            return None
        key = next((k for k in _ARGUMENT_KEYS if k in item), None)
        if key is not None and _is_definition(item, item[key]):
            return None
        if key is None:
            return (name, {}, None) if tagged else None
        if tagged:
            return self.tagged_arguments(name, item[key])
        raw = item[key]
        arguments = self.arguments(raw)
        if arguments is None:
            return None
        return name, arguments, raw.strip() if isinstance(raw, str) else None

    def tagged_arguments(self, name: str, raw: Any) -> Found:
        """Open a tagged call's arguments; unreadable ones give ``{}`` with the text kept for the model."""
        arguments = self.arguments(raw)
        text = raw if isinstance(raw, str) else None
        if arguments is None:
            return name, {}, text if text is not None else _dumped(raw)
        return name, arguments, text.strip() if text is not None else None

    def arguments(self, raw: Any) -> dict[str, Any] | None:
        """Arguments as an object; repair only within the budget."""
        if raw is None or isinstance(raw, dict):
            return dict(raw or {})
        if not isinstance(raw, str):
            return None
        if self.budget < REPAIR_OVERHEAD:
            # The budget is spent: only strict JSON will do.
            text = raw.strip()
            end, values = self.decode_values(text, 0, len(text), single=True)
            return values[0] if end == len(text) and values and isinstance(values[0], dict) else None
        found, spent = read_arguments(raw, self.budget)
        self.budget -= spent
        return found


# What JSON and the almost-JSON repair reads hold outside strings: numbers, literals, a key without quotes.
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[A-Za-z_][\w$-]*")
_LITERALS = frozenset({"true", "false", "null", "True", "False", "None"})
_BARE_KEY = re.compile(r"\s*:")
_STRUCTURE = frozenset(' \t\r\n{}[]:,;"')


def _only_json(text: str) -> bool:
    """Whether an untagged text is JSON from end to end, broken maybe but with nothing else in it: outside
    its strings, structure, numbers, literals and keys without quotes, and it ends where JSON ends."""
    if not text.rstrip().endswith(("}", "]")):
        return False  # cut short, or words after it
    skeleton = _NUMBER.sub(" ", without_strings(text))
    position = 0
    for word in _WORD.finditer(skeleton):
        if not _STRUCTURE.issuperset(skeleton[position : word.start()]):
            return False
        if word.group() not in _LITERALS and not _BARE_KEY.match(skeleton, word.end()):
            return False
        position = word.end()
    return _STRUCTURE.issuperset(skeleton[position:])


def _is_definition(item: dict[str, Any], arguments: Any) -> bool:
    """A tool's definition echoed back (a description and a parameter schema), not a call to it."""
    return (
        "description" in item
        and isinstance(arguments, dict)
        and arguments.get("type") == "object"
        and isinstance(arguments.get("properties"), dict)
    )


def _named(text: str) -> str | None:
    """The value of a ``"name"`` field in text that is not JSON, when it is a plain string."""
    for quote in ('"', "'"):
        key = f"{quote}name{quote}"
        at = text.find(key)
        if at == -1:
            continue
        rest = text[at + len(key) : at + len(key) + 300].lstrip()
        if not rest.startswith(":"):
            continue
        rest = rest[1:].lstrip()
        if rest[:1] in ("'", '"'):
            end = rest.find(rest[0], 1)
            if end > 1:
                return rest[1:end]
    return None


def _dumped(raw: Any) -> str:
    try:
        return json.dumps(raw, default=str)
    except (ValueError, RecursionError):
        return repr(type(raw))
