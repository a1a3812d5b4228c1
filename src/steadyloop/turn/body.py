"""Rebuilding a request body from the latches, on every attempt.

The caller states what it wants (``max_tokens``, ``temperature``, ``reasoning_effort``, extra fields);
``apply_latches`` turns that into what this endpoint and model will take today. The body is rebuilt rather
than patched, so a latch set by the last refusal is honoured by the very next attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .capabilities import EndpointCapabilities, ModelCapabilities, effort_for
from .text_tools import tools_as_text

__all__ = ["apply_latches"]


def apply_latches(
    body: Mapping[str, Any],
    caps: EndpointCapabilities,
    model: ModelCapabilities,
    *,
    relax: Any = None,
) -> dict[str, Any]:
    """The body as this endpoint and model will take it.

    Args:
        body: what the caller asked for. ``max_tokens`` or ``max_completion_tokens`` (either spelling) is
            the reply ceiling; ``reasoning_effort`` the effort asked for.
        caps: the endpoint's latches.
        model: the model's latches.
        relax: turns sanitised tool schemas into relaxed ones when the endpoint could not build a grammar
            (``relax_tools``); ``None`` leaves tools as given.
    """
    out = dict(body)
    ceiling = out.pop("max_tokens", None)
    alt = out.pop("max_completion_tokens", None)
    ceiling = ceiling if ceiling is not None else alt
    if ceiling is not None:
        # Legacy first: the newer spelling is exactly the one older models and llama.cpp-shaped
        # endpoints reject, and nothing has told us otherwise yet.
        out["max_tokens" if model.legacy_token_limit else "max_completion_tokens"] = ceiling
    if "temperature" in out and not model.chosen_temperature:
        del out["temperature"]
    if "reasoning_effort" in out:
        effort = effort_for(model, out["reasoning_effort"])
        if effort:
            out["reasoning_effort"] = effort
        else:
            del out["reasoning_effort"]
    for name in model.refused_fields:
        out.pop(name, None)
    if "tools" in out and not model.native_tools:
        # The server takes no tools: they are described in the prompt and calls are read from the text.
        return tools_as_text(out)
    if "tools" in out and not caps.strict_schemas and relax is not None:
        out["tools"] = relax(out["tools"])
    return out
