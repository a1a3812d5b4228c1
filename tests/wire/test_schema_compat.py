"""Schema compat: sanitize_tools, relax_tools, is_grammar_error.

Real schemas live in tests/data/mcp_schemas/, one file per server, each naming where it was captured:
tools/list answers of the reference MCP servers (PyPI mcp-server-fetch, -git, -time; npm
@modelcontextprotocol/server-filesystem, -memory, -everything, -github, -sequential-thinking) and the tool
snapshots github/github-mcp-server keeps in its repository. Pydantic-shaped ones (nested models, Optional,
Enum, Literal, recursion, constrained fields) are produced here by the MCP SDK's own server.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for
from mcp.server import MCPServer
from pydantic import BaseModel, Field

from steadyloop.wire.schema_compat import (
    is_grammar_error,
    relax_schema,
    relax_tools,
    sanitize_schema,
    sanitize_tools,
)

DATA = Path(__file__).parent.parent / "data" / "mcp_schemas"


def _real_tools() -> list[tuple[str, dict[str, Any]]]:
    tools = []
    for path in sorted(DATA.glob("*.json")):
        document = json.loads(path.read_text())
        assert document["source"], path
        tools += [(f"{path.stem}/{tool['name']}", tool) for tool in document["tools"]]
    return tools


# Pydantic shapes, produced by the MCP SDK's server exactly as it would list them.
class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")
    zip_code: Annotated[str, Field(pattern=r"^\d{5}(-\d{4})?$")] | None = None


class Person(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    address: Address | None = None
    friends: list[Person] = []
    tags: dict[str, str] = {}


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: Annotated[int, Field(ge=0, le=9)] = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


_sdk = MCPServer("schema-compat-tests")


@_sdk.tool()
def add_person(person: Person, priority: Priority = Priority.LOW, note: str | None = None) -> str:
    """Add a person."""
    return person.name


@_sdk.tool()
def adopt(pet: Annotated[Cat | Dog, Field(discriminator="kind")], when: datetime | None = None) -> str:
    """Adopt a pet."""
    return "ok"


@_sdk.tool()
def tag(ids: list[uuid.UUID], mode: Literal["add", "remove"] = "add", home: Path | None = None) -> str:
    """Tag things."""
    return "ok"


@_sdk.tool()
def ping() -> str:
    """No arguments at all."""
    return "pong"


def _sdk_tools() -> list[tuple[str, dict[str, Any]]]:
    listed = asyncio.run(_sdk.list_tools())
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]
    return [(f"sdk/{t['name']}", t) for t in dumped]


REAL = _real_tools()
SDK = _sdk_tools()
ALL = REAL + SDK + [("pydantic/Person", {"name": "person", "inputSchema": Person.model_json_schema()})]


def test_the_corpus_is_large_and_varied() -> None:
    assert len(REAL) >= 25
    text = json.dumps([tool for _, tool in ALL])
    for feature in ("$ref", "$defs", "anyOf", "oneOf", "default", "format", "pattern", "$schema"):
        assert f'"{feature}"' in text, feature


def _nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every subschema, never descending into a properties map as if it were a schema."""
    if isinstance(schema, dict):
        yield schema
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    yield from _nodes(sub)
            elif isinstance(value, dict):
                yield from _nodes(value)
            elif isinstance(value, list):
                for item in value:
                    yield from _nodes(item)


_NEVER_LEFT = {"$ref", "$defs", "definitions", "$schema", "$id", "title", "default", "nullable"}
_RELAXED_AWAY = {"pattern", "format", "enum", "const", "minimum", "maxLength", "anyOf", "oneOf"}
# What llama.cpp's GBNF parser knows after a backslash; anything else fails the whole grammar.
_GBNF_ESCAPES = re.compile(r"\\[^\\\[\]tnrx.^$*+?(){}|]")


