"""What one argument's JSON Schema lists as its allowed values; sans I/O.

Several readings of a routed decision treat an argument with listed values differently from free text:
a currency code is not written into an ``enum`` of spellings the tool chose, and a list of listed choices
gets every one the request names. They read the listing here, one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["listed_values", "lists_choices"]


def listed_values(spec: Any) -> list[Any] | None:
    """The values argument ``spec`` allows: the ``enum`` of its items (an array of choices), else its own
    ``enum``; ``None`` when it lists none."""
    if not isinstance(spec, Mapping):
        return None
    items = spec.get("items")
    if isinstance(items, Mapping) and isinstance(items.get("enum"), list):
        return list(items["enum"])
    enum = spec.get("enum")
    return list(enum) if isinstance(enum, list) else None


def lists_choices(spec: Any) -> bool:
    """Whether argument ``spec`` is an array whose items are listed values."""
    items = spec.get("items") if isinstance(spec, Mapping) else None
    return isinstance(items, Mapping) and isinstance(items.get("enum"), list)
