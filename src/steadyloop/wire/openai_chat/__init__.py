"""The chat-completions wire (``Endpoint(api="openai")``, what every local server speaks; internal: reached
through the provider seam).

``provider`` sends a turn through the pooled chat client (``transport/``) and reads its SSE back;
``models`` asks the server which models it serves, in which window, and whether it is there at all.
"""

from __future__ import annotations

from ..endpoints import Endpoint
from ..provider import Provider
from ..seam import Wire
from ..transport.clients import get_chat_client
from . import models
from .provider import OpenAIChatProvider

__all__ = ["WIRE"]


def _provider(endpoint: Endpoint, others: frozenset[str]) -> Provider:
    return OpenAIChatProvider(get_chat_client(endpoint), others)


#: The chat-completions wire: no count of its own (tiktoken stands in for OpenAI's models).
WIRE = Wire(
    api="openai",
    provider=_provider,
    list_models=models.list_models,
    window=models.served_window,
    answers=models.answers,
    forget=models.forget_windows,
)