def _assert_portable(parameters: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object" and isinstance(parameters["properties"], dict)
    for node in _nodes(parameters):
        assert not _NEVER_LEFT & set(node)
        assert not [k for k in node if k.startswith("x-")]
        if "required" in node:
            assert set(node["required"]) <= set(node["properties"])
        if "pattern" in node:
            assert node["pattern"].startswith("^") and node["pattern"].endswith("$")
            assert not _GBNF_ESCAPES.search(node["pattern"]), node["pattern"]
        for bound in ("minLength", "maxLength", "minItems", "maxItems"):
            assert node.get(bound, 0) <= 1000


@pytest.mark.parametrize(("label", "tool"), ALL, ids=[label for label, _ in ALL])
def test_every_real_schema_comes_out_portable_stable_and_untouched(label: str, tool: dict[str, Any]) -> None:
    before = copy.deepcopy(tool)
    first = sanitize_tools([tool])
    second = sanitize_tools([tool])
    assert tool == before  # never mutated
    assert json.dumps(first) == json.dumps(second)  # byte-identical: prompt caches key on it
    assert sanitize_tools(first) == first  # idempotent
    [converted] = first
    assert converted["type"] == "function" and converted["function"]["name"] == tool["name"]
    _assert_portable(converted["function"]["parameters"])

    relaxed = relax_tools([tool])
    assert relax_tools(relaxed) == relaxed
    assert relaxed[0]["function"]["strict"] is False
    Draft202012Validator.check_schema(relaxed[0]["function"]["parameters"])
    for node in _nodes(relaxed[0]["function"]["parameters"]):
        assert not _RELAXED_AWAY & set(node)


def _example(schema: Any, root: dict[str, Any], *, full: bool, depth: int = 0) -> Any:
    """A plain instance of a schema: the minimal one, or one with every property filled in."""
    if not isinstance(schema, dict) or depth > 6:
        return None
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _example(target, root, full=full, depth=depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][-1 if full else 0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _example(schema[key][0], root, full=full, depth=depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        names = list(schema.get("properties", {})) if full else schema.get("required", [])
        props = schema.get("properties", {})
        return {n: _example(props.get(n, {}), root, full=full, depth=depth + 1) for n in names}
    if kind == "array":
        return [_example(schema.get("items", {}), root, full=full, depth=depth + 1)] if full else []
    samples = {"integer": 1, "number": 1.5, "boolean": True, "null": None}
    return samples.get(kind, "x" if schema.get("minLength", 0) <= 1 else "x" * schema["minLength"])


@pytest.mark.parametrize(("label", "tool"), ALL, ids=[label for label, _ in ALL])
def test_what_the_original_accepts_the_sanitized_and_relaxed_accept(label: str, tool: dict[str, Any]) -> None:
    original = tool["inputSchema"]
    checker = validator_for(original, default=Draft202012Validator)(original)
    sanitized = Draft202012Validator(sanitize_schema(original))
    relaxed = Draft202012Validator(relax_schema(original))
    checked = 0
    for full in (False, True):
        instance = _example(original, original, full=full)
        if checker.is_valid(instance):
            checked += 1
            assert sanitized.is_valid(instance), list(sanitized.iter_errors(instance))
            assert relaxed.is_valid(instance), list(relaxed.iter_errors(instance))
    assert checked, "no hand-made instance fits this schema; the property would be vacuous"


# Property: for schemas simple enough to generate from, anything the original accepts still passes.
def _strategy(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([_strategy(branch) for branch in schema["anyOf"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_strategy({**schema, "type": k}) for k in kind])
    if kind == "string":
        if "pattern" in schema:
            # JSON Schema regexes are ECMA-262, where \d and \w are ASCII; Python's re would say otherwise.
            return st.from_regex(schema["pattern"], fullmatch=True, alphabet=st.characters(max_codepoint=127))
        return st.text(max_size=8)
    if kind == "integer":
        # Around the bounds used here; assume() keeps the valid ones.
        return st.integers(min_value=-3, max_value=12)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(_strategy(schema.get("items", {"type": "string"})), max_size=3)
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {k: _strategy(props.get(k, {"type": "string"})) for k in required},
        optional={k: _strategy(v) for k, v in props.items() if k not in required},
    )


SIMPLE = [
    {
        "type": "object",
        "properties": {
            "zip": {"type": "string", "pattern": r"^\d{5}(-\d{4})?$"},
            "slug": {"type": "string", "pattern": r"^[\w\-]+$"},
            "word": {"type": "string", "pattern": r"^\w+\/\D$"},
            "n": {"type": ["integer", "null"], "minimum": 0.5, "maximum": 7.5},
            "mode": {"enum": ["a", "b"], "default": "a", "title": "Mode"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}], "default": None},
        },
        "required": ["zip", "ghost"],
    },
    Address.model_json_schema(),
    Cat.model_json_schema(),
]


@pytest.mark.parametrize("schema", SIMPLE)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_generated_instances_keep_validating(schema: dict[str, Any], data: st.DataObject) -> None:
    instance = data.draw(_strategy(_inline(schema)))
    assume(Draft202012Validator(schema).is_valid(instance))
    assert Draft202012Validator(sanitize_schema(schema)).is_valid(instance)
    assert Draft202012Validator(relax_schema(schema)).is_valid(instance)


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """Only for the strategy: the simple schemas above have no refs left after this."""
    text = json.dumps(schema)
    for name, target in schema.get("$defs", {}).items():
        text = text.replace(json.dumps({"$ref": f"#/$defs/{name}"}), json.dumps(target))
    inlined: dict[str, Any] = json.loads(text)
    return inlined


# --- the shapes that break servers, one by one -------------------------------------------------------


def test_optional_model_leaves_nothing_beside_the_inlined_ref() -> None:
    [tool] = sanitize_tools([dict(SDK)["sdk/add_person"]])
    address = tool["function"]["parameters"]["properties"]["person"]["properties"]["address"]
    assert set(address) == {"anyOf"}
    inlined, null = address["anyOf"]
    assert null == {"type": "null"}
    assert inlined["type"] == "object" and inlined["required"] == ["street", "city"]


def test_every_sibling_of_a_ref_goes_including_openapi_nullable() -> None:
    schema = {
        "$defs": {"Filter": {"type": "object", "properties": {"q": {"type": "string"}}, "title": "Filter"}},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Filter", "nullable": True, "default": None, "title": "A"},
            "b": {"$ref": "#/$defs/Filter", "description": "Narrower", "x-order": 2, "minLength": 3},
        },
    }
    props = sanitize_schema(schema)["properties"]
    assert props["a"] == {
        "anyOf": [{"type": "object", "properties": {"q": {"type": "string"}}}, {"type": "null"}]
    }
    assert props["b"] == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "description": "Narrower",
    }


