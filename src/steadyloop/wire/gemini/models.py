"""The models a Gemini endpoint lists, and their windows: ``GET {version}/models`` (``models``, paged by
``pageToken``) and ``GET {version}/models/{model}``; a model's window is its ``inputTokenLimit``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..endpoints import Endpoint
from ..listings import NativeListing, positive
from ..seam import ModelInfo
from .provider import gemini_auth, gemini_url

__all__ = ["LISTING"]


def _listing_url(endpoint: Endpoint) -> str:
    return gemini_url(endpoint.base_url, "", "").rsplit("/", 1)[0]


def _model_url(endpoint: Endpoint, model: str) -> str:
    return gemini_url(endpoint.base_url, model, "").removesuffix(":")


def _next_page(reply: Mapping[str, Any]) -> dict[str, str] | None:
    token = reply.get("nextPageToken")
    return {"pageToken": token} if isinstance(token, str) and token else None


def _window(entry: Any) -> int | None:
    return positive(entry.get("inputTokenLimit")) if isinstance(entry, Mapping) else None


def _info(entry: Any) -> ModelInfo | None:
    raw = entry.get("name") if isinstance(entry, Mapping) else None
    name = raw.removeprefix("models/") if isinstance(raw, str) else None
    if not name:
        return None
    return ModelInfo(id=name, context_length=_window(entry), owned_by="google")


#: How a Gemini endpoint lists its models.
LISTING = NativeListing(
    headers=gemini_auth,
    listing_url=_listing_url,
    model_url=_model_url,
    entries="models",
    first_page={"pageSize": "1000"},
    next_page=_next_page,
    info=_info,
    window=_window,
)
