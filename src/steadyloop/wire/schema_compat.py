"""Tool schemas that strict validators and grammar-constrained servers accept.

MCP servers and pydantic emit JSON Schema that is valid but not portable: `$ref` into `$defs` with siblings
beside it, `anyOf` with a `null` branch, `title` and `default` everywhere, vendor keys, regexes in a dialect a
grammar builder cannot read. Servers that compile a tool's parameters into a grammar (llama.cpp, vLLM, SGLang,
LM Studio, Ollama) reject such a request outright, and OpenAI-style validators refuse unknown keywords.

- `sanitize_tools` keeps the meaning of every schema and drops only what a strict or grammar server cannot
  take. Every `$ref` is inlined (a recursive one is cut to a plain object after one level), so nothing can sit
  beside a surviving `$ref`; `default` is folded into the description; `title` goes; `format` stays only where
  it is one that the grammar builders and OpenAI both enforce; a `pattern` stays only in an anchored, portable
  form (`\\d` and `\\w` are spelled as classes); length and count bounds past a grammar builder's repetition
  limit go. Names outside `^[a-zA-Z0-9_-]{1,64}$` are rewritten (only those), so a caller dispatching by name
  must use the name it sent. The output is deterministic and `sanitize(sanitize(x)) == sanitize(x)`.
- `relax_tools` is for a server that still could not build a grammar: it also drops every value constraint,
  moves `enum`/`const` into the description, collapses unions to their types and marks the tool non-strict.
- `is_grammar_error` recognises the error text of a server that could not build that grammar.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from ._failure_patterns import GRAMMAR_RE

__all__ = ["is_grammar_error", "relax_schema", "relax_tools", "sanitize_schema", "sanitize_tools"]

JsonSchema = dict[str, Any]

# Copied, then checked; the subschema keywords (properties, items, anyOf, ...) are walked one by one, and
# every other keyword is dropped: strict validators reject keywords they do not know, and grammar builders
# ignore or choke on the rest (multipleOf, uniqueItems, patternProperties, not, ...).
_VALUE_KEYWORDS = frozenset(
    {
        "type", "description", "enum", "const", "required", "format", "pattern", "minLength", "maxLength",
        "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    }
)  # fmt: skip
# Formats both xgrammar (vLLM, SGLang) and OpenAI strict mode enforce; llama.cpp ignores the ones it lacks.
_KEPT_FORMATS = frozenset(
    {"date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# llama.cpp unrolls a bounded repetition and its grammar parser refuses counts of 2000 and more; several
# bounded fields add up, so stay well below.
_MAX_REPETITION = 1000
_LENGTH_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")
_NUMERIC_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_VALUE_CONSTRAINTS = ("pattern", "format", *_LENGTH_BOUNDS, *_NUMERIC_BOUNDS)
_SCHEMA_KEYS = ("parameters", "inputSchema", "input_schema")  # OpenAI, MCP, Anthropic spellings
_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INT64 = 2**63 - 1
_RELAX_ENUM_SHOWN = 50
_RECURSION_LEVELS = 2  # a recursive model is shown itself once inside itself, then a plain object


def sanitize_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Make tool definitions acceptable to strict validators and grammar-constrained servers.

    Args:
        tools: OpenAI-format tools (`{"type": "function", "function": {...}}`) or bare MCP-style ones
            (`name`, `description`, and `parameters`, `inputSchema` or `input_schema`).

    Returns:
        New OpenAI-format tools; the input is never modified.
    """
    return _convert_tools(tools, relax=False)


