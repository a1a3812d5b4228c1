"""Reading a tool call's arguments the way the model meant them (public).

Models, and the servers in front of them, do not always send arguments as clean JSON: local models write
Python-flavoured almost-JSON, some servers encode the object twice, a code fence sneaks in, and a turn cut
off at its token ceiling leaves half an object. ``parse_tool_arguments`` opens all of these into a ``dict``
and raises ``ToolArgumentsError`` (with a message the model can read) when no object can be had.

Structural repair is ``json_repair``'s job. Before handing text to it, every quoted string (``'...'``,
``"..."``, ``“...”``, ``‘...’``) is lifted out and replaced by a numbered placeholder, then put back into
the repaired value: the repairer guesses where a single-quoted string ends from the characters inside it
(it would cut ``'x,}'`` short) and mishandles some escapes, so it never gets to see what strings hold.
Where the strings themselves are broken (an unescaped quote inside one, quotes doubled by a CSV export,
a key missing its closing quote) the lifted placeholders come back torn, and the text goes to the
repairer as written instead, since mending a string is exactly what it is built for.

A repair may drop what it cannot read and complete what was cut off, never make up a value: every reading
is checked leaf by leaf against the text (``_provenance.Provenance``), and one holding a key, string,
number or literal the text does not hold is not taken.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

from json_repair import repair_json

from ._nesting import MAX_NESTING, too_deep
from ._provenance import Provenance
from .errors import ToolArgumentsError

__all__ = ["canonical_arguments", "parse_tool_arguments"]

_FENCE_OPEN = re.compile(r"```[\w-]*[ \t]*\n?")
_EXCERPT = 200
_DECODER = json.JSONDecoder()

# An opening quote, and what to stop at inside the string it opens: an escape or a closer. Any quote but a
# double one only closes a string where a JSON token could follow it; elsewhere it is an apostrophe or a
# quotation inside the text ("it's", "say 'hi' twice"). Smart quotes are closed by their pair, and models
# that mix them up close “ with “ too.
_QUOTE = re.compile("[\"'“‘]")
_CLOSES = r"(?=\s*(?:[:,}\]]|\Z))"
_INSIDE = {
    '"': re.compile(r'[\\"]'),
    "'": re.compile(r"\\|'" + _CLOSES),
    "“": re.compile(r"\\|[”“]" + _CLOSES),
    "‘": re.compile(r"\\|[’‘]" + _CLOSES),
}
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# A lifted string is left as a placeholder of letters from a Cyrillic block no model writes (the text is
# read as written when it holds the opening one): the repairer decides what a torn string is from whether
# its characters are letters, and it reads an ASCII digit it finds in one as a number.
_MARK_OPEN, _MARK_CLOSE = "\ua680", "\ua682"
_DIGITS = "".join(chr(0xA641 + 2 * d) for d in range(10))
_TO_MARK = str.maketrans("0123456789", _DIGITS)
_FROM_MARK = str.maketrans(_DIGITS, "0123456789")
_MARK = re.compile(f"{_MARK_OPEN}([{_DIGITS}]+){_MARK_CLOSE}")
# What may follow, to the end of the text, the bracket that closes an unclosed string's object or list.
_CLOSING_TAIL = re.compile(r"[\s}\]]*(?:```\s*)?\Z")
_PAIRS = {"{": "}", "[": "]"}
_BRACKET = re.compile(r"[{}\[\]]")


def parse_tool_arguments(raw: str | Mapping[str, Any] | None, *, truncated: bool = False) -> dict[str, Any]:
    """The arguments of a tool call as an object.

    A mapping is returned as a dict; ``None``, ``""`` and whitespace give ``{}``; JSON held in a string is
    opened, also when it was encoded twice; almost-JSON (single or smart quotes, Python ``True``/``False``/
    ``None``, bare keys, trailing commas, comments, a code fence, a missing closing brace, unescaped or
    doubled quotes, a key missing a quote) is repaired without changing what is inside well-formed
    strings, and without a value the text does not hold: a repaired object's keys and leaves are all
    written in ``raw`` (strings as written or with their escapes read, numbers as numbers of their own,
    ``true``/``false``/``null`` in any letter case or as ``None``), else it is refused. Words around the object (``Here is your JSON: {...}``, a paragraph before a fenced object,
    a remark after it) are left out. Two objects run together (``{"a":1}{"b":2}``, seen when a server
    merges the fragments of two calls) give the first. Nesting deeper than 100 levels is refused
    before any of it is read.

    Args:
        raw: the arguments as the model or server sent them.
        truncated: the turn stopped before it was done, at its token ceiling or in a loop. Nothing is
            healed then: only text that already is a JSON object is accepted.

    Raises:
        ToolArgumentsError: the arguments are not an object. ``kind`` is ``"truncated"`` when ``truncated``
            was set and ``"malformed"`` otherwise; the message is written for the model.
    """
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        raise _error(repr(raw), truncated, f"they are a {_kind_of(raw)}, not an object")
    text = raw.strip()
    if not text:
        return {}
    found, why = _read(text, truncated, _Allowance(math.inf))
    if found is None:
        raise _error(raw, truncated, why)
    return found


def canonical_arguments(args: Mapping[str, Any]) -> str:
    """One spelling of an arguments object: sorted keys, compact, for dedupe and loop detection."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def read_arguments(raw: str, allowance: int) -> tuple[dict[str, Any] | None, int]:
    """``parse_tool_arguments`` for a caller with a budget: hands at most ``allowance`` characters to the
    repairer, and says how many it did.

    Returns:
        The arguments (``None`` when they are not an object, or cannot be had within the allowance), and
        the characters spent on repair.
    """
    text = raw.strip()
    if not text:
        return {}, 0
    allowance_left = _Allowance(allowance)
    found, _ = _read(text, False, allowance_left)
    return found, allowance_left.spent


