"""The Gemini wire (``Endpoint(api="gemini")``; internal: reached through the provider seam).

``shape`` maps a chat-completions body to a ``generateContent`` request and reads its chunks back (sans
I/O); ``provider`` sends it over the REST API; ``models`` and ``counting`` ask the API its models, their
windows, and its own count of a request.
"""

from __future__ import annotations

from ..endpoints import Endpoint
from ..listings import forget_native_windows, listed_models, listing_answers, named_window
from ..provider import Provider
from ..seam import ModelInfo, Wire
from .counting import GeminiCounter
from .models import LISTING
from .provider import GeminiProvider
from .shape import GEMINI_SETTINGS

__all__ = ["WIRE"]


def _provider(endpoint: Endpoint, _others: frozenset[str]) -> Provider:
    return GeminiProvider(endpoint)  # builds its request from the fields it knows


async def _list_models(endpoint: Endpoint) -> list[ModelInfo]:
    return await listed_models(LISTING, endpoint)


async def _window(endpoint: Endpoint, model: str) -> int | None:
    return await named_window(LISTING, endpoint, model)


async def _answers(endpoint: Endpoint, within_s: float) -> bool:
    return await listing_answers(LISTING, endpoint, within_s)


#: The Gemini wire.
WIRE = Wire(
    api="gemini",
    provider=_provider,
    list_models=_list_models,
    window=_window,
    answers=_answers,
    forget=forget_native_windows,
    token_counter=GeminiCounter,
    own_fields=GEMINI_SETTINGS,
)
