"""The wires, found by ``Endpoint.api``: a new wire is a folder with its ``Wire`` and one line here.

``provider_for`` makes the provider that sends an endpoint's turns: the caller's own
(``Endpoint(transport=...)``), else the one its wire makes. ``windows.py``, ``liveness.py`` and the token
counters (``sizing/counting.py``) ask the endpoint's wire the same way, so nothing above the wire asks
which API an endpoint speaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, MissingApiKey
from . import anthropic, gemini, openai_chat
from .endpoints import Endpoint, missing_key
from .interceptors import Interceptors
from .openai_chat.provider import OpenAIChatProvider
from .provider import Provider, ProviderStream
from .seam import Wire
from .transport.chat_client import ChatClient
from .transport.clients import chat_client_for

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["WIRES", "provider_for", "provider_over", "wire_for"]

#: Every wire, by the ``Endpoint.api`` it serves.
WIRES: dict[str, Wire] = {wire.api: wire for wire in (openai_chat.WIRE, anthropic.WIRE, gemini.WIRE)}

# For each wire, the fields only the others read: what a request built for a whole failover chain carries
# that this wire must not send on.
_OTHERS: dict[str, frozenset[str]] = {
    api: frozenset().union(*(other.own_fields for other in WIRES.values() if other.api != api))
    for api in WIRES
}


def wire_for(api: str) -> Wire:
    """The wire that speaks ``api``.

    Raises:
        InvalidInput: no wire speaks it.
    """
    wire = WIRES.get(api)
    if wire is None:
        raise InvalidInput(f"no wire speaks api {api!r}; known: {', '.join(WIRES)}")
    return wire


def provider_for(endpoint: Endpoint) -> Provider:
    """The provider that sends this endpoint's turns: the caller's own, else the one its ``api`` names.

    An endpoint that needs a key it was not given (``Endpoint.key_env``) gets a provider whose every turn
    fails with ``MissingApiKey`` before anything is sent: in a failover chain that hands the turn on.

    Raises:
        InvalidInput: the ``api`` needs an extra that is not installed (the message names the install).
    """
    if endpoint.transport is not None:
        return endpoint.transport
    missing = missing_key(endpoint)
    if missing is not None:
        return _Unkeyed(endpoint.base_url, missing)
    return wire_for(endpoint.api).provider(endpoint, _OTHERS[endpoint.api])


def provider_over(client: AsyncOpenAI | ChatClient) -> Provider:
    """The chat-completions provider over a client of the caller's (an SDK client, or a ``ChatClient``)."""
    return OpenAIChatProvider(chat_client_for(client), _OTHERS["openai"])


class _Unkeyed:
    """The provider of an endpoint without the key it needs: nothing is ever sent."""

    __slots__ = ("_endpoint", "_missing")

    def __init__(self, endpoint: str, missing: MissingApiKey) -> None:
        self._endpoint = endpoint
        self._missing = missing

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def open_turn(
        self,
        body: Mapping[str, Any],
        *,
        connect_timeout: float | None,
        interceptors: Interceptors | None = None,
    ) -> ProviderStream:
        model = body.get("model")
        missing = self._missing
        raise MissingApiKey(
            str(missing),
            variables=missing.variables,
            endpoint=missing.endpoint,
            model=model if isinstance(model, str) else None,
        )
