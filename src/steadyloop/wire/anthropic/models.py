"""The models an Anthropic endpoint lists, and their windows: ``GET /v1/models`` (``data``, paged by
``after_id``) and ``GET /v1/models/{id}``; a model's window is its ``max_input_tokens`` where the API names
one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ..endpoints import NO_KEY, Endpoint
from ..listings import NativeListing, positive
from ..seam import ModelInfo

__all__ = ["ANTHROPIC_VERSION", "LISTING"]

ANTHROPIC_VERSION = "2023-06-01"


def _headers(endpoint: Endpoint) -> dict[str, str]:
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if endpoint.key and endpoint.key != NO_KEY:
        headers["x-api-key"] = endpoint.key
    return headers


def _listing_url(endpoint: Endpoint) -> str:
    return endpoint.base_url.removesuffix("/v1") + "/v1/models"


def _model_url(endpoint: Endpoint, model: str) -> str:
    return f"{_listing_url(endpoint)}/{quote(model, safe='-._~')}"


def _next_page(reply: Mapping[str, Any]) -> dict[str, str] | None:
    last = reply.get("last_id")
    return {"after_id": last} if reply.get("has_more") is True and isinstance(last, str) and last else None


def _window(entry: Any) -> int | None:
    return positive(entry.get("max_input_tokens")) if isinstance(entry, Mapping) else None


def _info(entry: Any) -> ModelInfo | None:
    name = entry.get("id") if isinstance(entry, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    return ModelInfo(id=name, context_length=_window(entry), owned_by="anthropic")


#: How an Anthropic endpoint lists its models.
LISTING = NativeListing(
    headers=_headers,
    listing_url=_listing_url,
    model_url=_model_url,
    entries="data",
    first_page={"limit": "1000"},
    next_page=_next_page,
    info=_info,
    window=_window,
)
