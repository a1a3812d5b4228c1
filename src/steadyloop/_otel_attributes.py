"""What a run's spans say: the attributes of a request, its usage and its server, credentials taken out of
text, and how a failure marks a span (internal, for ``steadyloop._otel_spans``).

Plain functions and values over the library's own types; the spans themselves are made in
``steadyloop._otel_spans``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from .messages import AssistantMessage
from .usage import Usage
from .wire.endpoints import NO_KEY, Endpoint

if TYPE_CHECKING:
    from .request_body import ModelParams
    from .telemetry import Telemetry

__all__ = [
    "SCOPE",
    "Redactor",
    "ServerFacts",
    "SpanFailure",
    "as_json",
    "fail",
    "now_ns",
    "output_messages",
    "provider_for_host",
    "request_attributes",
    "run_usage",
    "tracer_for",
    "usage_attributes",
]

SCOPE = "steadyloop"
_REDACTED = "[redacted]"
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")

# gen_ai.provider.name by host, for the providers the conventions name; anything else speaks the OpenAI API.
_PROVIDERS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    ("openai.azure.com", "azure.ai.openai"),
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gcp.gemini"),
    ("aiplatform.googleapis.com", "gcp.vertex_ai"),
    ("api.deepseek.com", "deepseek"),
    ("api.groq.com", "groq"),
    ("api.mistral.ai", "mistral_ai"),
    ("api.x.ai", "x_ai"),
    ("api.perplexity.ai", "perplexity"),
    ("api.cohere.com", "cohere"),
)


def now_ns() -> int:
    return time.time_ns()


def provider_for_host(host: str) -> str:
    for suffix, name in _PROVIDERS:
        if host == suffix or host.endswith("." + suffix):
            return name
    return "openai"


class Redactor:
    """Takes an endpoint's credentials out of any text before it becomes an attribute."""

    __slots__ = ("secrets",)

    def __init__(self, endpoint: Endpoint) -> None:
        parts = urlsplit(endpoint.base_url)
        found = [endpoint.api_key or "", parts.password or "", parts.username or ""]
        # Longest first, so a key that contains another is replaced whole.
        self.secrets = sorted({s for s in found if len(s) >= 3 and s != NO_KEY}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        text = _USERINFO.sub("", text)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, _REDACTED)
        return text


@dataclass(slots=True)
class ServerFacts:
    """What every span says about where requests went, worked out once per run."""

    provider: str
    address: str
    port: int | None
    redact: Redactor

    @classmethod
    def of(cls, endpoint: Endpoint, settings: Telemetry) -> ServerFacts:
        parts = urlsplit(endpoint.base_url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
        return cls(settings.provider_name or provider_for_host(host), host, port, Redactor(endpoint))

    def attributes(self) -> dict[str, AttributeValue]:
        out: dict[str, AttributeValue] = {
            "gen_ai.provider.name": self.provider,
            "server.address": self.address,
        }
        if self.port is not None:
            out["server.port"] = self.port
        return out


def tracer_for(settings: Telemetry) -> Tracer:
    provider = settings.tracer_provider
    if provider is not None:
        return provider.get_tracer(SCOPE)
    return trace.get_tracer(SCOPE)


def usage_attributes(usage: Usage) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
    }
    if usage.reasoning_tokens is not None:
        out["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    if usage.first_token_ms is not None:
        out["gen_ai.response.time_to_first_chunk"] = usage.first_token_ms / 1000
    out["steadyloop.request.retries"] = usage.retries or 0
    if usage.timeouts:
        out["steadyloop.request.timeouts"] = usage.timeouts
    if usage.continuations:
        out["steadyloop.request.continuations"] = usage.continuations
    return out


def request_attributes(params: ModelParams) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    for name, key in (
        ("temperature", "gen_ai.request.temperature"),
        ("top_p", "gen_ai.request.top_p"),
        ("top_k", "gen_ai.request.top_k"),
        ("presence_penalty", "gen_ai.request.presence_penalty"),
        ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ):
        value = getattr(params, name)
        if value is not None:
            out[key] = float(value)
    if params.max_tokens is not None:
        out["gen_ai.request.max_tokens"] = params.max_tokens
    if params.seed is not None:
        out["gen_ai.request.seed"] = params.seed
    if params.stop:
        out["gen_ai.request.stop_sequences"] = (
            [params.stop] if isinstance(params.stop, str) else list(params.stop)
        )
    if params.reasoning_effort:
        out["steadyloop.request.reasoning_effort"] = params.reasoning_effort
    if params.response_format is not None:
        out["gen_ai.output.type"] = "json"
    return out


def output_messages(message: AssistantMessage, finish_reason: str) -> str:
    parts: list[dict[str, Any]] = []
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    entry = {"role": "assistant", "parts": parts, "finish_reason": finish_reason or "stop"}
    return json.dumps([entry], ensure_ascii=False, default=str)


def fail(span: Span, error_type: str, description: str | None) -> None:
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


@dataclass(frozen=True, slots=True)
class SpanFailure:
    """Why a span failed: ``error.type``, and the exception's class and words when an exception said."""

    error_type: str
    message: str
    exception: str | None = None

    @classmethod
    def of(cls, fallback: str, text: str | None, exception: str | None, code: str | None) -> SpanFailure:
        # The endpoint's own code first, then the exception's class; the event's outcome when neither came.
        return cls(code or exception or fallback, text or fallback, exception)

    def mark(self, span: Span, redact: Callable[[str], str]) -> None:
        message = redact(self.message)
        fail(span, self.error_type, message)
        if self.exception is not None:
            span.add_event("exception", {"exception.type": self.exception, "exception.message": message})


def run_usage(main: Usage, side_tasks: Usage) -> dict[str, AttributeValue]:
    """A run's ``gen_ai.usage.*``: its own requests and its side tasks together, the side tasks' part apart.

    So the run's totals are the sum of its ``chat`` spans; ``AgentEnd.usage`` (the main requests alone)
    is the total less the ``steadyloop.side_tasks.*`` part.
    """
    out = {k: v for k, v in usage_attributes(main + side_tasks).items() if k.startswith("gen_ai.usage.")}
    out["steadyloop.side_tasks.input_tokens"] = side_tasks.prompt_tokens
    out["steadyloop.side_tasks.output_tokens"] = side_tasks.completion_tokens
    return out


def as_json(value: Mapping[str, Any] | Sequence[Any]) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
