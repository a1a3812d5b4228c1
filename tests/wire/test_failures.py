"""classify_failure against real error bodies, and the parts it is made of."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.errors import InvalidInput
from steadyloop.wire import failures
from steadyloop.wire.failures import Failure, classify_failure, parse_retry_after, prompt_truncated

BODIES = Path(__file__).parent.parent / "data" / "error_bodies"
KINDS = {
    "context_overflow",
    "rate_limited",
    "model_loading",
    "transient",
    "refused_field",
    "refused_value",
    "out_of_range",
    "grammar",
    "tools_unsupported",
    "auth",
    "not_found",
    "invalid_request",
    "other",
}


def _real_bodies() -> list[Any]:
    cases = []
    for path in sorted(BODIES.glob("*.json")):
        for index, case in enumerate(json.loads(path.read_text())):
            cases.append(pytest.param(case, id=f"{path.stem}-{index}-{case['provider']}"))
    return cases


REAL = _real_bodies()
REAL_JSON = [param for param in REAL if not isinstance(param.values[0]["body"], str)]


# -- real bodies -------------------------------------------------------------------------------------


def test_the_collection_is_large_and_says_where_each_body_came_from() -> None:
    assert len(REAL) >= 60
    for param in REAL:
        case = param.values[0]
        assert case["source"].startswith(("https://", "capture:")), case
        assert case["expected"]["kind"] in KINDS


@pytest.mark.parametrize("case", REAL)
def test_real_body(case: dict[str, Any]) -> None:
    failure = classify_failure(case["status"], case["body"], case["headers"])
    expected = case["expected"]
    assert failure.kind == expected["kind"]
    assert failure.field == expected.get("field")
    assert list(failure.supported) == expected.get("supported", [])
    assert failure.daily_quota is expected.get("daily_quota", False)
    for key in ("retry_after", "limit", "requested"):
        if key in expected:
            assert getattr(failure, key) == pytest.approx(expected[key]), key
    assert failure.status == case["status"]
    assert failure.message or failure.code, "the server's words (or its code) must come through"


@pytest.mark.parametrize("case", REAL_JSON)
def test_real_body_reads_the_same_as_text_and_as_json(case: dict[str, Any]) -> None:
    as_text = classify_failure(case["status"], json.dumps(case["body"]), case["headers"])
    as_json = classify_failure(case["status"], case["body"], case["headers"])
    assert as_text == as_json


# -- the error shapes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message", "code", "type_"),
    [
        ({"error": {"message": "m", "type": "t", "code": "c"}}, "m", "c", "t"),
        ({"error": "m"}, "m", None, None),
        ({"message": "m", "code": 7}, "m", "7", None),
        ({"detail": "m"}, "m", None, None),
        ({"detail": {"msg": "m", "type": "t"}}, "m", None, "t"),
        (
            {"object": "error", "message": "m", "type": "BadRequestError", "code": 400},
            "m",
            "400",
            "BadRequestError",
        ),
        ({"type": "error", "error": {"type": "t", "message": "m"}}, "m", None, "t"),
        ({"type": "error", "code": "c", "message": "m", "sequence_number": 1}, "m", "c", None),
        ({"type": "response.failed", "response": {"error": {"code": "c", "message": "m"}}}, "m", "c", None),
        (
            [{"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}}],
            "m",
            "400",
            "INVALID_ARGUMENT",
        ),
        (
            {"error": {"message": json.dumps({"error": {"message": "inner", "status": "S"}})}},
            "inner",
            None,
            "S",
        ),
        (
            {
                "error": {
                    "message": "wrapper",
                    "metadata": {"raw": json.dumps({"error": {"message": "inner"}})},
                }
            },
            "inner",
            None,
            None,
        ),
        ({"error": {"message": "wrapper", "metadata": {"raw": "not json"}}}, "wrapper", None, None),
        (
            {"detail": [{"loc": ["body", "top_k"], "msg": "Extra inputs are not permitted"}]},
            "top_k: Extra inputs are not permitted",
            None,
            None,
        ),
        ({"status": "no slot available"}, "no slot available", None, None),
        ("  plain words  ", "plain words", None, None),
        ('data: {"error": {"message": "m"}}\n\n', "m", None, None),
        ('error: {"message": "m", "code": 500}\n', "m", "500", None),
        ("{not json", "{not json", None, None),
        (None, "", None, None),
        ({}, "", None, None),
        ({"error": None, "message": None}, "", None, None),
    ],
)
def test_message_comes_out_of_every_shape(
    body: Any, message: str, code: str | None, type_: str | None
) -> None:
    failure = classify_failure(400, body)
    assert (failure.message, failure.code, failure.type) == (message, code, type_)


def test_a_body_nested_past_any_error_shape_is_not_followed() -> None:
    body: Any = "too deep: maximum context length"
    for _ in range(20):
        body = {"error": {"message": json.dumps(body)}}
    assert classify_failure(400, body).kind == "invalid_request"


# -- what decides the kind ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (None, "transient"),
        (401, "auth"),
        (403, "auth"),
        (402, "other"),
        (404, "not_found"),
        (408, "transient"),
        (425, "transient"),
        (429, "rate_limited"),
        (500, "transient"),
        (502, "transient"),
        (503, "transient"),
        (504, "transient"),
        (529, "transient"),
        (400, "invalid_request"),
        (413, "invalid_request"),
        (422, "invalid_request"),
        (501, "other"),
        (200, "other"),
    ],
)
def test_the_status_decides_when_the_words_say_nothing(status: int | None, kind: str) -> None:
    assert classify_failure(status, None).kind == kind
    assert classify_failure(status, {"error": {"message": "something went wrong"}}).kind == kind


@pytest.mark.parametrize(
    ("kind", "transient"),
    [(kind, kind in {"transient", "rate_limited"}) for kind in sorted(KINDS)],
)
def test_transient_is_transient_and_rate_limited_only(kind: str, transient: bool) -> None:
    assert Failure(kind=kind).transient is transient  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}),
        (500, {"error": {"code": 500, "message": "JSON schema conversion failed:\nUnrecognized schema: {}"}}),
        (429, {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}),
        (400, {"error": {"message": "x", "code": "context_length_exceeded"}}),
        (502, {"error": "prompt is too long: 9 tokens > 8 maximum"}),
    ],
)
def test_a_transient_status_is_not_transient_when_the_words_say_why(status: int, body: Any) -> None:
    assert not classify_failure(status, body).transient


def test_a_429_is_never_an_overflow_whatever_its_words_borrow() -> None:
    words = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."
    assert classify_failure(400, words).kind == "context_overflow"
    failure = classify_failure(429, words)
    assert (failure.kind, failure.limit, failure.requested) == ("rate_limited", None, None)


def test_loading_words_mean_loading_only_on_a_503_or_a_stream() -> None:
    assert classify_failure(503, "Loading model").kind == "model_loading"
    assert classify_failure(None, "Loading model").kind == "model_loading"
    assert classify_failure(400, "Loading model").kind == "invalid_request"
    assert not classify_failure(503, "Loading model").transient


def test_lm_studio_overflow_policy_setting_is_not_an_overflow() -> None:
    assert (
        classify_failure(400, {"error": "Invalid context overflow policy: rollingWindow"}).kind
        == "invalid_request"
    )
    assert classify_failure(400, "mid-generation context overflow").kind == "context_overflow"


@pytest.mark.parametrize(
    ("words", "kind", "field"),
    [
        (
            "Unsupported parameter: 'max_tokens' is not supported with this model.",
            "refused_field",
            "max_tokens",
        ),
        ("Unrecognized request argument supplied: min_p", "refused_field", "min_p"),
        ("Unknown parameter: 'min_p'.", "refused_field", "min_p"),
        (
            "Unsupported value: 'temperature' does not support 0.2 with this model.",
            "refused_value",
            "temperature",
        ),
        (
            "max_tokens is too large: 9000. This model supports at most 4096 completion tokens",
            "out_of_range",
            "max_tokens",
        ),
        ("temperature must be between 0 and 2", "out_of_range", "temperature"),
        (
            "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
            "out_of_range",
            "temperature",
        ),
        (
            "'max_tokens' is too large: 2048. This model's maximum context length is 4096 tokens",
            "context_overflow",
            "max_tokens",
        ),
        ("Context length exceeded", "context_overflow", None),
        ("Argument not supported on this model: topK", "refused_field", "top_k"),
    ],
)
def test_a_field_a_value_and_a_number_are_told_apart(words: str, kind: str, field: str | None) -> None:
    failure = classify_failure(400, words)
    assert (failure.kind, failure.field) == (kind, field)


def test_the_field_falls_back_to_the_param_the_server_named() -> None:
    body = {
        "error": {
            "message": "Invalid value: 'xhigh'. Supported values are: 'low', 'medium', and 'high'.",
            "param": "reasoning.effort",
        }
    }
    failure = classify_failure(400, body)
    assert (failure.kind, failure.field, failure.supported) == (
        "refused_value",
        "reasoning.effort",
        ("low", "medium", "high"),
    )
    # an overflow's param names the part that was too long, not a field to drop
    body = {"error": {"message": "x", "param": "messages", "code": "context_length_exceeded"}}
    assert classify_failure(400, body).field is None


@pytest.mark.parametrize(
    ("words", "supported"),
    [
        (
            "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
            ("minimal", "low", "medium", "high"),
        ),
        ('must be one of "text" or "json_object", but got: json_schema', ("text", "json_object")),
        ("Only the default (1) value is supported.", ("1",)),
        ("Only temperature=1 is supported unless ...", ("1",)),
        ("nothing listed", ()),
    ],
)
def test_supported_values_are_read_in_the_servers_order(words: str, supported: tuple[str, ...]) -> None:
    assert failures._supported(words) == supported


# -- waiting -----------------------------------------------------------------------------------------


NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "text", "seconds"),
    [
        ({"Retry-After": "20"}, None, 20.0),
        ({"retry-after": "1.5"}, None, 1.5),
        ({"RETRY-AFTER-MS": "250"}, None, 0.25),
        ({"retry-after": "20", "retry-after-ms": "250"}, None, 0.25),
        ({"retry-after": format_datetime(NOW + timedelta(seconds=90), usegmt=True)}, None, 90.0),
        ({"retry-after": format_datetime(NOW - timedelta(seconds=90), usegmt=True)}, None, 0.0),
        ({"retry-after": "Wed, 01 Jan 2026 12:00:30"}, None, 30.0),
        ({"retry-after": "-5"}, None, 0.0),
        ({"retry-after": "soon"}, "Please try again in 20s.", 20.0),
        ({"retry-after": "nan"}, None, None),
        ({}, "Please try again in 1.5s.", 1.5),
        (None, "Please try again in 250ms.", 0.25),
        (None, "Please try again in 1m30s.", 90.0),
        (None, "Please try again in 6m0s.", 360.0),
        (None, "Please retry after 7 seconds.", 7.0),
        (None, "Try again in 2 minutes", 120.0),
        (None, "retry after 500 milliseconds", 0.5),
        (None, '"retryDelay": "21s"', 21.0),
        (None, "no wait named", None),
        (None, None, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str] | None, text: str | None, seconds: float | None) -> None:
    waited = parse_retry_after(headers, text, now=NOW.timestamp())
    assert waited == (None if seconds is None else pytest.approx(seconds))


def test_retry_after_without_now_uses_the_clock() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=100), usegmt=True)
    waited = parse_retry_after({"Retry-After": later})
    assert waited is not None and 90 <= waited <= 100


def test_a_wait_in_the_words_counts_only_for_a_failure_worth_waiting_for() -> None:
    words = "Please try again in 20s."
    assert classify_failure(429, words).retry_after == 20.0
    assert (
        classify_failure(400, {"error": {"message": words, "code": "context_length_exceeded"}}).retry_after
        is None
    )
    # the headers are the server's instruction whatever the kind
    assert classify_failure(503, "Loading model", {"Retry-After": "5"}).retry_after == 5.0


def test_gemini_retry_delay_in_the_error_details_is_read() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34s"}],
        }
    }
    failure = classify_failure(429, body)
    assert (failure.kind, failure.retry_after) == ("rate_limited", 34.0)


# -- silent truncation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "reported", "truncated"),
    [
        (10_000, 2_048, True),  # Ollama's default window kept the tail
        (1_000, 600, True),
        (1_000, 900, False),  # within an estimate's error
        (5_000, 3_600, False),  # 72%: a generous tokenizer, not a cut
        (300, 100, False),  # 200 tokens is a chat template's worth
        (800, 500, True),
        (0, 10, False),
        (1_000, 0, False),  # no count reported
        (-5, -5, False),
    ],
)
def test_prompt_truncated(sent: int, reported: int, truncated: bool) -> None:
    assert prompt_truncated(sent, reported) is truncated


@given(st.integers(min_value=1, max_value=10**7), st.integers(min_value=1, max_value=10**7))
def test_a_count_at_least_what_was_sent_is_never_a_cut(sent: int, extra: int) -> None:
    assert not prompt_truncated(sent, sent + extra - 1)


# -- the value ---------------------------------------------------------------------------------------


def test_failure_round_trips_through_json() -> None:
    words = (
        "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
        "Supported values are: 'low' and 'high'."
    )
    failure = classify_failure(400, {"error": {"message": words}})
    assert failure.supported == ("low", "high")
    data = json.loads(json.dumps(failure.to_json()))
    assert Failure.from_json(data) == failure
    overflow = classify_failure(429, "x", {"retry-after": "3"})
    assert Failure.from_json(json.loads(json.dumps(overflow.to_json()))) == overflow


@pytest.mark.parametrize(
    "data",
    [
        {"kind": "exploded"},
        {"kind": "other", "status": "400"},
        {"kind": "other", "status": True},
        {"kind": "other", "retry_after": "3"},
        {"kind": "other", "supported": "low"},
        {"kind": "other", "message": 4},
        {"kind": "other", "limit": 1.5},
    ],
)
def test_from_json_refuses_what_to_json_never_writes(data: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        Failure.from_json(data)


def test_exported_names() -> None:
    assert failures.__all__ == sorted(failures.__all__)
    assert set(failures.__all__) == {
        "Failure",
        "FailureKind",
        "classify_failure",
        "parse_retry_after",
        "prompt_truncated",
    }


# -- never raises ------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "error",
                    "message",
                    "msg",
                    "detail",
                    "details",
                    "code",
                    "type",
                    "param",
                    "status",
                    "metadata",
                    "raw",
                    "response",
                    "n_ctx",
                    "n_prompt_tokens",
                    "loc",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@given(st.one_of(st.none(), st.integers(min_value=100, max_value=599)), JSON)
def test_any_json_body_classifies(status: int | None, body: Any) -> None:
    mapping = body if isinstance(body, dict) else {"error": body}
    for candidate in (mapping, json.dumps(body)):
        failure = classify_failure(status, candidate)
        assert failure.kind in KINDS
        assert failure.retry_after is None or failure.retry_after >= 0


@given(
    st.text(max_size=300),
    st.dictionaries(st.sampled_from(["Retry-After", "retry-after-ms", "x"]), st.text(max_size=30)),
)
def test_any_text_and_headers_classify(text: str, headers: dict[str, str]) -> None:
    failure = classify_failure(429, text, headers)
    assert failure.kind in KINDS
    assert failure.retry_after is None or failure.retry_after >= 0


@given(st.text(max_size=60))
def test_header_names_are_read_in_any_case(value: str) -> None:
    assert parse_retry_after({"Retry-After": value}, now=0.0) == parse_retry_after(
        {"rEtRy-AfTeR": value}, now=0.0
    )


def test_a_validation_error_list_with_null_fields_still_classifies() -> None:
    # Found by the property test below on a run in CI: "loc" may be null.
    failure = classify_failure(None, [{"msg": None, "loc": None}])
    assert failure.kind in KINDS
    assert classify_failure(422, [{"msg": "Extra inputs are not permitted", "loc": "min_p"}]).field == "min_p"


# Total under hostile input -----------------------------------------------------------------------------

_DEEP_BODIES = [
    "[" * 1000,
    "{" * 600,
    '{"error": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"error": {"message": "' + "x" * 100 + '", "details": ' + "[" * 2000 + "]" * 2000 + "}}",
    "data: " + "[" * 1000,
    '{"error": {"metadata": {"raw": "' + "[" * 1000 + '"}}}',
]


@pytest.mark.parametrize("body", _DEEP_BODIES)
@pytest.mark.parametrize("status", [None, 400, 429, 500, 503])
def test_a_deeply_nested_body_classifies(status: int | None, body: str) -> None:
    failure = classify_failure(status, body)
    assert failure.kind in KINDS


def test_a_deeply_nested_mapping_classifies() -> None:
    nested: Any = "rate limit reached"
    for _ in range(5000):
        nested = [nested]
    body = {"error": {"message": "Too many requests", "details": nested}, "msg": nested}
    assert classify_failure(429, body).kind == "rate_limited"
    looped: dict[str, Any] = {"error": {"message": "overloaded"}}
    looped["self"] = looped
    assert classify_failure(503, looped).kind == "transient"


@pytest.mark.parametrize(
    "value",
    [
        "Fri, 31 Dec 99999 23:59:59 GMT",
        "Mon, 01 Jan 0001 00:00:00 GMT",
        "Fri, 31 Dec 9999 23:59:59 +9999",
        "Fri, 31 Dec 2024 23:59:59 -99999999",
        "Thu, 01 Jan 1970 00:00:00 +2400",
        "9" * 5000,
        "1e400",
        "-inf",
        "nan",
        "",
    ],
)
def test_absurd_retry_after_values_give_a_finite_wait_or_none(value: str) -> None:
    failure = classify_failure(429, "slow down", {"Retry-After": value})
    assert failure.retry_after is None or (0 <= failure.retry_after < float("inf"))


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": 5},
        {"retry-after-ms": 1500.0},
        {"Retry-After": None},
        {"Retry-After": b"7"},
        {"Retry-After": ["3"]},
        {1: "x", None: "y", "retry-after": "2"},
        [("Retry-After", "4")],
        "Retry-After: 4",
        42,
    ],
)
def test_headers_of_any_shape_classify(headers: Any) -> None:
    failure = classify_failure(429, "slow down", headers)
    assert failure.kind == "rate_limited"
    assert failure.retry_after is None or failure.retry_after >= 0


def test_header_values_that_are_numbers_are_read() -> None:
    assert classify_failure(429, "", {"Retry-After": 5}).retry_after == 5.0  # type: ignore[dict-item]
    assert classify_failure(429, "", {"retry-after-ms": 1500}).retry_after == 1.5  # type: ignore[dict-item]


@pytest.mark.parametrize("status", ["429", "abc", True, 4.29, -1, 10**20, [429]])
def test_a_status_that_is_not_a_number_reads_as_none_or_its_digits(status: Any) -> None:
    failure = classify_failure(status, "error")
    assert failure.kind in KINDS
    assert failure.status is None or isinstance(failure.status, int)


def test_numbers_in_the_words_too_long_to_be_counts_are_ignored() -> None:
    words = f"This model's maximum context length is {'9' * 5000} tokens. However, you requested 10 tokens"
    failure = classify_failure(400, words)
    assert failure.kind == "context_overflow"
    assert failure.limit is None
    assert classify_failure(429, f"Please try again in {'9' * 400}s").retry_after is None


_ANY_HEADER_VALUE = st.one_of(
    st.text(max_size=40),
    st.integers(),
    st.floats(),
    st.none(),
    st.binary(max_size=20),
    st.lists(st.text(max_size=5), max_size=2),
)


@given(
    st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans(), st.floats()),
    st.one_of(JSON, st.text(max_size=300), st.binary(max_size=50)),
    st.one_of(
        st.none(),
        st.dictionaries(
            st.one_of(
                st.sampled_from(["Retry-After", "retry-after-ms", "RETRY-AFTER"]), st.integers(), st.none()
            ),
            _ANY_HEADER_VALUE,
            max_size=4,
        ),
    ),
)
def test_classify_failure_never_raises(status: Any, body: Any, headers: Any) -> None:
    failure = classify_failure(status, body, headers)
    assert failure.kind in KINDS
    assert failure.retry_after is None or 0 <= failure.retry_after < float("inf")
    assert failure.status is None or isinstance(failure.status, int)
