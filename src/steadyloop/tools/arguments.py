"""Reading a tool call's arguments the way the model meant them.

Models, and the servers in front of them, do not always send arguments as clean JSON: local models write
Python-flavoured almost-JSON, some servers encode the object twice, a code fence sneaks in, and a turn cut
off at its token ceiling leaves half an object. ``parse_tool_arguments`` opens all of these into a ``dict``
and raises ``ToolArgumentsError`` (with a message the model can read) when no object can be had.

Structural repair is ``json_repair``'s job. Before handing text to it, every quoted string (``'...'``,
``"..."``, ``“...”``, ``‘...’``) is lifted out and replaced by a numbered placeholder, then put back into
the repaired value: the repairer guesses where a single-quoted string ends from the characters inside it
(it would cut ``'x,}'`` short) and mishandles some escapes, so it never gets to see what strings hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from json_repair import repair_json

from ..errors import ToolArgumentsError

__all__ = ["canonical_arguments", "parse_tool_arguments"]

_FENCE = re.compile(r"\A```[\w-]*[ \t]*\n?(?P<body>.*?)\n?[ \t]*```\Z", re.DOTALL)
_EXCERPT = 200

# Opening quote -> the closers that may end a string it opens. Smart quotes are closed by their pair, and
# models that mix them up close “ with “ too.
_CLOSERS = {'"': '"', "'": "'", "“": "”“", "‘": "’‘"}
# A quote only closes a string where a JSON token could follow it; elsewhere it is an apostrophe or a
# quotation inside the text ("it's", "say 'hi' twice").
_AFTER_CLOSE = frozenset(":,}]")
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
# Private-use characters bracket a lifted string's number: no model writes them, and the repairer leaves
# them alone.
_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_MARK = re.compile(f"{_MARK_OPEN}(\\d+){_MARK_CLOSE}")


def parse_tool_arguments(raw: str | Mapping[str, Any] | None, *, truncated: bool = False) -> dict[str, Any]:
    """The arguments of a tool call as an object.

    A mapping is returned as a dict; ``None``, ``""`` and whitespace give ``{}``; JSON held in a string is
    opened, also when it was encoded twice; almost-JSON (single or smart quotes, Python ``True``/``False``/
    ``None``, bare keys, trailing commas, comments, a code fence, a missing closing brace) is repaired
    without changing what is inside strings. Two objects run together (``{"a":1}{"b":2}``, seen when a
    server merges the fragments of two calls) give the first.

    Args:
        raw: the arguments as the model or server sent them.
        truncated: the turn stopped at its token ceiling. Nothing is healed then: only text that already is
            a JSON object is accepted.

    Raises:
        ToolArgumentsError: the arguments are not an object. ``kind`` is ``"truncated"`` when ``truncated``
            was set and ``"malformed"`` otherwise; the message is written for the model.
    """
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    text = raw.strip()
    if not text:
        return {}
    # The fast path: almost every call arrives as valid JSON, and this runs for every one of them.
    try:
        value = json.loads(text)
    except ValueError:
        pass
    else:
        found = _opened(value, heal=not truncated)
        if found is not None:
            return found
        raise _error(raw, truncated, f"they are a JSON {_kind_of(value)}, not an object")
    if truncated:
        raise _error(raw, True, "they are not complete JSON")
    found = _repaired(text)
    if found is None:
        raise _error(raw, False, "they are not a JSON object")
    return found


def canonical_arguments(args: Mapping[str, Any]) -> str:
    """One spelling of an arguments object: sorted keys, compact, for dedupe and loop detection."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _opened(value: Any, *, heal: bool) -> dict[str, Any] | None:
    """The object a parsed JSON value stands for, opening a string that holds one (double encoding)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        inner = value.strip()
        try:
            decoded = json.loads(inner)
        except ValueError:
            return _repaired(inner) if heal else None
        return decoded if isinstance(decoded, dict) else None
    return None


def _repaired(text: str) -> dict[str, Any] | None:
    """Repair almost-JSON into an object, or ``None`` when there is no object to be had."""
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body").strip()
    # Only something that starts as an object is repaired: the repairer would otherwise fish an object
    # out of prose, or accept a list.
    if not text.startswith(("{", '"', "'", "“", "‘")):
        return None
    skeleton, strings = _lift_strings(text)
    try:
        value: Any = json.loads(skeleton)
    except ValueError:
        value = repair_json(skeleton, return_objects=True, skip_json_loads=True)
    value = _restore(value, strings)
    if isinstance(value, list) and skeleton.startswith("{"):
        # Two objects run together: the first one is the call the model completed.
        value = next((item for item in value if isinstance(item, dict)), None)
    if isinstance(value, str):
        return _opened(value, heal=False)
    return value if isinstance(value, dict) else None


def _lift_strings(text: str) -> tuple[str, list[str]]:
    """Take every quoted string out of the text, leaving a numbered placeholder string in its place.

    The repairer then sees only structure, so nothing inside a string can be changed by it.
    """
    out: list[str] = []
    strings: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch not in _CLOSERS:
            out.append(ch)
            i += 1
            continue
        closers = _CLOSERS[ch]
        i += 1
        chars: list[str] = []
        while i < n:
            c = text[i]
            if c == "\\" and i + 1 < n:
                decoded, i = _escape(text, i)
                chars.append(decoded)
                continue
            if c in closers and (ch == '"' or _closes(text, i + 1)):
                i += 1
                break
            chars.append(c)
            i += 1
        out.append(f'"{_MARK_OPEN}{len(strings)}{_MARK_CLOSE}"')
        strings.append("".join(chars))
    return "".join(out), strings


def _restore(value: Any, strings: list[str]) -> Any:
    """Put the lifted strings back into a parsed value."""
    if isinstance(value, str):
        return _MARK.sub(lambda m: strings[int(m.group(1))], value)
    if isinstance(value, list):
        return [_restore(item, strings) for item in value]
    if isinstance(value, dict):
        return {_restore(k, strings): _restore(v, strings) for k, v in value.items()}
    return value


def _closes(text: str, after: int) -> bool:
    """Whether a quote ending just before ``after`` is followed by what may follow a JSON string."""
    rest = text[after:].lstrip()
    return not rest or rest[0] in _AFTER_CLOSE


def _escape(text: str, i: int) -> tuple[str, int]:
    """The character a backslash escape at ``i`` stands for, and where the text goes on."""
    nxt = text[i + 1]
    if nxt == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", text[i + 2 : i + 4]):
        return chr(int(text[i + 2 : i + 4], 16)), i + 4
    if nxt == "U" and re.fullmatch(r"[0-9a-fA-F]{8}", text[i + 2 : i + 10]):
        return chr(min(int(text[i + 2 : i + 10], 16), 0x10FFFF)), i + 10
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
            "Your tool call was cut off: the reply reached its output token limit before the arguments "
            f"were complete ({what}), so the tool did not run. Send the call again with shorter arguments; "
            "split long content across several calls."
        )
    else:
        message = (
            f"The arguments of your tool call could not be read: {what}. The tool did not run. Send the "
            'call again with the arguments as one JSON object, for example {"name": "value"}. '
            f"Received: {excerpt}"
        )
    return ToolArgumentsError(message, kind=kind, raw=raw)
