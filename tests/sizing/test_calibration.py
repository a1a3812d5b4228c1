"""Calibration: the highest of the last four readings, per (endpoint, model)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.sizing.calibration import (
    body_chars,
    body_has_image,
    calibrate,
    chars_per_token_for,
    reset_calibration,
)
from steadyloop.sizing.tokens import context_tokens, request_tokens
from steadyloop.wire.endpoints import Endpoint

LOCAL = Endpoint("http://127.0.0.1:8080/v1")
OTHER_KEY = Endpoint("http://127.0.0.1:8080/v1", api_key="secret")


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    reset_calibration()
    yield
    reset_calibration()


def test_four_until_a_reading_exists() -> None:
    assert chars_per_token_for(LOCAL, "m") == 4.0


def test_the_highest_of_the_last_four_readings() -> None:
    assert calibrate(LOCAL, "m", 300, 100) == 3.0
    assert chars_per_token_for(LOCAL, "m") == 3.0
    calibrate(LOCAL, "m", 500, 100)
    calibrate(LOCAL, "m", 200, 100)
    calibrate(LOCAL, "m", 250, 100)
    assert chars_per_token_for(LOCAL, "m") == 5.0
    calibrate(LOCAL, "m", 260, 100)
    assert chars_per_token_for(LOCAL, "m") == 5.0
    calibrate(LOCAL, "m", 240, 100)  # the 5.0 is now five readings old
    assert chars_per_token_for(LOCAL, "m") == 2.6


@pytest.mark.parametrize(("chars", "tokens"), [(99, 100), (801, 100), (0, 10), (10, 0), (10, -1)])
def test_readings_outside_one_to_eight_are_not_taken(chars: int, tokens: int) -> None:
    assert calibrate(LOCAL, "m", chars, tokens) is None
    assert chars_per_token_for(LOCAL, "m") == 4.0


def test_the_bounds_themselves_are_taken() -> None:
    assert calibrate(LOCAL, "m", 100, 100) == 1.0
    assert calibrate(LOCAL, "m", 800, 100) == 8.0


def test_a_request_with_an_image_is_not_taken() -> None:
    assert calibrate(LOCAL, "m", 300, 100, has_image=True) is None
    assert chars_per_token_for(LOCAL, "m") == 4.0


def test_readings_are_kept_per_endpoint_and_model() -> None:
    calibrate(LOCAL, "a", 250, 100)
    assert chars_per_token_for(LOCAL, "a") == 2.5
    assert chars_per_token_for(LOCAL, "b") == 4.0
    assert chars_per_token_for(OTHER_KEY, "a") == 4.0
    # A trailing slash is the same endpoint.
    assert chars_per_token_for(Endpoint("http://127.0.0.1:8080/v1/"), "a") == 2.5


def test_reset() -> None:
    calibrate(LOCAL, "m", 250, 100)
    reset_calibration()
    assert chars_per_token_for(LOCAL, "m") == 4.0


def test_body_has_image() -> None:
    text = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    assert not body_has_image(text)
    assert body_has_image({"messages": [{"role": "user", "content": [image]}]})


@given(
    st.lists(st.text(min_size=1, max_size=400), min_size=1, max_size=6),
    st.integers(min_value=1, max_value=5000),
)
def test_a_calibrated_ratio_sizes_the_same_body_back_to_the_count(
    texts: list[str], prompt_tokens: int
) -> None:
    body = {"messages": [{"role": "user", "content": text} for text in texts]}
    chars = body_chars(body)
    if calibrate(LOCAL, "m", chars, prompt_tokens) is None:
        return
    ratio = chars_per_token_for(LOCAL, "m")
    reset_calibration()
    # Floating division may land a hair either side of the exact count.
    assert abs(request_tokens(body, chars_per_token=ratio) - prompt_tokens) <= 1
    assert abs(context_tokens(body, chars_per_token=ratio).total - prompt_tokens) <= 1
