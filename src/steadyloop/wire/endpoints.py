"""What an endpoint is: a base URL and an API key, plus how long a request may take.

The key is part of an endpoint's identity, not only of how it is paid for: a router may send two keys to
two different backends, so what one of them refused says nothing about the other. An absent and an empty
key read the same (``NO_KEY``), so a local server with no key is one endpoint however its caller spells it.

An endpoint may name fallbacks (``Endpoint.fallbacks``): where a turn goes when this endpoint fails before
answering. They are not part of its identity: the latches, the calibration and the context window of a run
are the first endpoint's, and each fallback keeps its own under its own (endpoint, model).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args
from urllib.parse import urlsplit

from ..errors import InvalidInput, MissingApiKey, redact_url

if TYPE_CHECKING:
    from .provider import Provider

__all__ = [
    "API",
    "APIS",
    "DEFAULT_REQUEST_TIMEOUT",
    "NO_KEY",
    "ApiKeyResolver",
    "Endpoint",
    "Target",
    "endpoint_id",
    "endpoint_key",
    "missing_key",
    "require_key",
    "with_resolved_key",
]

#: Called before a request for the key to send (short-lived tokens); may be async.
ApiKeyResolver: TypeAlias = Callable[[], "str | Awaitable[str]"]

#: The key sent to an endpoint that needs none; the SDK insists on some bearer token.
NO_KEY = "no-key"

API: TypeAlias = Literal["openai", "anthropic", "gemini"]
"""The wire format an endpoint speaks: OpenAI chat completions, Anthropic Messages, Gemini generateContent."""

APIS: tuple[str, ...] = get_args(API)

#: Seconds of silence a streamed request may spend before it is called silent.
DEFAULT_REQUEST_TIMEOUT = 120.0


@dataclass(frozen=True, slots=True, repr=False)
class Endpoint:
    """An endpoint: where requests go, with which key, in which wire format.

    Its ``repr`` shows neither the key nor a password in the URL (``shown_url`` is the URL to print).

    Attributes:
        base_url: e.g. ``http://127.0.0.1:8080/v1``; a trailing slash is ignored.
        api_key: the key; ``None`` and ``""`` both mean no key.
        request_timeout: seconds of silence allowed mid-stream, and the bound on calls that do not
            stream. ``None`` or ``0`` waits forever (what a slow local model may need).
        first_token_timeout: seconds one attempt allows before the first chunk that carries something
            (prefill on a CPU takes minutes); ``None`` means five times ``request_timeout``. ``run_turn``
            also bounds the silence over all of a turn's attempts (``RetryPolicy.first_token_budget_s``,
            100 s by default), so a dead endpoint fails within two minutes rather than once per attempt;
            raise both for a model that is silent for longer before it answers.
        api: the wire format: ``"openai"`` (chat completions, what every local server speaks),
            ``"anthropic"`` (Messages, ``pip install 'steadyloop[anthropic]'``) or ``"gemini"``
            (``streamGenerateContent``, over its REST API: nothing to install).
        transport: a provider of the caller's own that sends every request to this endpoint instead of
            the one ``api`` names (a proxy, a recorder, an in-process model); see
            ``steadyloop.wire.provider.Provider``. Not part of the endpoint's identity or repr.
        fallbacks: where a turn goes, in order, when this endpoint fails before its first event (see
            ``steadyloop.failover``); a fallback without a model asks for the run's model. Empty by
            default.
        key_env: the environment variables its key is read from, when it needs one: a request to it
            without a key fails before anything is sent (``MissingApiKey``, naming them). ``sl.provider``
            and ``Endpoint.from_env`` set it for a hosted provider at its own URL; empty (no key needed)
            by default. Not part of the endpoint's identity or repr.
    """

    base_url: str
    api_key: str | None = None
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT
    first_token_timeout: float | None = None
    api: API = "openai"
    transport: Provider | None = field(default=None, compare=False)
    fallbacks: tuple[Target, ...] = ()
    key_env: tuple[str, ...] = field(default=(), compare=False)
    # endpoint_key, worked out once: every request looks its endpoint's state up by it several times.
    _key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.strip():
            raise InvalidInput("an endpoint needs a base_url such as http://127.0.0.1:8080/v1")
        url = self.base_url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"base_url must start with http:// or https://, got {redact_url(self.base_url)!r}"
            )
        _check_url(url)
        object.__setattr__(self, "base_url", url)
        if self.api_key is not None and not (
            isinstance(self.api_key, str) and self.api_key.isascii() and self.api_key.isprintable()
        ):
            # A key goes into a header: a newline or NUL would be refused by the HTTP library (or split the
            # header), a lone surrogate or a letter outside ASCII cannot be encoded by some of them.
            raise InvalidInput(
                "api_key must be printable ASCII (no newline, NUL or other control character; "
                "a key read from a file may end in a newline)"
            )
        for name in ("request_timeout", "first_token_timeout"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int | float) or value < 0):
                raise InvalidInput(f"{name} must be a number of seconds >= 0 or None, got {value!r}")
        if self.api not in APIS:
            raise InvalidInput(f"api must be one of {', '.join(APIS)}, got {self.api!r}")
        if self.transport is not None and not callable(getattr(self.transport, "open_turn", None)):
            raise InvalidInput(
                f"transport must be a steadyloop Provider (with open_turn), got {type(self.transport).__name__}"
            )
        fallbacks = tuple(self.fallbacks) if isinstance(self.fallbacks, Iterable) else None
        if fallbacks is None or not all(isinstance(t, Target) for t in fallbacks):
            raise InvalidInput("fallbacks must be a sequence of Target(endpoint, model)")
        if any(t.endpoint.fallbacks for t in fallbacks):
            raise InvalidInput(
                "a fallback cannot have fallbacks of its own: list every candidate in one chain"
            )
        object.__setattr__(self, "fallbacks", fallbacks)
        names = tuple(self.key_env) if isinstance(self.key_env, Iterable) else None
        if names is None or isinstance(self.key_env, str) or not all(isinstance(n, str) and n for n in names):
            raise InvalidInput("key_env must be a sequence of environment variable names")
        object.__setattr__(self, "key_env", names)
        object.__setattr__(self, "_key", _key_of(url, self.api_key or NO_KEY, self.api))

    def __repr__(self) -> str:
        key = "'***'" if self.api_key else "None"
        chain = f", fallbacks={len(self.fallbacks)}" if self.fallbacks else ""
        return (
            f"Endpoint(base_url={self.shown_url!r}, api_key={key}, request_timeout={self.request_timeout!r}, "
            f"first_token_timeout={self.first_token_timeout!r}, api={self.api!r}{chain})"
        )

    def with_fallbacks(self, *fallbacks: Target | Endpoint) -> Endpoint:
        """This endpoint with ``fallbacks`` to hand a turn to, in order (an ``Endpoint`` alone asks for the
        run's model)."""
        targets = tuple(f if isinstance(f, Target) else Target(f) for f in fallbacks)
        return replace(self, fallbacks=targets)

    @property
    def shown_url(self) -> str:
        """The base URL to print or log: any credentials in it written as ``***``."""
        return redact_url(self.base_url)

    @property
    def key(self) -> str:
        """The key to send: the caller's, or ``NO_KEY``."""
        return self.api_key or NO_KEY

    @property
    def idle_timeout(self) -> float | None:
        """Seconds of silence allowed once the stream is talking; ``None`` waits forever."""
        return self.request_timeout or None

    @property
    def first_chunk_timeout(self) -> float | None:
        """Seconds allowed before the first chunk that carries something; ``None`` waits forever."""
        if self.first_token_timeout:
            return self.first_token_timeout
        return self.request_timeout * 5 if self.request_timeout else None

    @classmethod
    def from_env(cls, base_url: str | None = None, api_key: str | None = None) -> Endpoint:
        """An endpoint from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` where the arguments leave gaps."""
        url = base_url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_URL
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        # OpenAI's own service takes no request without a key; a server of the caller's own may.
        needs = ("OPENAI_API_KEY",) if url.rstrip("/") == _OPENAI_URL else ()
        return cls(base_url=url, api_key=key, key_env=needs)


_OPENAI_URL = "https://api.openai.com/v1"


def missing_key(endpoint: Endpoint) -> MissingApiKey | None:
    """The error for a request to ``endpoint`` without the key it needs, or ``None`` when it has one or
    needs none (see ``Endpoint.key_env``). A caller's own ``transport`` brings its own auth."""
    if not endpoint.key_env or endpoint.api_key or endpoint.transport is not None:
        return None
    names = endpoint.key_env
    variables = names[0] + (f" (or {', '.join(names[1:])})" if len(names) > 1 else "")
    return MissingApiKey(
        f"no API key for {endpoint.shown_url}: set {variables}, or pass the key (api_key=...)",
        variables=names,
        endpoint=endpoint.base_url,
    )


def require_key(endpoint: Endpoint) -> None:
    """Refuse, before anything is sent, an endpoint that needs a key and has none.

    Raises:
        MissingApiKey: it has no key and needs one; the message names the variables to set.
    """
    error = missing_key(endpoint)
    if error is not None:
        raise error


@dataclass(frozen=True, slots=True)
class Target:
    """Where a turn can go: an endpoint and the model to ask for there.

    Attributes:
        endpoint: the endpoint (its own ``fallbacks`` are those of a chain it heads).
        model: the model; ``None`` asks for the run's model (right for a chain within one provider:
            model names rarely carry across providers).
    """

    endpoint: Endpoint
    model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.endpoint, Endpoint):
            raise InvalidInput(f"a target needs an Endpoint, got {type(self.endpoint).__name__}")
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise InvalidInput(f"a target's model must be a non-empty name or None, got {self.model!r}")


