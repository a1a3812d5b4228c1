"""The Anthropic Messages wire (``Endpoint(api="anthropic")``; internal: reached through the provider seam).

``shape`` maps a chat-completions body to a Messages request and ``events`` reads the stream's events back
as chat-completions chunks (both sans I/O); ``provider`` sends through the official SDK; ``models`` and
``counting`` ask the API its models, their windows, and its own count of a request.
"""

from __future__ import annotations

from ..endpoints import Endpoint
from ..listings import forget_native_windows, listed_models, listing_answers, named_window
from ..provider import Provider
from ..seam import ModelInfo, Wire
from .counting import AnthropicCounter
from .models import LISTING
from .provider import AnthropicProvider
from .shape import ANTHROPIC_SETTINGS

__all__ = ["WIRE"]


def _provider(endpoint: Endpoint, _others: frozenset[str]) -> Provider:
    return AnthropicProvider(endpoint)  # builds its request from the fields it knows


async def _list_models(endpoint: Endpoint) -> list[ModelInfo]:
    return await listed_models(LISTING, endpoint)


async def _window(endpoint: Endpoint, model: str) -> int | None:
    return await named_window(LISTING, endpoint, model)


async def _answers(endpoint: Endpoint, within_s: float) -> bool:
    return await listing_answers(LISTING, endpoint, within_s)


#: The Anthropic Messages wire.
WIRE = Wire(
    api="anthropic",
    provider=_provider,
    list_models=_list_models,
    window=_window,
    answers=_answers,
    forget=forget_native_windows,
    token_counter=AnthropicCounter,
    own_fields=ANTHROPIC_SETTINGS,
)