def relax_tools(tools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Loosen tool definitions for a server that could not build a grammar from them.

    Everything `sanitize_tools` does, and also: no pattern, format, length or numeric bounds; `enum` and
    `const` become a hint in the description; unions become the plain union of their types; `strict` is
    false, which also tells vLLM not to constrain the arguments at all.
    """
    return _convert_tools(tools, relax=True)


def sanitize_schema(schema: Mapping[str, Any] | None) -> JsonSchema:
    """Sanitize one parameters (or `response_format`) schema; the top level is always an object schema."""
    return _top_level(_Sanitizer(schema or {}).walk(schema or {}))


def relax_schema(schema: Mapping[str, Any] | None) -> JsonSchema:
    """Relax one parameters (or `response_format`) schema, as `relax_tools` does."""
    relaxed = _relax(sanitize_schema(schema))
    return _top_level(relaxed if isinstance(relaxed, dict) else {})


def _convert_tools(tools: Iterable[Mapping[str, Any]], *, relax: bool) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    taken: set[str] = set()
    for tool in tools:
        fn = tool.get("function")
        source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else tool
        schema = next((source[k] for k in _SCHEMA_KEYS if isinstance(source.get(k), Mapping)), None)
        function: dict[str, Any] = {"name": _unique_name(str(source.get("name") or ""), taken)}
        description = source.get("description")
        if isinstance(description, str) and description:
            function["description"] = description
        function["parameters"] = relax_schema(schema) if relax else sanitize_schema(schema)
        if relax:
            function["strict"] = False
        elif isinstance(source.get("strict"), bool):
            # The caller's contract with the server; keeping it is theirs to decide.
            function["strict"] = source["strict"]
        converted.append({"type": "function", "function": function})
    return converted


def _unique_name(name: str, taken: set[str]) -> str:
    if not _NAME_RE.match(name):
        name = re.sub(r"[^a-zA-Z0-9_-]+", "_", name).strip("_")[:64] or "tool"
    unique, n = name, 2
    while unique in taken:  # two names rewritten alike must still tell the tools apart
        suffix = f"_{n}"
        unique, n = name[: 64 - len(suffix)] + suffix, n + 1
    taken.add(unique)
    return unique


def _top_level(schema: Any) -> JsonSchema:
    """OpenAI and the grammar builders want an object with `properties` at the top, even with no arguments."""
    out: JsonSchema = dict(schema) if isinstance(schema, dict) else {}
    for key in ("anyOf", "oneOf"):
        branches = out.get(key)
        if isinstance(branches, list) and all(
            isinstance(b, dict) and b.get("type") == "object" for b in branches
        ):
            del out[key]
            out.update(
                {k: v for k, v in _merge_objects(branches).items() if k not in out or k == "properties"}
            )
    if "anyOf" in out or "oneOf" in out or out.get("type") not in (None, "object"):
        # A top level that is not an object cannot be a set of named arguments; keep only what it says.
        out = {k: v for k, v in out.items() if k == "description"}
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


class _Sanitizer:
    """Walks one schema, resolving `$ref` against its root."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root

    def walk(self, node: Any, expanding: tuple[str, ...] = ()) -> Any:
        if node is True or (isinstance(node, Mapping) and not node):
            return {}
        if not isinstance(node, Mapping):
            return node if node is False else {}
        if isinstance(node.get("$ref"), str):
            return self._inline_ref(node, expanding)
        out: JsonSchema = {k: v for k, v in node.items() if k in _VALUE_KEYWORDS}
        if isinstance(node.get("properties"), Mapping):
            out["properties"] = {str(k): self.walk(v, expanding) for k, v in node["properties"].items()}
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping | bool):
                out[key] = self.walk(node[key], expanding) if isinstance(node[key], Mapping) else node[key]
        tuple_items = node["items"] if isinstance(node.get("items"), list) else node.get("prefixItems")
        if isinstance(tuple_items, list):
            out["prefixItems"] = [self.walk(v, expanding) for v in tuple_items]
            if isinstance(node.get("items"), list):  # draft-07 tuple, in 2020-12 spelling
                rest = node.get("additionalItems", True)
                out["items"] = self.walk(rest, expanding) if isinstance(rest, Mapping) else rest is not False
                if out["items"] is True:
                    del out["items"]
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(node.get(key), list) and node[key]:
                # oneOf is read as anyOf, as every grammar builder does; strict validators take only anyOf.
                union = "anyOf" if key == "oneOf" and "anyOf" not in node else key
                out[union] = [self.walk(v, expanding) for v in node[key]]
        if _worth_noting(node.get("default")):
            out["description"] = _with_note(out.get("description"), f"Default: {_dump(node['default'])}.")
        return _tidy(out, nullable=node.get("nullable") is True)

    def _inline_ref(self, node: Mapping[str, Any], expanding: tuple[str, ...]) -> Any:
        ref: str = node["$ref"]
        target = self._resolve(ref)
        if expanding.count(ref) >= _RECURSION_LEVELS or target is None:
            # Recursion is cut once the model has been shown a level of it, and an unresolvable ref says
            # nothing: both become permissive.
            looks_object = isinstance(target, Mapping) and (
                target.get("type") == "object" or "properties" in target
            )
            inlined: Any = {"type": "object"} if looks_object else {}
            if isinstance(target, Mapping) and isinstance(target.get("description"), str):
                inlined["description"] = target["description"]
        else:
            inlined = self.walk(target, (*expanding, ref))
        if not isinstance(inlined, dict):
            return inlined
        # Siblings of a $ref are annotations (pydantic puts description and default there); merge those and
        # drop the rest, so the inlined schema is all that stands where the ref was.
        result = dict(inlined)
        if isinstance(node.get("description"), str) and node["description"].strip():
            result["description"] = node["description"]
        if _worth_noting(node.get("default")):
            result["description"] = _with_note(
                result.get("description"), f"Default: {_dump(node['default'])}."
            )
        return _tidy(result, nullable=True) if node.get("nullable") is True else result

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None  # remote refs are never fetched: a request must not depend on the network
        target: Any = self._root
        for raw in filter(None, ref[1:].split("/")):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isascii() and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return None
        return target