def test_a_default_beside_a_ref_becomes_part_of_the_description() -> None:
    [tool] = sanitize_tools([dict(SDK)["sdk/add_person"]])
    priority = tool["function"]["parameters"]["properties"]["priority"]
    assert priority == {"enum": ["low", "high"], "type": "string", "description": 'Default: "low".'}


def test_a_discriminated_union_is_read_as_any_of() -> None:
    [tool] = sanitize_tools([dict(SDK)["sdk/adopt"]])
    pet = tool["function"]["parameters"]["properties"]["pet"]
    assert set(pet) == {"anyOf"}
    assert [branch["properties"]["kind"]["const"] for branch in pet["anyOf"]] == ["cat", "dog"]


def test_recursion_is_cut_to_a_plain_object_after_one_level() -> None:
    params = sanitize_schema(Person.model_json_schema())
    friend = params["properties"]["friends"]["items"]
    assert friend["type"] == "object"
    assert friend["properties"]["friends"]["items"] == {"type": "object"}


def test_draft07_definitions_json_pointer_escapes_and_unresolvable_refs() -> None:
    schema = {
        "definitions": {"a/b": {"type": "integer"}},
        "properties": {
            "x": {"$ref": "#/definitions/a~1b"},
            "y": {"$ref": "https://example.com/schema.json", "description": "elsewhere"},
            "z": {"$ref": "#/definitions/missing"},
        },
    }
    props = sanitize_schema(schema)["properties"]
    assert props == {"x": {"type": "integer"}, "y": {"description": "elsewhere"}, "z": {}}


