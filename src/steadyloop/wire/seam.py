"""What a wire answers besides sending a turn, in its own API's terms: one ``Wire`` value per API.

The layers above ask any endpoint the same few things: which models it lists (``ModelInfo``), how big a
model's window is, whether it is there at all (asked of an endpoint that has been silent too long), and,
where its API counts tokens itself, a ``TokenCounter``. Each wire answers them in its own folder
(``openai_chat/``, ``anthropic/``, ``gemini/``) and gathers the answers, with how to make its
``Provider``, in one ``Wire``; ``registry.py`` finds it by ``Endpoint.api``, so nothing above the wire
asks which API an endpoint speaks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .endpoints import Endpoint
from .provider import Provider

__all__ = ["COUNT_TIMEOUT_S", "LISTING_TIMEOUT", "ModelInfo", "TokenCounter", "Wire"]

#: Seconds a provider's count endpoint has to answer: a count that takes longer is worth less than the
#: estimate, and a dead endpoint must not hold the request (or a failover) back for long.
COUNT_TIMEOUT_S = 10.0

#: What a listing request is bounded by when the endpoint waits forever for a reply.
LISTING_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model an endpoint lists.

    Attributes:
        id: the name to send as a request's ``model``.
        context_length: the window the listing names for it, when it names one (see ``windows`` for which
            field counts on which server).
        owned_by: the listing's ``owned_by``, which says which server kind is answering
            (``"llamacpp"``, ``"vllm"``, ``"library"`` for Ollama, ...).
        aliases: other names the server answers to for this model.
    """

    id: str
    context_length: int | None = None
    owned_by: str | None = None
    aliases: tuple[str, ...] = ()


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the prompt tokens of a chat-completions request body (the reply ceiling not included)."""

    @property
    def name(self) -> str:
        """What the count is measured against, e.g. ``estimate`` or ``tiktoken:o200k_base``."""
        ...

    async def count(self, body: Mapping[str, Any]) -> int:
        """The prompt's tokens. Raises ``TokenizerUnavailable`` when this counter cannot count."""
        ...


@dataclass(frozen=True, slots=True)
class Wire:
    """One API's wire: everything that differs by ``Endpoint.api``.

    Attributes:
        api: the ``Endpoint.api`` it serves.
        provider: makes the provider that sends an endpoint's turns; told the request fields other wires
            read of their own (a failover chain's one request carries every candidate's), which a wire
            that passes unknown fields on must take out.
        list_models: the models the endpoint lists, every page of them.
        window: the window the endpoint names for a model; ``None`` when it names none or cannot be
            asked (never raises for a server that cannot or will not say).
        answers: whether the endpoint gives any HTTP answer within the seconds given.
        forget: forgets every listing, window and miss kept.
        token_counter: the API's own count of a request, where it has one; raises ``TokenizerUnavailable``
            when it cannot count here (its SDK is not installed). ``None``: the API counts nothing itself.
        own_fields: top-level request fields only this wire reads.
    """

    api: str
    provider: Callable[[Endpoint, frozenset[str]], Provider]
    list_models: Callable[[Endpoint], Awaitable[list[ModelInfo]]]
    window: Callable[[Endpoint, str], Awaitable[int | None]]
    answers: Callable[[Endpoint, float], Awaitable[bool]]
    forget: Callable[[], None]
    token_counter: Callable[[Endpoint, str | None], TokenCounter] | None = None
    own_fields: frozenset[str] = frozenset()