def repair_value(text: str, allowance: int) -> tuple[Any, int]:
    """Any almost-JSON value, read the way arguments are (strings shielded from the repairer), within an
    allowance of characters handed to the repairer.

    Returns:
        The value (``None`` when there is none, or not within the allowance), and the characters spent.
    """
    allowance_left = _Allowance(allowance)
    if too_deep(text):
        return None, 0
    return _shielded(text, allowance_left), allowance_left.spent


def without_strings(text: str) -> str:
    """The text with every quoted string, as repair reads strings, replaced by ``""``: what a repair reads
    as structure, numbers and bare words. Linear in the text."""
    skeleton, _ = _lift_strings(text)
    return _MARK.sub("", skeleton)


class _Allowance:
    """How many more characters the repairer may read (it costs about a microsecond each)."""

    __slots__ = ("left", "spent")

    def __init__(self, left: float) -> None:
        self.left = left
        self.spent = 0

    def take(self, size: int) -> bool:
        if size > self.left:
            return False
        self.left -= size
        self.spent += size
        return True


_NOT_JSON: Any = object()
#: What one repair costs before it reads a character, counted in characters against an allowance: a reply
#: of ten thousand tiny unclosed calls must not buy ten thousand repairs.
REPAIR_OVERHEAD = 256


def _read(text: str, truncated: bool, allowance: _Allowance) -> tuple[dict[str, Any] | None, str]:
    """The object in a trimmed, non-empty text, or ``None`` and why not (for the model to read)."""
    if too_deep(text):
        return None, f"they nest deeper than {MAX_NESTING} levels"
    # The fast path: almost every call arrives as valid JSON, and this runs for every one of them.
    value = _strict(text)
    if value is not _NOT_JSON:
        found = _opened(value, truncated, allowance)
        return (
            (found, "") if found is not None else (None, f"they are a JSON {_kind_of(value)}, not an object")
        )
    if truncated:
        return None, "they are not complete JSON"
    found = _repaired(text, allowance)
    return (found, "") if found is not None else (None, "they are not a JSON object")


def _strict(text: str) -> Any:
    """The text read as strict JSON, or ``_NOT_JSON``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _opened(value: Any, truncated: bool, allowance: _Allowance) -> dict[str, Any] | None:
    """The object a parsed JSON value stands for, opening a string that holds one (double encoding)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        inner = value.strip()
        if too_deep(inner):
            return None
        decoded = _strict(inner)
        if decoded is _NOT_JSON:
            return None if truncated else _repaired(inner, allowance)
        return decoded if isinstance(decoded, dict) else None
    return None


def _repaired(text: str, allowance: _Allowance) -> dict[str, Any] | None:
    """Repair almost-JSON into an object, or ``None`` when there is no object to be had."""
    found = _object_text(text)
    if found is None:
        return None
    text = found
    if text.startswith("{"):
        # A whole object followed by words, or by a second object: the first object is the call. One
        # followed by a comma was closed too early, and the repairer merges what follows into it.
        try:
            value, end = _DECODER.raw_decode(text)
        except (ValueError, RecursionError):
            pass
        else:
            if isinstance(value, dict) and not text[end:].lstrip().startswith(","):
                return value
    value = _shielded(text, allowance)
    if isinstance(value, list) and text.startswith("{"):
        # Two objects run together: the first one is the call the model completed.
        value = next((item for item in value if isinstance(item, dict)), None)
    if isinstance(value, str):
        return _opened(value, True, allowance)
    return value if isinstance(value, dict) else None