def test_a_whole_parameters_schema_behind_a_ref() -> None:
    schema = {
        "$defs": {"args": {"type": "object", "properties": {"q": {"type": "string"}}}},
        "$ref": "#/$defs/args",
    }
    assert sanitize_schema(schema) == {"type": "object", "properties": {"q": {"type": "string"}}}


@pytest.mark.parametrize("parameters", [None, {}, {"type": "object"}, {"type": "object", "required": ["x"]}])
def test_a_parameterless_tool_gets_an_empty_object(parameters: dict[str, Any] | None) -> None:
    tool: dict[str, Any] = {"type": "function", "function": {"name": "now"}}
    if parameters is not None:
        tool["function"]["parameters"] = parameters
    assert sanitize_tools([tool])[0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_nested_free_form_objects_stay_free_form() -> None:
    # Adding properties: {} here would make llama.cpp accept only the empty object.
    schema = {
        "type": "object",
        "properties": {"headers": {"type": "object"}, "meta": {"additionalProperties": {}}},
    }
    props = sanitize_schema(schema)["properties"]
    assert props == {"headers": {"type": "object"}, "meta": {"additionalProperties": True, "type": "object"}}


@pytest.mark.parametrize(
    ("pattern", "portable"),
    [
        (r"^\d{4}-\d{2}-\d{2}$", "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
        (r"^[\w.\-]+$", None),  # \- inside a class has no GBNF spelling
        (r"^[\w.-]+$", "^[A-Za-z0-9_.-]+$"),
        (r"^[a-z]+\/\D\.$", r"^[a-z]+/[^0-9]\.$"),
        (r"^[\.\d]+$", "^[.0-9]+$"),
        ("^(?:ab|cd)+$", "^(?:ab|cd)+$"),
        ("[a-z]+", None),  # unanchored: llama.cpp refuses it outright
        ("^[a-z]+", None),
        ("^a|b$", None),  # each side anchored alone
        ("^(?=.*[A-Z]).+$", None),  # lookahead
        (r"^(?P<y>\d+)$", None),
        (r"^\s+$", None),  # ECMA \s is wider than any class a grammar writes
        (r"^\bword\b$", None),
        ("^x{1,5000}$", None),  # past the grammar parser's repetition limit
        ("^[unclosed$", None),
        (r"^\p{L}+$", None),
    ],
)
def test_patterns_are_kept_only_in_a_form_grammar_builders_read(pattern: str, portable: str | None) -> None:
    schema = {"properties": {"p": {"type": "string", "pattern": pattern}}}
    assert sanitize_schema(schema)["properties"]["p"].get("pattern") == portable


@pytest.mark.parametrize(
    ("fmt", "kept"),
    [("date-time", True), ("uuid", True), ("email", True), ("uri", False), ("path", False), ("int64", False)],
)
def test_only_formats_every_strict_server_enforces_are_kept(fmt: str, kept: bool) -> None:
    schema = {
        "properties": {"p": {"type": "string", "format": fmt}, "n": {"type": "integer", "format": "int32"}}
    }
    props = sanitize_schema(schema)["properties"]
    assert ("format" in props["p"]) is kept
    assert "format" not in props["n"]


def test_bounds_past_the_repetition_limit_and_bounds_beside_a_pattern_go() -> None:
    schema = {
        "properties": {
            "big": {"type": "string", "maxLength": 65536, "minLength": 1},
            "list": {"type": "array", "items": {"type": "string"}, "maxItems": 5000, "minItems": 2},
            "code": {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 8},
            "n": {"type": "integer", "minimum": 0.5, "exclusiveMaximum": 9.5, "multipleOf": 2},
            "old": {"type": "number", "minimum": 1, "exclusiveMinimum": True},
        }
    }
    props = sanitize_schema(schema)["properties"]
    assert props["big"] == {"type": "string", "minLength": 1}
    assert props["list"] == {"type": "array", "items": {"type": "string"}, "minItems": 2}
    assert props["code"] == {"type": "string", "pattern": "^[A-Z]+$"}
    assert props["n"] == {"type": "integer", "minimum": 1, "exclusiveMaximum": 9}
    assert props["old"] == {"type": "number", "exclusiveMinimum": 1}


def test_unions_collapse_where_they_say_nothing_more() -> None:
    schema = {
        "properties": {
            "one": {"anyOf": [{"type": "string"}], "description": "d"},
            "any": {"anyOf": [{"type": "string"}, {}]},
            "nested": {"anyOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "string"}]},
            "typelist": {"type": ["string", "null"], "maxLength": 5},
            "all": {
                "allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {}}]
            },
        }
    }
    props = sanitize_schema(schema)["properties"]
    assert props["one"] == {"type": "string", "description": "d"}
    assert props["any"] == {}
    assert props["nested"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert props["typelist"] == {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}
    assert props["all"] == {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def test_draft04_tuple_items_become_prefix_items() -> None:
    schema = {
        "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {}], "additionalItems": False}}
    }
    pair = sanitize_schema(schema)["properties"]["pair"]
    assert pair == {"type": "array", "prefixItems": [{"type": "string"}, {}], "items": False}


def test_a_union_of_objects_at_the_top_becomes_one_object() -> None:
    schema = {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                        {"type": "object", "properties": {"b": {"type": "integer"}}}]}  # fmt: skip
    assert sanitize_schema(schema) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    }


def test_mcp_and_openai_shapes_are_both_read() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    tools = sanitize_tools(
        [
            {"name": "a", "description": "A", "inputSchema": schema, "annotations": {"readOnlyHint": True}},
            {"name": "b", "input_schema": schema},
            {"type": "function", "function": {"name": "c", "parameters": schema, "strict": True}, "x": 1},
        ]
    )
    assert tools == [
        {"type": "function", "function": {"name": "a", "description": "A", "parameters": schema}},
        {"type": "function", "function": {"name": "b", "parameters": schema}},
        {"type": "function", "function": {"name": "c", "parameters": schema, "strict": True}},
    ]


def test_only_invalid_names_are_rewritten_and_they_stay_distinct() -> None:
    names = ["read_file", "github.search", "github search", "x" * 80, "", "ok-Name_2"]
    got = [t["function"]["name"] for t in sanitize_tools([{"name": n} for n in names])]
    assert got == ["read_file", "github_search", "github_search_2", "x" * 64, "tool", "ok-Name_2"]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in got)


def test_relax_moves_values_into_words_and_unions_into_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"type": "string", "enum": ["fast", "slow"], "description": "How."},
            "kind": {"const": "cat"},
            "n": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
            "who": {
                "oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "string"}]
            },
            "odd": {"anyOf": [{"type": "string"}, {"not": {}, "description": "?"}]},
            "id": {"type": "string", "pattern": "^[a-z]+$", "format": "uuid", "maxLength": 9},
        },
        "required": ["mode"],
    }
    props = relax_schema(schema)["properties"]
    assert props["mode"] == {"type": "string", "description": 'How. One of: "fast", "slow".'}
    assert props["kind"] == {"description": 'One of: "cat".'}
    assert props["n"] == {"type": ["integer", "null"]}
    assert props["who"] == {"type": ["object", "string"], "properties": {"a": {"type": "string"}}}
    assert props["odd"] == {}
    assert props["id"] == {"type": "string"}
    assert relax_schema(schema)["required"] == ["mode"]


