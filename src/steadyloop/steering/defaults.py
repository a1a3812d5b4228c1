"""The defaults a tool's schema names for its arguments, sans I/O.

A schema names an argument's default as ``"default": 5``, or only in its description: "Default is
'home'", "Defaults to miles", "the default value of 'null' represents today", "Default: 0". A small
model held to the schema copies such a default into its call; the call then means to the tool what it
means without the argument. Two readers need that: the choices nobody asked for (``unasked.py``) drop
it, and the check for a call made already (``decision.py``) sees ``list_dir({"path": "."})`` and
``list_dir({})`` as one call where ``"."`` is the default. Linear in a description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["at_default", "is_default", "named_defaults", "without_defaults"]

# A default a description names: "Default is 'home'", "defaults to miles", "default value of 'null'",
# "Default: 0", "Default 0". A quoted value is taken as it is (up to 80 characters, so a stray quote
# costs a bounded look ahead); a bare one is a single word or number, and with no "is", "to" or ":"
# before it, a number or a yes or no only ("a default filename will be used" names no value).
_DESCRIBED = re.compile(
    r"""\bdefaults?\b(?:\s+value)?(\s+(?:is|to|of|will\s+be)\b|\s*[:=])?\s*[:=]?\s*"""
    r"""(?:'([^'\n]{0,80})'|"([^"\n]{0,80})"|`([^`\n]{0,80})`|([\w+-]+(?:\.\w+)*))""",
    re.IGNORECASE,
)
# Bare words after "default" that begin a phrase rather than name a value ("Defaults to the current
# date", "Default is not use if not specified", "default value will be ...").
_NO_VALUE = frozenset(
    ("the", "a", "an", "not", "to", "be", "if", "value", "will", "is", "none", "no", "this", "it",
     "current", "use", "used", "empty", "all")
)  # fmt: skip


_YES_NO = frozenset(("true", "false"))


def named_defaults(spec: Mapping[str, Any]) -> list[Any]:
    """The defaults an argument's schema (``default``) and description ("Default is 'home'") name."""
    found: list[Any] = [spec["default"]] if "default" in spec else []
    description = spec.get("description")
    if isinstance(description, str):
        for match in _DESCRIBED.finditer(description):
            link, *quotes, bare = match.groups()
            quoted = next((q for q in quotes if q is not None), None)
            if quoted is not None:
                found.append(quoted)
            elif bare.lower() not in _NO_VALUE and (
                link or _number(bare) is not None or bare.lower() in _YES_NO
            ):
                found.append(bare)
    return found


def is_default(value: Any, default: Any) -> bool:
    """Whether ``value`` is ``default``, as a schema or a description writes it: ``True`` is "true",
    ``5`` is "5" or "5.0", "Home" is "home"; ``None`` is "null"."""
    if value is None or default is None:
        return str(value).lower() in ("none", "null") and str(default).lower() in ("none", "null")
    if isinstance(value, bool) or isinstance(default, bool):
        return str(value).lower() == str(default).lower()
    number, other = _number(value), _number(default)
    if number is not None and other is not None:
        return number == other
    if isinstance(value, str) and isinstance(default, str):
        return value.lower() == default.lower()
    return isinstance(value, list | dict) and bool(value == default)  # ["Personal Info"] as the schema has it


def _number(value: Any) -> float | None:
    if not isinstance(value, int | float | str) or (isinstance(value, str) and len(value) > 40):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):  # "miles"; an integer past a float's range
        return None


def at_default(name: str, value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` of argument ``name`` is optional in ``schema`` and a default its schema or its
    description names."""
    properties = schema.get("properties")
    spec = properties.get(name) if isinstance(properties, Mapping) else None
    required = schema.get("required")
    if not isinstance(spec, Mapping) or (isinstance(required, list) and name in required):
        return False
    return any(is_default(value, default) for default in named_defaults(spec))


def without_defaults(arguments: Any, schema: Mapping[str, Any]) -> Any:
    """``arguments`` without the optional ones at a default ``schema`` names (as they are if not an
    object)."""
    if not isinstance(arguments, Mapping):
        return arguments
    return {k: v for k, v in arguments.items() if not (isinstance(k, str) and at_default(k, v, schema))}
