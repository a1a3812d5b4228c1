"""Holding a final answer to a response schema: read it as JSON and check it (sans-I/O) (public).

A server that constrains its decoding to the schema answers in shape; one that cannot (or a model that
ignores the instruction) may not. The loop reads every final answer with ``read_structured`` and, when it
does not fit, sends the problem back for the model to fix, a bounded number of times
(``LoopPolicy.output_retries``). The problem is written for the model to read.

The check covers what structured answers use: ``type`` (one or several), ``enum``, ``const``,
``properties``, ``required``, ``additionalProperties: false``, ``items``, ``anyOf``/``oneOf`` (as "one of
these fits"), ``minItems``/``maxItems``, ``minLength``/``maxLength`` and ``minimum``/``maximum``.
Everything else is the server's to enforce.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .errors import InvalidInput

__all__ = ["OutputMismatch", "check_schema", "read_structured", "response_schema"]

_TYPES: Mapping[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}

_SHOWN = 80


class OutputMismatch(InvalidInput):
    """An answer is not the JSON the response schema asks for; the message says where, for the model."""


def response_schema(response_format: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The schema a ``response_format`` holds the answer to: ``{}`` for ``json_object`` (any JSON object),
    ``None`` when the format asks for no structure."""
    if not isinstance(response_format, Mapping):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "object"}
    if kind != "json_schema":
        return None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return schema if isinstance(schema, Mapping) else {}


def _is_kind(value: Any, kind: object) -> bool:
    if not isinstance(kind, str):
        return True  # a type we do not know is the server's to enforce
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(kind, object))


def check_schema(value: Any, schema: Mapping[str, Any], where: str = "$") -> None:
    """Check a parsed value against the parts of JSON Schema listed in the module docstring.

    Raises:
        OutputMismatch: the value breaks the schema; the message names the place (``$.items[2].name``).
    """
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds) if isinstance(kinds, list) else []
        if names and not any(_is_kind(value, k) for k in names):
            raise OutputMismatch(f"{where} should be {' or '.join(map(str, names))}")
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        raise OutputMismatch(f"{where} should be one of {json.dumps(schema['enum'])}")
    if "const" in schema and value != schema["const"]:
        raise OutputMismatch(f"{where} should be {json.dumps(schema['const'])}")
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        shapes = (
            [option for option in options if isinstance(option, Mapping)] if isinstance(options, list) else []
        )
        if shapes and not any(_fits(value, shape, where) for shape in shapes):
            raise OutputMismatch(f"{where} fits none of the allowed shapes")
    if isinstance(value, dict):
        _check_object(value, schema, where)
    elif isinstance(value, list):
        _check_array(value, schema, where)
    elif isinstance(value, str):
        _bounded(len(value), schema, "minLength", "maxLength", f"{where} length")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _bounded(value, schema, "minimum", "maximum", where)


def _fits(value: Any, schema: Mapping[str, Any], where: str) -> bool:
    try:
        check_schema(value, schema, where)
    except OutputMismatch:
        return False
    return True


def _check_object(value: dict[str, Any], schema: Mapping[str, Any], where: str) -> None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for key in required if isinstance(required, list) else ():
        if key not in value:
            raise OutputMismatch(f"{where} lacks the field {json.dumps(key)}")
    for key, item in value.items():
        sub = properties.get(key)
        if isinstance(sub, Mapping):
            check_schema(item, sub, f"{where}.{key}")
        elif key not in properties and schema.get("additionalProperties") is False:
            raise OutputMismatch(f"{where} has a field the schema does not allow: {json.dumps(key)}")


def _check_array(value: list[Any], schema: Mapping[str, Any], where: str) -> None:
    _bounded(len(value), schema, "minItems", "maxItems", f"{where} length")
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            check_schema(item, items, f"{where}[{index}]")


def _bounded(value: float, schema: Mapping[str, Any], low: str, high: str, what: str) -> None:
    floor, ceiling = _number(schema.get(low)), _number(schema.get(high))
    if floor is not None and value < floor:
        raise OutputMismatch(f"{what} should be at least {floor:g}")
    if ceiling is not None and value > ceiling:
        raise OutputMismatch(f"{what} should be at most {ceiling:g}")


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _unfenced(text: str) -> str:
    body = text.strip()
    if body.startswith("```"):  # a model that wraps its JSON in a code fence anyway
        body = body[3:]
        body = body.removeprefix("json").removeprefix("JSON")
        body = body.rstrip()
        body = body.removesuffix("```")
    return body.strip()


def read_structured(text: str, schema: Mapping[str, Any]) -> Any:
    """The answer as the value the schema asks for.

    Raises:
        OutputMismatch: it is not JSON, or does not fit; the message is written for the model to read.
    """
    body = _unfenced(text)
    try:
        value = json.loads(body)
    except RecursionError:
        raise OutputMismatch("the answer is JSON nested too deeply to read") from None
    except ValueError as exc:
        shown = body if len(body) <= _SHOWN else body[: _SHOWN - 1] + "…"
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise OutputMismatch(f"the answer is not valid JSON ({reason}): {shown!r}") from None
    try:
        check_schema(value, schema)
    except RecursionError:
        raise OutputMismatch("the answer is nested too deeply to check") from None
    return value
