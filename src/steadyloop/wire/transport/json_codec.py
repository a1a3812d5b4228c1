"""JSON in and out of the wire: orjson when it is installed (``steadyloop[fast]``), else the standard library.

A streamed turn decodes one JSON document per token, so the decoder is most of a stream's cost; orjson
takes about a fifth of the standard library's time. What orjson refuses as not strict JSON (``NaN``, a lone
surrogate) is read by the standard library instead, so no stream fails for having orjson installed; the
one difference left is that orjson reads an integer past 64 bits as a float (chat streams carry none: tool
arguments arrive as a string and are parsed elsewhere).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["FAST", "dumps", "loads", "loads_strict"]

_fast_loads: Callable[[bytes | str], Any] | None
_fast_dumps: Callable[[Any], bytes] | None
try:
    import orjson
except ImportError:  # pragma: no cover - which branch runs depends on the install
    _fast_loads = _fast_dumps = None
else:
    _fast_loads = orjson.loads
    _fast_dumps = orjson.dumps

#: Whether orjson is doing the work.
FAST = _fast_loads is not None

#: The fastest decoder at hand, with no second try: a hot loop calls it and falls back to ``loads`` only
#: when it raises ``ValueError``.
loads_strict: Callable[[bytes | str], Any] = _fast_loads if _fast_loads is not None else json.loads


def loads(data: bytes | str) -> Any:
    """Decode one JSON document; raises ``ValueError`` when it is not one (nested too deep included)."""
    if _fast_loads is not None:
        try:
            return _fast_loads(data)
        except ValueError:
            pass
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None


def dumps(value: Any) -> bytes:
    """Encode a request body as compact UTF-8 JSON; raises ``TypeError`` for what JSON cannot hold."""
    if _fast_dumps is not None:
        try:
            return _fast_dumps(value)
        except TypeError:
            pass  # e.g. an integer past 64 bits, which the standard library still writes
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