def _tidy(schema: JsonSchema, *, nullable: bool = False) -> Any:
    """Normalise one already-walked schema node."""
    out = dict(schema)
    _clean_type(out)
    if "allOf" in out:
        out = _merge_all_of(out)
    for key in ("anyOf", "oneOf"):
        if key in out:
            collapsed = _collapse_union(out, key)
            if not isinstance(collapsed, dict) or key not in collapsed:
                return _tidy(collapsed, nullable=nullable) if isinstance(collapsed, dict) else collapsed
            out = collapsed
    types = out.get("type")
    if isinstance(types, list) and "null" in types and len(types) == 2:
        out["type"] = next(t for t in types if t != "null")
        nullable = True
    is_union = any(k in out for k in ("anyOf", "oneOf", "allOf"))
    if ("properties" in out or "additionalProperties" in out) and not is_union:
        out.setdefault("type", "object")
    if out.get("type") not in (None, "object") and not isinstance(out.get("type"), list):
        for key in ("properties", "required", "additionalProperties"):
            out.pop(key, None)
    _clean_object(out)
    _clean_values(out)
    if nullable and out.get("type") != "null":
        return _nullable(out)
    return out


def _clean_type(out: JsonSchema) -> None:
    types = out.get("type")
    if isinstance(types, list):
        unique = list(dict.fromkeys(t for t in types if isinstance(t, str)))
        if unique:
            out["type"] = unique[0] if len(unique) == 1 else unique
        else:
            del out["type"]
    elif types is not None and not isinstance(types, str):
        del out["type"]


def _clean_object(out: JsonSchema) -> None:
    properties = out.get("properties")
    required = out.pop("required", None)
    if isinstance(required, list) and isinstance(properties, dict):
        kept = list(dict.fromkeys(r for r in required if isinstance(r, str) and r in properties))
        if kept:
            out["required"] = kept
    extra = out.get("additionalProperties")
    if extra == {}:
        out["additionalProperties"] = True  # llama.cpp reads an empty schema as "an object", not "anything"


def _clean_values(out: JsonSchema) -> None:
    kind = out.get("type")
    if "enum" in out:
        values = out["enum"]
        if isinstance(values, list) and values:
            out["enum"] = _dedupe(values)
        else:
            del out["enum"]  # an empty enum is unsatisfiable, and a grammar built from it is empty
    fmt, pattern = out.pop("format", None), out.pop("pattern", None)
    if isinstance(fmt, str) and fmt in _KEPT_FORMATS and kind in (None, "string"):
        out["format"] = fmt
    if isinstance(pattern, str) and kind in (None, "string") and (portable := _portable_pattern(pattern)):
        out["pattern"] = portable
    for key in _LENGTH_BOUNDS:
        value = out.get(key)
        if key in out and not (_is_int(value) and 0 <= value <= _MAX_REPETITION):
            del out[key]
    if "pattern" in out or "format" in out:
        # xgrammar compiles the pattern and silently drops the lengths; vLLM refuses the pair outright.
        out.pop("minLength", None)
        out.pop("maxLength", None)
    _clean_numeric_bounds(out, kind)


