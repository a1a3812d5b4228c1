"""JSON that Python reads but no schema should take, inside otherwise valid request bodies: NaN and the
infinities (which ``json.loads`` turns into floats), numbers past a float, nesting as deep as the body
allows, and strings at and past the fields' limits, at every field of every route that takes a body,
including the free-form ones (an agent document, an output schema, approval overrides). Every answer is a
2xx or a 4xx with the typed error body; never a 500, never a hang."""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steadyloop.testing import ScriptedServer

from .conftest import assert_typed_refusal

_EDGES = settings(
    max_examples=min(settings.default.max_examples, 300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HOLE = "__steadyloop_hole__"
JSON = {"Content-Type": "application/json"}
VALID: dict[str, dict[str, Any]] = {
    "/sessions": {
        "title": "t",
        "temperature": 0.5,
        "max_tokens": 10,
        "approvals": {"timeout_s": 5, "overrides": {"write_file": True}},
        "agent": {"spec": "steadyloop.agent/1", "model": {"temperature": 0.1}, "loop": {"max_turns": 2}},
    },
    "messages": {
        "text": "hi",
        "output_schema": {"schema": {"type": "object", "properties": {"a": {"type": "number"}}}},
    },
    "steer": {"text": "go on"},
    "follow_up": {"text": "and then"},
    "branch": {"entry_id": None, "summarise": False, "reserve_tokens": 5},
    "approvals/a1": {"decision": "allow", "reason": "fine"},
}
# Raw JSON, spliced in where the hole is: words Python's reader takes that JSON does not, numbers past a
# float or a 64-bit integer, nesting deep and deeper, strings long and longer.
RAW = [
    "NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "-0.0", str(2**64), str(10**4000),
    "[" * 900 + "]" * 900, "[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000,
    json.dumps("x" * 1_000_001), json.dumps("\ud800"), '"\\u0000"', "true", "null", "{}", "[]",
]  # fmt: skip


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*path, key))
    return out


def _holed(value: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return HOLE
    return {**value, path[0]: _holed(value.get(path[0]), path[1:]) if isinstance(value, dict) else HOLE}


NOT_JSON = {"NaN", "Infinity", "-Infinity", "1e999", "-1e999"}
CASES = [(route, path) for route, body in sorted(VALID.items()) for path in _paths(body)]


@_EDGES
@given(st.sampled_from(CASES), st.sampled_from(RAW))
async def test_json_no_field_can_hold_is_refused_typed_wherever_it_is(
    live: tuple[httpx.AsyncClient, str], case: tuple[str, tuple[Any, ...]], raw: str
) -> None:
    http, sid = live
    route, path = case
    text = json.dumps(_holed(VALID[route], path)).replace(json.dumps(HOLE), raw)
    url = route if route.startswith("/") else f"/sessions/{sid}/{route}"
    response = await http.post(url, content=text.encode("utf-8", "surrogatepass"), headers=JSON)
    assert_typed_refusal(response)
    if raw in NOT_JSON:
        # Read as floats, these went on into free-form fields and from there to the model as no JSON.
        assert response.status_code == 400, response.text
        assert "no JSON number" in response.text or "past what a JSON number" in response.text


async def test_nan_in_an_output_schema_is_refused_before_a_run_starts(
    live: tuple[httpx.AsyncClient, str], model: ScriptedServer
) -> None:
    http, sid = live
    body = '{"text": "hi", "output_schema": {"schema": {"type": "object", "maximum": NaN}}}'
    response = await http.post(f"/sessions/{sid}/messages", content=body.encode(), headers=JSON)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"
    assert model.chat_requests == []  # nothing reached the model
