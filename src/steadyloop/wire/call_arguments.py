"""A native wire's tool-call arguments, written as the JSON text the OpenAI-shaped ``Turn`` carries.

Anthropic (``tool_use.input``) and Gemini (``functionCall.args``) send arguments as decoded objects; the
rest of the runtime reads them as JSON text, as the OpenAI wire delivers them.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import EndpointUnreadable

__all__ = ["arguments_text"]


def arguments_text(arguments: Any, *, what: str, endpoint: str | None, model: str | None) -> str:
    """``arguments`` as JSON text; ``EndpointUnreadable`` naming ``what`` when they cannot be written."""
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        # Not from JSON as the API sends it (a key that is no string, nesting past the stack).
        raise EndpointUnreadable(
            f"in the stream: {what} cannot be written as JSON ({type(exc).__name__})",
            endpoint=endpoint,
            model=model,
        ) from None
