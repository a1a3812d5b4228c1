"""The Anthropic Messages wire (``Endpoint(api="anthropic")``; internal: reached through the provider seam).

``shape`` maps a chat-completions body to a Messages request and ``events`` reads the stream's events back
as chat-completions chunks (both sans I/O); ``provider`` sends through the official SDK; ``models`` and
``counting`` ask the API its models, their windows, and its own count of a request.
"""

from __future__ import annotations

from ..listings import native_wire
from .counting import AnthropicCounter
from .models import LISTING
from .provider import AnthropicProvider
from .shape import ANTHROPIC_SETTINGS

__all__ = ["WIRE"]

#: The Anthropic Messages wire.
WIRE = native_wire(
    "anthropic", AnthropicProvider, LISTING, token_counter=AnthropicCounter, own_fields=ANTHROPIC_SETTINGS
)
