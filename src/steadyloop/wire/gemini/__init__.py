"""The Gemini wire (``Endpoint(api="gemini")``; internal: reached through the provider seam).

``shape`` maps a chat-completions body to a ``generateContent`` request and reads its chunks back (sans
I/O); ``provider`` sends it over the REST API; ``models`` and ``counting`` ask the API its models, their
windows, and its own count of a request.
"""

from __future__ import annotations

from ..listings import native_wire
from .counting import GeminiCounter
from .models import LISTING
from .provider import GeminiProvider
from .shape import GEMINI_SETTINGS

__all__ = ["WIRE"]

#: The Gemini wire.
WIRE = native_wire("gemini", GeminiProvider, LISTING, token_counter=GeminiCounter, own_fields=GEMINI_SETTINGS)
