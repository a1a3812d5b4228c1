"""Anthropic's own count of a request (``POST /v1/messages/count_tokens``), as a ``TokenCounter``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import TokenizerUnavailable
from ..endpoints import Endpoint
from ..seam import COUNT_TIMEOUT_S
from .provider import lease_anthropic
from .shape import anthropic_request

__all__ = ["AnthropicCounter"]

# What Anthropic's count endpoint takes of a Messages request.
_COUNTED_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config", "extra_headers"}
)


class AnthropicCounter:
    """Anthropic's own count of a request (``POST /v1/messages/count_tokens``): exact for that model,
    system prompt, tools and images included, for one round trip.

    Args:
        endpoint: an ``api="anthropic"`` endpoint.
        model: the model to count for (default: the body's).

    Raises:
        TokenizerUnavailable: the anthropic SDK is not installed.
    """

    def __init__(self, endpoint: Endpoint, model: str | None) -> None:
        try:
            import anthropic  # noqa: F401
        except ImportError as error:
            raise TokenizerUnavailable(
                "counting with Anthropic needs its SDK: pip install 'steadyloop[anthropic]'"
            ) from error
        self.endpoint = endpoint
        self.model = model

    @property
    def name(self) -> str:
        return "anthropic:count_tokens"

    async def count(self, body: Mapping[str, Any]) -> int:
        import anthropic
        import httpx2

        request = anthropic_request({**body, "model": self.model or body.get("model")})
        fields = {name: value for name, value in request.items() if name in _COUNTED_FIELDS}
        client, release = lease_anthropic(self.endpoint)
        try:
            counted = await client.messages.count_tokens(**fields, timeout=httpx2.Timeout(COUNT_TIMEOUT_S))
        except anthropic.AnthropicError as error:
            raise TokenizerUnavailable(
                f"{self.endpoint.shown_url} did not count the request: {str(error)[:200]}"
            ) from error
        finally:
            release()
        tokens = getattr(counted, "input_tokens", None)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise TokenizerUnavailable(f"{self.endpoint.shown_url} answered a count without input_tokens")
        return tokens
