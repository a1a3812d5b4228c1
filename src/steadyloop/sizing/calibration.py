"""The characters per token each (endpoint, model) was measured at, kept for the life of the process.

Every answered turn comes back with the endpoint's exact prompt count for a body whose characters were
already counted (``body_chars``), so each turn is a reading of that model's ratio. The next request is
sized with the highest of the last four readings, which is the lowest token count: a count that comes
out high refuses a run that would have fit, while one that comes out low only costs the round trip the
guard was there to save.

The ratio is a measurement, not a capability: it moves every turn, so it is not exported with the
capability latches and a restarted process learns it again from its first turn. Sans-I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from ..wire.endpoints import Endpoint, endpoint_key
from .tokens import CHARS_PER_TOKEN, context_chars

__all__ = [
    "MAX_READING",
    "MIN_READING",
    "READINGS_KEPT",
    "body_chars",
    "body_has_image",
    "calibrate",
    "chars_per_token_for",
    "reset_calibration",
]

#: Readings below this many characters a token are not taken (no tokenizer packs that loosely).
MIN_READING = 1.0
#: Readings above this many characters a token are not taken (a server that counted something else).
MAX_READING = 8.0
#: How many recent readings are kept per (endpoint, model).
READINGS_KEPT = 4

_readings: dict[tuple[str, str], deque[float]] = {}


def body_chars(body: Mapping[str, Any]) -> int:
    """The characters of a request body's prompt, counted exactly as ``request_tokens`` counts them.

    Pass this with the endpoint's prompt count to ``calibrate``, so the ratio it learns sizes the same
    body back to the same count.
    """
    return context_chars(body).total


def body_has_image(body: Mapping[str, Any]) -> bool:
    """Whether the body's messages carry an image (its readings say nothing about text)."""
    return context_chars(body).images > 0


def calibrate(
    endpoint: Endpoint, model: str, chars: int, prompt_tokens: int, *, has_image: bool = False
) -> float | None:
    """Record one reading of a model's characters per token.

    Args:
        endpoint: where the request went.
        model: the model it named.
        chars: ``body_chars`` of the request.
        prompt_tokens: the prompt count the endpoint reported for it.
        has_image: the request carried an image; an image's tokens have nothing to do with characters,
            so the reading is not taken.

    Returns:
        The reading taken, or ``None`` when it was not (an image, no count, or outside 1-8).
    """
    if has_image or chars <= 0 or prompt_tokens <= 0:
        return None
    reading = chars / prompt_tokens
    if not MIN_READING <= reading <= MAX_READING:
        return None
    key = (endpoint_key(endpoint), model)
    kept = _readings.get(key)
    if kept is None:
        kept = _readings[key] = deque(maxlen=READINGS_KEPT)
    kept.append(reading)
    return reading


def chars_per_token_for(endpoint: Endpoint, model: str) -> float:
    """The ratio to size the next request to this (endpoint, model) with.

    The highest of the last four readings; ``CHARS_PER_TOKEN`` (4) until a turn has reported one.
    """
    kept = _readings.get((endpoint_key(endpoint), model))
    return max(kept) if kept else float(CHARS_PER_TOKEN)


def reset_calibration() -> None:
    """Forget every reading."""
    _readings.clear()