def test_relax_marks_every_tool_non_strict() -> None:
    tools = relax_tools([{"type": "function", "function": {"name": "c", "strict": True}}])
    assert tools == [
        {
            "type": "function",
            "function": {"name": "c", "parameters": {"type": "object", "properties": {}}, "strict": False},
        }
    ]


# --- is_grammar_error -------------------------------------------------------------------------------

GRAMMAR_ERRORS = [
    # llama.cpp llama-server, HTTP 400 (ggml-org/llama.cpp issues #25895, #26596; common/sampling.cpp)
    '{"error":{"code":400,"message":"Failed to initialize samplers: failed to parse grammar",'
    '"type":"invalid_request_error"}}',
    # llama.cpp log line when the GBNF does not parse (issue #19051)
    "llama_grammar_init_impl: failed to parse grammar",
    # llama.cpp common/json-schema-to-grammar.cpp check_errors()
    'JSON schema conversion failed:\nUnrecognized schema: {"type":"any"}',
    "JSON schema conversion failed:\nPattern must start with '^' and end with '$'",
    "JSON schema conversion failed:\nUnsupported ref: other.json#/x",
    # llama.cpp src/llama-grammar.cpp repetition limit (issue #25923, PR #25927)
    "parse: error parsing grammar: number of repetitions exceeds sane defaults, please reduce the number of "
    "repetitions",
    # llama.cpp src/llama-grammar.cpp, a grammar that dead-ends while sampling (issue #27619)
    "error: Failed to initialize samplers: Unexpected empty grammar stack after accepting piece: <think>",
    "Unexpected empty grammar stack after accepting piece: =n (21747)",
    # Ollama relaying llama.cpp's parser (ollama/ollama #17957; awaescher/OllamaSharp #245)
    "parse: error parsing grammar: Undefined rule identifier 'space'",
    {"error": "failed to parse grammar"},
    # LM Studio (lmstudio-ai/lmstudio-bug-tracker #2236) and its MLX engine's outlines (#909)
    'Engine protocol predict request returned 400: {"error":{"code":400,"message":"Failed to initialize '
    'samplers: failed to parse grammar","type":"invalid_request_error"}}',
    "[lmstudio-llama-cpp] Error in predictTokens: Error in iterating prediction stream: "
    "ValueError: 'type' must be a string",
    # vLLM vllm/v1/structured_output/backend_xgrammar.py validate_xgrammar_grammar()
    {"object": "error", "message": "The provided JSON schema contains features not supported by xgrammar."},
    "Failed to transform json schema into a grammar: Unsupported keyword",
    "Invalid JSON grammar specification.",
    # vLLM outlines backend (regex features)
    "Regex uses unsupported feature for structured outputs: lookaround. Only basic matching constructs are "
    "supported",
    "Failed to transform json schema into a regex: unsupported",
    # routers relaying vLLM (OpenRouter-style 502)
    b'{"error":{"code":502,"message":"Upstream error from Nvidia: ValueError: The provided JSON schema '
    b'contains features not supported by xgrammar."}}',
    # SGLang scheduler (python/sglang/srt/managers/scheduler.py)
    "Invalid grammar request with cache hit: key=('json', '{...}')",
    {"error": {"message": "Invalid grammar request"}},
    # Error compiling a grammar, as inference servers word it
    "Error in compiling grammar: unexpected token",
    # Hosted structured-output compilers
    '{"type":"error","error":{"type":"invalid_request_error",'
    '"message":"Schema is too complex for compilation."}}',
]

NOT_GRAMMAR_ERRORS = [
    None,
    "",
    "the request exceeds the available context size, try increasing it",
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
    "Rate limit reached for gpt-4o: Request too large ... tokens per min",
    "tools param requires --jinja flag",
    {"error": {"message": "Unsupported value: 'reasoning_effort' does not support 'none' with this model."}},
    "Invalid 'tools[0].function.name': string does not match pattern",
    "model 'llama3' not found, try pulling it first",
    "Loading model",
]


@pytest.mark.parametrize("body", GRAMMAR_ERRORS)
def test_grammar_errors_are_recognised(body: Any) -> None:
    assert is_grammar_error(body)


@pytest.mark.parametrize("body", NOT_GRAMMAR_ERRORS)
def test_other_errors_are_not_grammar_errors(body: Any) -> None:
    assert not is_grammar_error(body)