def _check_url(url: str) -> None:
    """A base URL the HTTP libraries can send to: a host, a port that is a number in range, nothing that
    is no part of a URL. The HTTP libraries raised ValueError or UnicodeError for these, at the request."""
    shown = redact_url(url)
    if not url.isprintable() or any(c.isspace() for c in url):
        raise InvalidInput(f"base_url holds a space or a control character: {shown!r}")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        host.encode("idna")
        _ = parts.port  # reading it raises ValueError for a port that is no number in range
    except (ValueError, UnicodeError):
        raise InvalidInput(f"base_url is not a URL with a host and a valid port: {shown!r}") from None
    if not host:
        raise InvalidInput(f"base_url is not a URL with a host and a valid port: {shown!r}")


def endpoint_key(endpoint: Endpoint | str, api_key: str | None = None, api: str = "openai") -> str:
    """The in-process identity of an endpoint: its URL, key (in the clear) and wire format.

    Use it to key per-endpoint state of your own; write ``endpoint_id`` instead anywhere it is stored.
    """
    if isinstance(endpoint, Endpoint):
        return endpoint._key
    return _key_of(endpoint.strip().rstrip("/"), api_key or NO_KEY, api)


def _key_of(url: str, key: str, api: str) -> str:
    # The OpenAI key keeps its old two-part shape: stored endpoint ids stay what they were.
    parts = [url, key] if api == "openai" else [url, key, api]
    return json.dumps(parts, separators=(",", ":"))


def endpoint_id(endpoint: Endpoint | str, api_key: str | None = None, api: str = "openai") -> str:
    """A SHA-256 digest of ``endpoint_key``: names the endpoint without carrying its key."""
    return hashlib.sha256(endpoint_key(endpoint, api_key, api).encode()).hexdigest()


async def with_resolved_key(endpoint: Endpoint, resolve: ApiKeyResolver | None) -> Endpoint:
    """``endpoint`` with the key ``resolve`` gives now, or as it is when there is no resolver."""
    if resolve is None:
        return endpoint
    key = resolve()
    if inspect.isawaitable(key):
        key = await key
    return replace(endpoint, api_key=key)