def _shielded(text: str, allowance: _Allowance) -> Any:
    """Almost-JSON repaired with its strings lifted out of the repairer's reach, then put back.

    Where the repairer had to mend the structure, its reading of the text as written is weighed too: where
    a string itself is broken (an unescaped quote inside it, quotes doubled by a CSV export, a key missing
    its closing quote) the placeholders come back torn or the shielded reading loses keys, and mending
    strings is exactly what the repairer is built for. A tie goes to the shielded reading, which cannot
    have changed what a string holds. A reading that holds a key or leaf the text does not (see
    ``Provenance``) is never taken: ``None`` when neither is left.
    """
    if _MARK_OPEN in text:
        shielded = None  # the text could fake a placeholder: it is read only as written
    else:
        skeleton, strings = _lift_strings(text)
        value = _strict(skeleton)
        if value is not _NOT_JSON:
            return _restore(value, strings)  # nothing was repaired: every leaf is the text's own
        value = _repair(skeleton, allowance)
        shielded = _restore(value, strings) if _placeholders_intact(value) else None
    direct = _repair(text, allowance)
    source = Provenance(text)
    if shielded is not None and not source.holds(shielded):
        shielded = None
    if direct is not None and not source.holds(direct):
        direct = None
    if shielded is None or (isinstance(direct, dict) and _size(direct) > _size(shielded)):
        return direct
    return shielded


def _size(value: Any) -> int:
    """How much a repaired value holds: its keys and leaves (a reading that lost part of the text is smaller)."""
    if isinstance(value, dict):
        return sum(1 + _size(item) for item in value.values())
    if isinstance(value, list):
        return sum(_size(item) for item in value)
    return 1


def _repair(text: str, allowance: _Allowance) -> Any:
    """What the repairer makes of a text; ``None`` when it gave up (it recurses once per level) or the
    allowance does not cover it."""
    if not allowance.take(len(text) + REPAIR_OVERHEAD):
        return None
    try:
        return repair_json(text, return_objects=True, skip_json_loads=True)
    except Exception:
        # ValueError and RecursionError are its own ways to give up; it also trips its own assertions (a
        # key it reads as a fenced JSON block, '{"```json{"a": 1}```": 1}'). Whatever it raised, there is
        # no repair, and the caller says so in its own typed words.
        return None


def _object_text(text: str) -> str | None:
    """Where the object starts: the text itself, a fenced block's body, or the first brace after words.

    A list is no object, even one that holds objects, and neither is text without a brace.
    """
    if text.startswith(("{", '"', "'", "“", "‘")):
        return text
    fence = text.find("```")
    if fence != -1:
        body = _fence_body(text, fence)
        if body.startswith("{"):
            return body
    brace = text.find("{")
    if brace == -1 or text.find("[", 0, brace) != -1:
        return None  # no object, or a list that holds one
    return text[brace:]


def _fence_body(text: str, fence: int) -> str:
    """The body of the code fence opening at ``fence`` (to the end when it is never closed), trimmed."""
    opened = _FENCE_OPEN.match(text, fence)
    start = opened.end() if opened else fence + 3
    end = text.find("```", start)
    return (text[start:] if end == -1 else text[start:end]).strip()


def _placeholders_intact(value: Any) -> bool:
    """Whether every string in a repaired skeleton is plain text or exactly one placeholder."""
    if isinstance(value, str):
        return (_MARK_OPEN not in value and _MARK_CLOSE not in value) or _MARK.fullmatch(value) is not None
    if isinstance(value, list):
        return all(_placeholders_intact(item) for item in value)
    if isinstance(value, dict):
        return all(_placeholders_intact(k) and _placeholders_intact(v) for k, v in value.items())
    return True


def _lift_strings(text: str) -> tuple[str, list[str]]:
    """Take every quoted string out of the text, leaving a numbered placeholder string in its place.

    The repairer then sees only structure, so nothing inside a string can be changed by it. Each step
    jumps to the next character that matters, so this is linear in the text.

    Two strings are read as the repairer reads them, being broken where it can tell: one never closed
    that ends in the bracket closing its object or list (``{"a": "text }``, a code fence after it) ends
    before that bracket, and a key whose closing quote went to the next line loses the line break.
    """
    out: list[str] = []
    strings: list[str] = []
    open_brackets: list[str] = []
    i, n = 0, len(text)
    while i < n:
        opening = _QUOTE.search(text, i)
        if opening is None:
            out.append(text[i:])
            break
        _track(open_brackets, text, i, opening.start())
        out.append(text[i : opening.start()])
        content, i, closed = _read_string(text, opening.end(), _INSIDE[opening.group()])
        rest = ""
        if not closed and open_brackets:
            content, rest = _cut_closing_tail(content, _PAIRS[open_brackets[-1]])
        elif closed and text[i - 2] in "\r\n" and text[i : i + 64].lstrip().startswith(":"):
            content = content.rstrip()
        out.append(f'"{_MARK_OPEN}{str(len(strings)).translate(_TO_MARK)}{_MARK_CLOSE}"{rest}')
        strings.append(content)
    return "".join(out), strings


