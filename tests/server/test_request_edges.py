"""The server's request bodies, query parameters and headers at their edges: any JSON value or mutated
valid body on every route, odd seq values (Last-Event-ID, ``?after=``), approval decisions and image data
URLs. Every answer is a 2xx or a 4xx with the typed error body; never a 500, never a hang."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx2 as httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import assert_typed_refusal

# A live server per test, shared by its examples; fewer examples than a pure function gets.
_EDGES = settings(
    max_examples=min(settings.default.max_examples, 300),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
JSON = {"Content-Type": "application/json"}  # the bodies' own type: what is inside is what is tested
PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")).decode()

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30) | st.sampled_from(
    ["\x00", "١٢٣", "１２", "NaN", "-1", "1e3", "9" * 40, " 7 ", "+3", "0x10", "[" * 500]
)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)
VALID = {
    "/sessions": {"title": "t", "system": "s", "max_turns": 3},
    "messages": {"text": "hi", "images": [{"data": PNG, "mime_type": "image/png"}]},
    "steer": {"text": "go on"},
    "follow_up": {"text": "and then"},
    "branch": {"entry_id": None, "summarise": False},
    "approvals/a1": {"decision": "allow", "reason": "fine"},
}


def _path(sid: str, route: str) -> str:
    return route if route.startswith("/") else f"/sessions/{sid}/{route}"


def _mutations(valid: dict[str, Any]) -> st.SearchStrategy[Any]:
    keys = st.sampled_from(sorted(valid))
    return st.builds(lambda key, value: {**valid, key: value}, keys, values) | values


@_EDGES
@given(st.sampled_from(sorted(VALID)).flatmap(lambda r: st.tuples(st.just(r), _mutations(VALID[r]))))
async def test_any_body_on_any_route_is_answered_or_refusedassert_typed_refusal(
    live: tuple[httpx.AsyncClient, str], case: tuple[str, Any]
) -> None:
    http, sid = live
    route, body = case
    assert_typed_refusal(await http.post(_path(sid, route), content=json.dumps(body).encode(), headers=JSON))


@_EDGES
@given(
    st.sampled_from(sorted(VALID)),
    st.binary(max_size=60) | st.sampled_from([b"[" * 100_000, b'{"text": NaN}']),
)
async def test_any_bytes_as_a_body_are_refusedassert_typed_refusal(
    live: tuple[httpx.AsyncClient, str], route: str, blob: bytes
) -> None:
    http, sid = live
    assert_typed_refusal(await http.post(_path(sid, route), content=blob, headers=JSON))


@_EDGES
@given(
    texts,
    texts,
    st.text(alphabet=st.characters(max_codepoint=255, blacklist_categories=("Cc",)), max_size=30),
)
async def test_any_seq_follow_and_last_event_id_are_read_or_refusedassert_typed_refusal(
    live: tuple[httpx.AsyncClient, str], after: str, follow: str, last_event_id: str
) -> None:
    http, sid = live
    for params, headers in (
        ({"after": after, "follow": "run"}, {}),
        # The client itself refuses a header value that starts or ends with whitespace.
        ({"follow": follow}, {"last-event-id": last_event_id.strip(" \t").encode("latin-1")}),
    ):
        async with http.stream("GET", f"/sessions/{sid}/events", params=params, headers=headers) as response:
            if response.status_code >= 400:
                await response.aread()
                assert_typed_refusal(response)


@_EDGES
@given(
    st.sampled_from(
        ["data:image/png;base64,", "data:image/png,", "data:;base64,", "data:image/svg+xml;base64,", ""]
    )
    .flatmap(lambda head: st.tuples(st.just(head), texts | st.just(PNG)))
    .map("".join),
    st.none() | st.sampled_from(["image/png", "image/bmp", ""]),
)
async def test_any_image_data_url_is_taken_or_refusedassert_typed_refusal(
    live: tuple[httpx.AsyncClient, str], data: str, mime: str | None
) -> None:
    http, sid = live
    image: dict[str, Any] = {"data": data} if mime is None else {"data": data, "mime_type": mime}
    assert_typed_refusal(
        await http.post(f"/sessions/{sid}/messages", json={"text": "look", "images": [image]})
    )
