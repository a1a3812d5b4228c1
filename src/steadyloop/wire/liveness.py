"""Whether an endpoint answers at all: the question asked of one that has been silent for too long.

A model prefilling a long prompt on a CPU and an endpoint that accepted the connection and went away look
the same from the stream: nothing arrives. A second, cheap request tells them apart. Any HTTP answer
counts, a refusal included: only a server that is there can refuse.
"""

from __future__ import annotations

from .endpoints import Endpoint
from .registry import wire_for

__all__ = ["endpoint_answers"]


async def endpoint_answers(endpoint: Endpoint, within_s: float) -> bool:
    """Whether ``GET {base_url}/models`` gets any HTTP answer within ``within_s`` seconds (an Anthropic or
    Gemini endpoint: its own API's model listing)."""
    return await wire_for(endpoint.api).answers(endpoint, within_s)