def _read_string(text: str, i: int, inside: re.Pattern[str]) -> tuple[str, int, bool]:
    """The string opening just before ``i``, its escapes read; where the text goes on; whether it closed."""
    chars: list[str] = []
    n = len(text)
    while i < n:
        stop = inside.search(text, i)
        if stop is None:
            break
        at = stop.start()
        chars.append(text[i:at])
        if text[at] != "\\":
            return "".join(chars), at + 1, True
        if at + 1 == n:
            chars.append("\\")
            return "".join(chars), n, False
        decoded, i = _escape(text, at)
        chars.append(decoded)
    chars.append(text[i:])
    return "".join(chars), n, False


def _track(open_brackets: list[str], text: str, start: int, end: int) -> None:
    """Follow the brackets opened and closed in ``text[start:end]``, text outside any string."""
    for found in _BRACKET.finditer(text, start, end):
        bracket = found.group()
        if bracket in _PAIRS:
            open_brackets.append(bracket)
        elif open_brackets and _PAIRS[open_brackets[-1]] == bracket:
            open_brackets.pop()


def _cut_closing_tail(content: str, closer: str) -> tuple[str, str]:
    """An unclosed string split where the bracket closing its object or list stands, when only brackets,
    space and a code fence follow it; else the string whole and nothing."""
    opener = "{" if closer == "}" else "["
    depth = 0
    for found in re.finditer(re.escape(opener) + "|" + re.escape(closer), content):
        depth += 1 if found.group() == opener else -1
        if depth < 0:
            if _CLOSING_TAIL.match(content, found.start()):
                return content[: found.start()].rstrip(), content[found.start() :]
            break
    return content, ""


def _restore(value: Any, strings: list[str]) -> Any:
    """Put the lifted strings back into a parsed value."""
    if isinstance(value, str):
        return _MARK.sub(lambda m: strings[int(m.group(1).translate(_FROM_MARK))], value)
    if isinstance(value, list):
        return [_restore(item, strings) for item in value]
    if isinstance(value, dict):
        return {_restore(k, strings): _restore(v, strings) for k, v in value.items()}
    return value


def _escape(text: str, i: int) -> tuple[str, int]:
    """The character a backslash escape at ``i`` stands for, and where the text goes on."""
    nxt = text[i + 1]
    if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2 : i + 4]):
        return chr(int(text[i + 2 : i + 4], 16)), i + 4
    if nxt == "U" and re.fullmatch(r"(?:000[0-9a-fA-F]|0010)[0-9a-fA-F]{4}", text[i + 2 : i + 10]):
        return chr(int(text[i + 2 : i + 10], 16)), i + 10  # past U+10FFFF it is no character: kept as written
    if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
        code = int(text[i + 2 : i + 6], 16)
        low = text[i + 6 : i + 12]
        if 0xD800 <= code < 0xDC00 and re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", low):
            return chr(0x10000 + ((code - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00)), i + 12
        return chr(code), i + 6
    if nxt in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[nxt], i + 2
    if nxt in "'‘’“”":
        return nxt, i + 2
    # Python keeps an unknown escape as a backslash and the character, and so do we.
    return "\\" + nxt, i + 2


def _kind_of(value: Any) -> str:
    kinds = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _error(raw: str, truncated: bool, what: str) -> ToolArgumentsError:
    excerpt = raw if len(raw) <= _EXCERPT else raw[:_EXCERPT] + "…"
    kind: Literal["truncated", "malformed"] = "truncated" if truncated else "malformed"
    if truncated:
        message = (
            "Your tool call was cut off before its arguments were complete: the reply reached its output "
            f"token limit, or repeated itself until it was stopped ({what}), so the tool did not run. Send "
            "the call again with shorter arguments, each value once; split long content across several calls."
        )
    else:
        message = (
            f"The arguments of your tool call could not be read: {what}. The tool did not run. Send the "
            'call again with the arguments as one JSON object, for example {"name": "value"}. '
            f"Received: {excerpt}"
        )
    return ToolArgumentsError(message, kind=kind, raw=raw)
