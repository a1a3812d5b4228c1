"""Gemini's own count of a request (``POST models/{model}:countTokens``), as a ``TokenCounter``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from ...errors import InvalidInput, TokenizerUnavailable
from ..endpoints import Endpoint
from ..seam import COUNT_TIMEOUT_S
from ..transport.rest import lease_http
from .provider import gemini_auth, gemini_count_body, gemini_url
from .shape import gemini_request

__all__ = ["GeminiCounter"]


class GeminiCounter:
    """Gemini's own count of a request (``POST models/{model}:countTokens``, in the body the Gemini API
    or Vertex AI takes: ``gemini_count_body``): system instruction and tools included, for one round trip.

    Args:
        endpoint: an ``api="gemini"`` endpoint.
        model: the model to count for (default: the body's).
    """

    def __init__(self, endpoint: Endpoint, model: str | None) -> None:
        self.endpoint = endpoint
        self.model = model

    @property
    def name(self) -> str:
        return "gemini:countTokens"

    async def count(self, body: Mapping[str, Any]) -> int:
        import httpx2

        model, contents, config = gemini_request({**body, "model": self.model or body.get("model")})
        request = gemini_count_body(self.endpoint.base_url, model, contents, config)
        try:
            payload = json.dumps(request, separators=(",", ":"), allow_nan=False).encode()
        except (ValueError, TypeError, RecursionError) as exc:  # NaN, a foreign type, a cycle, too deep
            raise InvalidInput(f"the request cannot be sent to be counted: {type(exc).__name__}") from None
        headers = {"content-type": "application/json", **gemini_auth(self.endpoint)}
        where = self.endpoint.shown_url
        client, release = lease_http(self.endpoint)
        try:
            async with asyncio.timeout(COUNT_TIMEOUT_S):
                response = await client.post(
                    gemini_url(self.endpoint.base_url, model, "countTokens"),
                    content=payload,
                    headers=headers,
                )
        except (httpx2.HTTPError, OSError, TimeoutError) as error:
            raise TokenizerUnavailable(f"{where} did not count the request: {error!r}"[:300]) from error
        finally:
            release()
        if response.status_code != 200:
            raise TokenizerUnavailable(
                f"{where} did not count the request: HTTP {response.status_code} {response.text[:200]}"
            )
        try:
            tokens = response.json().get("totalTokens", 0)
        except (ValueError, AttributeError):
            tokens = None
        # A count of nothing leaves totalTokens out, as the API leaves out every zero.
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise TokenizerUnavailable(f"{where} answered a count without totalTokens")
        return tokens
