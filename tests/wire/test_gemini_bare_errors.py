"""A Gemini error written into a 200 as bare JSON (no SSE ``data:`` framing) is the same typed failure as
the error with its HTTP status; nothing the HTTP client or the SDKs raise leaves a native wire untyped.

The bodies are the recorded Gemini error bodies of tests/data/providers/gemini/errors.jsonl (sources in the
README there). That they come back inside a 200, bare, is what users saw: the array form
``[{"error": {"code": 429, ..., "status": "RESOURCE_EXHAUSTED"}}]`` as the body of a 200 streamGenerateContent
answer (google-gemini/gemini-cli issue 6454), the object form ``{"error": {"code": 429, "message": "Resource
has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}`` (continuedev/continue issue
10560), and proxies that, once their upstream failed, answer 200 with one bare JSON error object as the
first chunk (snailyp/gemini-balance pull request 347).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop.errors import EndpointError, EndpointUnreadable
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.gemini.shape import GeminiChunks
from steadyloop.wire.sse import SSEDecoder
from steadyloop.wire.transport.rest import transport_error

from .provider_doubles import DATA, error_reply
from .test_gemini_wire import endpoint

pytestmark = pytest.mark.timeout(60)

ROWS = [
    json.loads(line)
    for line in (DATA / "gemini" / "errors.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
BODY = {"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "q"}]}
ONCE = RetryPolicy(max_retries=0)
SSE = {"content-type": "text/event-stream"}
TEXT = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}, "index": 0}]}
# Rows of errors.jsonl: 1 overflow 400, 2 INVALID_ARGUMENT 400, 3 bad key 400, 4 RESOURCE_EXHAUSTED 429,
# 5 UNAVAILABLE 503, 6 INTERNAL 500, 7 NOT_FOUND 404, 9 Vertex UNAUTHENTICATED 401.
NUMBERS = [1, 2, 3, 4, 5, 6, 7, 9]


def _shape(error: EndpointError) -> tuple[type[EndpointError], str | None]:
    return type(error), error.kind


async def _failure(reply: Any) -> EndpointError:
    async with ScriptedServer(reply) as server:
        with pytest.raises(EndpointError) as caught:
            await run_turn(endpoint(server), BODY, policy=ONCE)
    return caught.value


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("form", ["object", "array", "after-an-event"])
async def test_a_bare_json_error_in_a_200_is_the_failure_its_status_would_be(number: int, form: str) -> None:
    from steadyloop.testing.replies import Reply

    body = ROWS[number - 1]["body"]
    expected = await _failure(error_reply("gemini", number))
    if form == "array":
        bare = f"[{body.rstrip()}\n]"
    elif form == "after-an-event":
        bare = f"data: {json.dumps(TEXT)}\r\n\r\n{body}"
    else:
        bare = body
    got = await _failure(Reply.raw(bare, status=200, headers=SSE))
    assert _shape(got) == _shape(expected), (str(got), str(expected))
    assert got.status == expected.status == ROWS[number - 1]["status"]
    assert "in the stream" in str(got)


async def test_the_quoted_resource_exhausted_wordings_are_rate_limits() -> None:
    from steadyloop.testing.replies import Reply

    quoted = (
        '[{\n  "error": {\n    "code": 429,\n    "message": "Resource exhausted. Please try again later. '
        "Please refer to https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more "
        'details.",\n    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n]'
    )
    compact = (
        '{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", '
        '"status": "RESOURCE_EXHAUSTED"}}'
    )
    for body in (quoted, compact):
        got = await _failure(Reply.raw(body, status=200, headers=SSE))
        assert got.kind == "rate_limited" and got.status == 429


async def test_a_200_whose_body_is_no_stream_and_no_json_is_unreadable() -> None:
    from steadyloop.testing.replies import Reply

    got = await _failure(
        Reply.raw("<html><body>Bad gateway</body></html>", status=200, headers={"content-type": "text/html"})
    )
    assert isinstance(got, EndpointUnreadable)
    assert "Bad gateway" in str(got)


def _read_body(body: bytes, cuts: list[int]) -> None:
    decoder = SSEDecoder(keep_stray=True)
    reader = GeminiChunks(endpoint="http://gemini.invalid", model="gemini-2.5-flash")
    events = 0
    start = 0
    for cut in sorted({c % (len(body) + 1) for c in cuts}):
        for payload in decoder.feed(body[start:cut]):
            events += 1
            reader.feed(payload)
        start = cut
    for payload in [*decoder.feed(body[start:]), *decoder.flush()]:
        events += 1
        reader.feed(payload)
    assert decoder.stray is not None
    reader.feed_bare(bytes(decoder.stray), cut=decoder.stray_cut, streamed=events > 0)


_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_error_body = st.fixed_dictionaries(
    {"error": st.fixed_dictionaries({}, optional={"code": _json, "message": _json, "status": _json})}
).map(json.dumps)
_recorded = st.sampled_from([row["body"] for row in ROWS if row["body"]])


@settings(deadline=None)
@given(
    st.lists(
        _recorded
        | _error_body
        | _json.map(json.dumps)
        | st.text(max_size=60)
        | st.builds(lambda v: f"data: {json.dumps(v)}\r\n\r\n", _json)
        | st.just("[" * 5000)
        | st.just("data: " + "[" * 5000 + "\n\n"),
        max_size=5,
    ).map(lambda parts: "\n".join(parts).encode("utf-8", "surrogatepass")),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=6),
)
def test_any_body_in_any_pieces_reads_or_fails_typed(body: bytes, cuts: list[int]) -> None:
    with contextlib.suppress(EndpointError):  # a typed failure is a right answer; anything else is not
        _read_body(body, cuts)


def test_a_recorded_error_split_anywhere_is_still_read() -> None:
    body = ROWS[3]["body"].encode()
    for cut in range(len(body) + 1):
        with pytest.raises(EndpointError) as caught:
            _read_body(body, [cut])
        assert caught.value.kind == "rate_limited"


_exceptions = st.sampled_from(
    [
        httpx2.ConnectError,
        httpx2.ReadError,
        httpx2.RemoteProtocolError,
        httpx2.ReadTimeout,
        httpx2.InvalidURL,
        httpx2.StreamClosed,
        httpx2.ResponseNotRead,
        OSError,
        TimeoutError,
        ValueError,
        RuntimeError,
        KeyError,
        TypeError,
        json.JSONDecodeError,
        UnicodeEncodeError,
    ]
)


def _build(kind: type[Exception], message: str) -> Exception:
    if kind is json.JSONDecodeError:
        return json.JSONDecodeError(message, message, 0)
    if kind is UnicodeEncodeError:
        return UnicodeEncodeError("ascii", message, 0, len(message), "ordinal not in range")
    if kind in (httpx2.StreamClosed, httpx2.ResponseNotRead):
        return kind()
    return kind(message)


@settings(deadline=None)
@given(_exceptions, st.text(max_size=200))
def test_whatever_the_http_client_raises_is_a_typed_endpoint_error(
    kind: type[Exception], message: str
) -> None:
    error = transport_error(_build(kind, message), endpoint="http://gemini.invalid", model="m")
    assert isinstance(error, EndpointError)
    assert error.endpoint == "http://gemini.invalid"


async def test_an_anthropic_event_that_is_no_json_is_a_typed_error() -> None:
    from steadyloop.testing.replies import Reply

    start = (DATA / "anthropic" / "01-text.sse").read_bytes().split(b"\n\n")[0]
    body = start + b"\n\nevent: content_block_delta\ndata: {not json\n\n"
    async with ScriptedServer(Reply.raw(body, status=200, headers=SSE)) as server:
        at = Endpoint(server.base_url.removesuffix("/v1"), "test-key", api="anthropic")
        with pytest.raises(EndpointError) as caught:
            await run_turn(at, {**BODY, "model": "claude-sonnet-4-5"}, policy=ONCE)
    assert isinstance(caught.value, EndpointUnreadable)