def _clean_numeric_bounds(out: JsonSchema, kind: Any) -> None:
    for key in ("exclusiveMinimum", "exclusiveMaximum"):
        if isinstance(out.get(key), bool):  # draft-04 spelling: a flag on minimum/maximum
            plain = "minimum" if key == "exclusiveMinimum" else "maximum"
            if out.pop(key) and plain in out:
                out[key] = out.pop(plain)
    for key in _NUMERIC_BOUNDS:
        value = out.get(key)
        if key not in out:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            del out[key]
        elif kind == "integer":
            # llama.cpp reads integer bounds as int64: a fractional one would be truncated the wrong way.
            bound = math.ceil(value) if key in ("minimum", "exclusiveMinimum") else math.floor(value)
            if abs(bound) > _INT64:
                del out[key]
            else:
                out[key] = bound


def _collapse_union(out: JsonSchema, key: str) -> Any:
    branches: list[Any] = []
    for branch in out[key]:
        inner = branch.get(key) if isinstance(branch, dict) else None
        if isinstance(inner, list) and set(branch) <= {key, "description"}:
            branches.extend(inner)  # a nested union of the same kind is the same union
        else:
            branches.append(branch)
    branches = _dedupe(branches)
    rest = {k: v for k, v in out.items() if k != key}
    if any(b == {} for b in branches):
        return {k: v for k, v in rest.items() if k == "description"}  # one permissive branch: anything goes
    if len(branches) == 1 and isinstance(branches[0], dict):
        merged = dict(branches[0])
        for k, v in rest.items():
            if k == "description" or k not in merged:
                merged[k] = v
        return merged
    null = [b for b in branches if b == {"type": "null"}]
    return {**rest, key: [b for b in branches if b not in null] + null}  # null last, as generators write it


def _merge_all_of(out: JsonSchema) -> JsonSchema:
    parts = out["allOf"]
    rest = {k: v for k, v in out.items() if k != "allOf"}
    if len(parts) == 1 and isinstance(parts[0], dict):
        return {**parts[0], **{k: v for k, v in rest.items() if k == "description" or k not in parts[0]}}
    plain = {"type", "properties", "required", "description"}
    if not all(
        isinstance(p, dict) and set(p) <= plain and p.get("type", "object") == "object" for p in parts
    ):
        return out  # kept as it is: only object parts can be merged without changing the meaning
    properties: JsonSchema = {}
    required: list[str] = []
    for part in parts:
        properties.update(part.get("properties", {}))
        required.extend(part.get("required", []))
    merged: JsonSchema = {"type": "object", "properties": properties, "required": required}
    return {**merged, **{k: v for k, v in rest.items() if k not in ("type", "required")}}


def _merge_objects(branches: Sequence[JsonSchema]) -> JsonSchema:
    """One object that any of the branches' instances fits: the union of properties, no required ones."""
    properties: JsonSchema = {}
    for branch in branches:
        for name, prop in branch.get("properties", {}).items():
            properties.setdefault(name, prop)
    return {"type": "object", "properties": properties}


def _nullable(schema: JsonSchema) -> JsonSchema:
    annotations = {k: v for k, v in schema.items() if k == "description"}
    body = {k: v for k, v in schema.items() if k != "description"}
    if not body:
        return schema  # already permissive
    return {**annotations, "anyOf": [body, {"type": "null"}]}


