"""Whether an endpoint answers at all: the question asked of one that has been silent for too long.

A model prefilling a long prompt on a CPU and an endpoint that accepted the connection and went away look
the same from the stream: nothing arrives. A second, cheap request tells them apart. Any HTTP answer
counts, a refusal included: only a server that is there can refuse.
"""

from __future__ import annotations

import asyncio

from .endpoints import Endpoint
from .transport.clients import lease_client

__all__ = ["endpoint_answers"]


async def endpoint_answers(endpoint: Endpoint, within_s: float) -> bool:
    """Whether ``GET {base_url}/models`` gets any HTTP answer within ``within_s`` seconds (an Anthropic or
    Gemini endpoint: its own API's model listing)."""
    if endpoint.api != "openai":
        from .native_models import native_answers

        return await native_answers(endpoint, within_s)
    # Imported here: the SDK is loaded only by what sends through it (about a third of a second).
    import httpx2
    import openai

    try:
        async with asyncio.timeout(within_s):
            with lease_client(endpoint) as client:
                await client.get(
                    "/models", cast_to=httpx2.Response, options={"max_retries": 0, "timeout": within_s}
                )
    except openai.APIStatusError:
        return True
    except (openai.APIError, httpx2.HTTPError, OSError, TimeoutError):
        return False
    return True
