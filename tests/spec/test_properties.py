"""Properties of the spec functions over generated documents.

- ``parse_spec`` is total: any JSON-like value, and any mutation of a valid document, gives a ``ParsedSpec``
  or a ``SpecError``, nothing else.
- ``export_spec`` then ``parse_spec`` gives back the spec, with bundled servers' env and headers stripped.
- ``resolve_agent_spec`` is associative, and an empty spec is its identity.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import steadyloop as sl
from steadyloop.providers import PROVIDERS
from steadyloop.spec import (
    FEATURES,
    HOOK_EVENTS,
    SPEC_VERSION,
    AgentSpec,
    ParsedSpec,
    SpecError,
    SpecProblem,
    export_spec,
    parse_spec,
    resolve_agent_spec,
)

from ..edges._edges import mutated

_SETTINGS = settings(suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=12)
plain_text = st.text(max_size=40)
numbers = st.integers(min_value=-5, max_value=200_000) | st.floats(
    min_value=-10, max_value=1e6, allow_nan=False
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.floats(allow_nan=False, allow_infinity=False)
    | plain_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=12,
)


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


def _table(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


server = st.one_of(
    _table(
        command=names,
        args=st.lists(plain_text, max_size=3),
        env=st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), plain_text, max_size=2),
        cwd=names,
    ),
    _table(
        url=st.sampled_from(["https://mcp.example/a", "http://127.0.0.1:9/mcp"]),
        headers=st.dictionaries(st.from_regex(r"X-[A-Za-z]{1,8}", fullmatch=True), plain_text, max_size=2),
    ),
)

candidates = st.sampled_from(
    [
        "ollama",
        "anthropic:claude-sonnet-4-5",
        "google:gemini-2.5-flash",
        "vllm:Qwen/Qwen3-8B",
        "ollama:llama3:8b",
    ]
)

documents = st.fixed_dictionaries(
    {"spec": st.sampled_from([SPEC_VERSION, SPEC_VERSION + ".3"])},
    optional={
        "requires": st.lists(st.sampled_from(sorted(FEATURES)), max_size=3),
        "name": plain_text,
        "description": plain_text,
        "endpoint": st.tuples(
            _table(
                base_url=st.sampled_from(["http://127.0.0.1:8080/v1", "https://llm.example/v1", "ftp://x"]),
                provider=st.sampled_from([*sorted(PROVIDERS), "Google", "xai"]),
                context_length=numbers,
                request_timeout=numbers,
                first_token_timeout=numbers,
            ),
            st.lists(candidates, max_size=3),
        ).map(lambda t: {**t[0], "failover": t[1]} if "provider" in t[0] else t[0]),
        "model": _table(
            name=plain_text,
            temperature=numbers,
            max_tokens=numbers,
            reasoning_effort=st.sampled_from(["none", "low", "high", "off", "max"]),
            tool_choice=st.sampled_from(["auto", "required", "none", "any"]),
            reasoning_replay=st.booleans(),
            extra_body=st.dictionaries(names, json_values, max_size=3),
        ),
        "prompt": st.lists(_table(id=names, text=plain_text), max_size=4),
        "tools": _table(
            names=st.lists(names, max_size=4),
            servers=st.lists(names, max_size=3),
            discovery=st.sampled_from(["all", "ondemand", "some"]),
            parallel=st.booleans(),
            max_concurrency=numbers,
            timeout=numbers,
            recover_calls=st.booleans(),
        ),
        "approvals": _table(
            require_for=st.lists(
                st.sampled_from(["read", "destructive", "mutate-reversible", "x"]), max_size=3
            ),
            overrides=st.dictionaries(names, st.booleans(), max_size=3),
            timeout=numbers,
        ),
        "context": _table(enabled=st.booleans(), keep_last=numbers, max_chars=numbers),
        "loop": _table(
            max_tool_iterations=numbers, max_continuations=numbers, max_turns=numbers, run_timeout=numbers
        ),
        "hooks": st.lists(
            _table(
                id=names,
                event=st.sampled_from([*HOOK_EVENTS, "later"]),
                tool=names,
                arguments=st.dictionaries(names, json_values, max_size=2),
                max_tokens=numbers,
            ),
            max_size=3,
        ),
        "bundle": st.fixed_dictionaries(
            {}, optional={"mcp_servers": st.dictionaries(names, server, max_size=3)}
        ),
    },
)


def _parse(document: Any) -> ParsedSpec | None:
    try:
        return parse_spec(document, bundle=True)
    except SpecError as exc:
        assert exc.problems, "a refusal always says why"
        assert all(isinstance(p, SpecProblem) for p in exc.problems)
        return None


@_SETTINGS
@given(json_like)
def test_any_json_like_value_is_read_or_refused(value: Any) -> None:
    _parse(value)
    places = ("model", "tools", "prompt", "hooks", "endpoint", "requires")
    _parse({"spec": SPEC_VERSION, **{place: copy.deepcopy(value) for place in places}})
    _parse({"spec": SPEC_VERSION, "model": {"extra_body": {"x": value}}, "bundle": copy.deepcopy(value)})


@_SETTINGS
@given(documents, st.data())
def test_any_mutation_of_a_valid_document_is_read_or_refused(
    document: dict[str, Any], data: st.DataObject
) -> None:
    assert _parse(document) is not None  # the generated documents are all acceptable
    for _ in range(3):
        parsed = _parse(data.draw(mutated(document)))
        if parsed is not None:
            json.dumps(export_spec(parsed.spec), allow_nan=False)  # what was kept is JSON to the bone


def _redacted(spec: AgentSpec) -> AgentSpec:
    if spec.bundle is None:
        return spec
    return replace(spec, bundle=tuple(replace(s, env=None, headers=None) for s in spec.bundle))


@_SETTINGS
@given(documents)
def test_export_then_parse_gives_the_spec_back(document: dict[str, Any]) -> None:
    parsed = _parse(document)
    assert parsed is not None
    exported = export_spec(parsed.spec)
    again = parse_spec(json.loads(json.dumps(exported, allow_nan=False)), bundle=True)
    assert again.warnings == ()
    assert again.spec == _redacted(parsed.spec)


@_SETTINGS
@given(documents, documents, documents)
def test_layering_is_associative(a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]) -> None:
    specs = [p.spec for p in map(_parse, (a, b, c)) if p is not None]
    x, y, z = specs
    resolve = resolve_agent_spec
    assert resolve([resolve([x, y]), z]) == resolve([x, resolve([y, z])]) == resolve([x, y, z])
    assert resolve([AgentSpec(), x]) == resolve([x, AgentSpec()]) == x


@_SETTINGS
@given(
    st.one_of(st.sampled_from([*sorted(PROVIDERS), "XAI", " Google ", "lm-studio"]), st.text(max_size=20)),
    st.lists(
        st.one_of(candidates, st.sampled_from(["gemini:", "nope:x", ""]), st.text(max_size=20)), max_size=4
    ),
)
def test_a_provider_and_its_failover_are_presets_or_a_refusal(name: str, failover: list[str]) -> None:
    document = {"spec": SPEC_VERSION, "endpoint": {"provider": name, "failover": failover}}
    parsed = _parse(document)
    if parsed is None:
        with_problems = parse_spec_problems(document)
        assert any(p.path[:1] == ("endpoint",) for p in with_problems)
        return
    endpoint = parsed.spec.endpoint
    if endpoint.provider is None:  # empty, or credential-like text: warned and ignored, so no failover
        assert not endpoint.failover
        return
    assert endpoint.provider in PROVIDERS
    assert all(c.partition(":")[0] in PROVIDERS for c in endpoint.failover or ())
    chain = endpoint.chain("some-model")
    assert chain is not None
    target = sl.failover(chain, env={})
    assert target.model == "some-model"
    assert len(target.endpoint.fallbacks) == len(endpoint.failover or ())


def parse_spec_problems(document: Any) -> tuple[SpecProblem, ...]:
    try:
        parse_spec(document, bundle=True)
    except SpecError as exc:
        return exc.problems
    return ()