def _portable_pattern(pattern: str) -> str | None:
    r"""The pattern in the subset every grammar builder reads, or None when it has no such form.

    llama.cpp wants `^...$` and passes escapes it does not know into its grammar, which then fails to parse;
    JSON Schema regexes are ECMA-262, where `\d` and `\w` are exactly the ASCII classes written out here.
    """
    if (
        len(pattern) < 2
        or not pattern.startswith("^")
        or not pattern.endswith("$")
        or pattern.endswith("\\$")
    ):
        return None
    try:
        re.compile(pattern)
    except re.error:
        return None
    classes = {"d": "0-9", "w": "A-Za-z0-9_"}
    out: list[str] = []
    in_class = False
    depth = i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            nxt = pattern[i + 1]
            if nxt in classes:
                out.append(classes[nxt] if in_class else f"[{classes[nxt]}]")
            elif nxt in "DW" and not in_class:
                out.append(f"[^{classes[nxt.lower()]}]")
            elif nxt in "\\[]tnr":
                out.append(char + nxt)
            elif nxt in "/\"'" or (nxt == "-" and not in_class):
                out.append(nxt)  # needless escapes that llama.cpp would copy into its grammar verbatim
            elif nxt in ".$*+?(){}|" or (nxt == "^" and not in_class):
                out.append(nxt if in_class else char + nxt)
            else:
                return None  # \s, \b, \p{..}, backreferences, \- or \^ in a class, ...
            i += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif char == "(" and not in_class:
            if pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
                return None  # lookaround, named groups and inline flags have no grammar form
            depth += 1
        elif char == ")" and not in_class:
            depth -= 1
        elif char == "|" and not in_class and depth == 0:
            return None  # `^a|b$` anchors each side alone; llama.cpp would anchor the whole
        elif char == "{" and not in_class:
            bounds = re.match(r"\{(\d+)(?:,(\d*))?\}", pattern[i:])
            if bounds and any(int(b) > _MAX_REPETITION for b in bounds.groups() if b):
                return None
        out.append(char)
        i += 1
    return "".join(out)


def _relax(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    out: JsonSchema = {k: v for k, v in node.items() if k not in _VALUE_CONSTRAINTS}
    allowed = out.pop("enum", None)
    if "const" in out:
        allowed = [out.pop("const")]
    if isinstance(allowed, list):
        shown = ", ".join(_dump(v) for v in allowed[:_RELAX_ENUM_SHOWN])
        more = ", ..." if len(allowed) > _RELAX_ENUM_SHOWN else ""
        out["description"] = _with_note(out.get("description"), f"One of: {shown}{more}.")
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _relax(v) for k, v in out["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _relax(out[key])
    if isinstance(out.get("prefixItems"), list):
        out["prefixItems"] = [_relax(v) for v in out["prefixItems"]]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out = _permissive_union(out, key, [_relax(b) for b in out[key]])
    return out


def _permissive_union(out: JsonSchema, key: str, branches: list[Any]) -> JsonSchema:
    """The loosest single schema that still says which JSON types may appear."""
    rest = {k: v for k, v in out.items() if k not in (key, "type")}
    note = {k: v for k, v in rest.items() if k == "description"}
    if not all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in branches):
        return note
    types = list(dict.fromkeys(b["type"] for b in branches))
    merged: JsonSchema = {**note, "type": types[0] if len(types) == 1 else types}
    objects = [b for b in branches if b["type"] == "object"]
    if objects:
        merged["properties"] = _merge_objects(objects)["properties"]
    arrays = [b.get("items") for b in branches if b["type"] == "array"]
    if arrays and all(a == arrays[0] for a in arrays) and arrays[0] is not None:
        merged["items"] = arrays[0]
    return merged


def _with_note(description: Any, note: str) -> str:
    text = description.strip() if isinstance(description, str) else ""
    return note if not text else text if note in text else f"{text} {note}"


def _worth_noting(default: Any) -> bool:
    """An empty default tells the model nothing that leaving the argument out does not."""
    return default not in (None, "", [], {})


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _dedupe(values: Iterable[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for value in values:
        seen.setdefault(_dump(value), value)
    return list(seen.values())


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_grammar_error(text_or_body: str | bytes | Mapping[str, Any] | None) -> bool:
    """Whether an error response says the server could not build a grammar from a schema.

    Args:
        text_or_body: The error text, raw body, or parsed JSON body of the failed request.
    """
    if text_or_body is None:
        return False
    if isinstance(text_or_body, bytes):
        text = text_or_body.decode("utf-8", "replace")
    elif isinstance(text_or_body, Mapping):
        text = json.dumps(text_or_body, ensure_ascii=False, default=str)
    else:
        text = str(text_or_body)
    return GRAMMAR_RE.search(text) is not None
