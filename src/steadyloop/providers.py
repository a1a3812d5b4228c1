"""Named providers: their endpoints by name, from the environment, and chained for failover (public).

``provider("mistral")`` is an ``Endpoint`` at Mistral's documented base URL with ``MISTRAL_API_KEY``;
``<NAME>_BASE_URL`` and ``<NAME>_API_KEY`` override the URL and key of each provider, so every candidate
of a chain reaches its own endpoint. ``provider_from_env()`` picks the provider and model from
``STEADYLOOP_FAILOVER``, else ``STEADYLOOP_PROVIDER`` and ``STEADYLOOP_MODEL``. ``failover(...)`` makes a
chain (``"anthropic:claude-x,openai:gpt-y,ollama"``) that ``run_turn``, the loop and the Agent take
wherever they take an endpoint.

What a provider is known to refuse is a prior for the capability latches (``LatchPriors``), set when the
endpoint is made and forgotten by ``reset_capabilities``: nothing here changes a request by a provider's
name, so a provider that starts taking a field is only ever one reset away from being sent it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypedDict, Unpack

from .errors import InvalidInput
from .turn.capabilities import LatchPriors, seed_capabilities
from .wire.endpoints import Endpoint, Target

__all__ = [
    "PROVIDERS",
    "EndpointOptions",
    "ProviderPreset",
    "UnknownProvider",
    "failover",
    "preset_name",
    "provider",
    "provider_from_env",
]


@dataclass(frozen=True, slots=True)
class ProviderPreset:
    """What steadyloop knows of a provider before talking to it.

    Attributes:
        name: the name ``provider`` takes.
        base_url: the documented default base URL.
        api: the wire format it is spoken to in.
        env_prefix: ``<env_prefix>_BASE_URL`` and ``<env_prefix>_API_KEY`` override URL and key.
        key_env: further variables the provider's own tools read the key from, tried after ours.
        local: a server on this machine that needs no key.
        priors: latches set before the first request (what it is known to refuse).
    """

    name: str
    base_url: str
    api: Literal["openai", "anthropic", "gemini"] = "openai"
    env_prefix: str = ""
    key_env: tuple[str, ...] = ()
    local: bool = False
    priors: LatchPriors | None = None


#: Every provider ``provider`` knows, by name. Base URLs are the providers' documented defaults (local
#: servers on 127.0.0.1 rather than ``localhost``, which may resolve to an IPv6 address they do not bind).
PROVIDERS: Mapping[str, ProviderPreset] = {
    preset.name: preset
    for preset in (
        # api.openai.com takes max_completion_tokens from every current model and refuses max_tokens
        # from its reasoning models, so that spelling is the prior.
        ProviderPreset(
            "openai",
            "https://api.openai.com/v1",
            env_prefix="OPENAI",
            priors=LatchPriors(legacy_token_limit=False),
        ),
        ProviderPreset("anthropic", "https://api.anthropic.com", api="anthropic", env_prefix="ANTHROPIC"),
        ProviderPreset(
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta",
            api="gemini",
            env_prefix="GEMINI",
            key_env=("GOOGLE_API_KEY",),
        ),
        ProviderPreset("grok", "https://api.x.ai/v1", env_prefix="GROK", key_env=("XAI_API_KEY",)),
        # Mistral refuses fields it does not define (422 "Extra inputs are not permitted"), among them
        # stream_options and prompt_cache_key; it takes max_tokens, the default spelling.
        ProviderPreset(
            "mistral",
            "https://api.mistral.ai/v1",
            env_prefix="MISTRAL",
            priors=LatchPriors(usage_in_stream=False, refused_fields=frozenset({"prompt_cache_key"})),
        ),
        ProviderPreset("openrouter", "https://openrouter.ai/api/v1", env_prefix="OPENROUTER"),
        ProviderPreset("ollama", "http://127.0.0.1:11434/v1", env_prefix="OLLAMA", local=True),
        ProviderPreset("vllm", "http://127.0.0.1:8000/v1", env_prefix="VLLM", local=True),
        ProviderPreset("sglang", "http://127.0.0.1:30000/v1", env_prefix="SGLANG", local=True),
        ProviderPreset("lmstudio", "http://127.0.0.1:1234/v1", env_prefix="LMSTUDIO", local=True),
    )
}

# Other spellings people use for the same providers.
_ALIASES: Mapping[str, str] = {
    "xai": "grok",
    "google": "gemini",
    "lm-studio": "lmstudio",
    "lm_studio": "lmstudio",
}


class UnknownProvider(InvalidInput):
    """A provider name steadyloop does not know.

    Attributes:
        name: the name asked for.
        known: the names it knows.
    """

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(f"unknown provider {name!r}; known: {', '.join(known)}")
        self.name = name
        self.known = tuple(known)


class EndpointOptions(TypedDict, total=False):
    """How long requests to a provider's endpoint may take (see ``Endpoint``)."""

    request_timeout: float | None
    first_token_timeout: float | None


def _preset_named(name: object) -> ProviderPreset:
    if not isinstance(name, str):
        raise UnknownProvider(repr(name), sorted(PROVIDERS))
    key = name.strip().lower()
    found = PROVIDERS.get(_ALIASES.get(key, key))
    if found is None:
        raise UnknownProvider(name, sorted(PROVIDERS))
    return found


def preset_name(name: object) -> str:
    """The preset a provider name (or one of its aliases, any case) stands for, as ``PROVIDERS`` names it.

    Raises:
        UnknownProvider: no preset has that name.
    """
    found = _preset_named(name)
    return next(key for key, preset in PROVIDERS.items() if preset is found)


def provider(
    name: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **options: Unpack[EndpointOptions],
) -> Endpoint:
    """The endpoint of a named provider.

    The URL is ``base_url``, else ``<NAME>_BASE_URL``, else the provider's documented default; the key is
    ``api_key``, else ``<NAME>_API_KEY`` (then the provider's own variable, e.g. ``XAI_API_KEY``). The
    provider's known refusals are set as latch priors for the endpoint. A hosted provider at its own URL
    needs a key: without one, its first request fails before anything is sent (``MissingApiKey``, naming
    the variables), unless a run resolves one first (``api_key=`` on the run or the Agent).

    Args:
        name: one of ``PROVIDERS`` (``openai``, ``anthropic``, ``gemini``, ``grok``, ``mistral``,
            ``openrouter``, ``ollama``, ``vllm``, ``sglang``, ``lmstudio``); case is ignored.
        api_key: the key (default: from the environment).
        base_url: the base URL (default: from the environment, else the preset's).
        env: the environment to read (default: ``os.environ``).
        **options: ``request_timeout``, ``first_token_timeout``.

    Raises:
        UnknownProvider: ``name`` is no provider steadyloop knows; the message lists those it does.
    """
    preset = _preset_named(name)
    env = os.environ if env is None else env
    url = base_url or env.get(f"{preset.env_prefix}_BASE_URL") or preset.base_url
    key = api_key
    variables = (f"{preset.env_prefix}_API_KEY", *preset.key_env)
    if key is None:
        for variable in variables:
            if env.get(variable):
                key = env[variable]
                break
    # The hosted service takes no request without a key, so one without it fails before anything is
    # sent, naming the variables; a local server needs none, and a URL of the caller's own (a proxy
    # that adds the key) may not.
    hosted = not preset.local and url.strip().rstrip("/") == preset.base_url.rstrip("/")
    endpoint = Endpoint(url, api_key=key, api=preset.api, key_env=variables if hosted else ())
    if options:
        endpoint = replace(endpoint, **options)
    if preset.priors is not None:
        seed_capabilities(endpoint, preset.priors)
    return endpoint


def failover(
    chain: str | Sequence[Target | Endpoint | tuple[str, str | None]],
    *,
    env: Mapping[str, str] | None = None,
) -> Target:
    """A failover chain: the first candidate's endpoint with the rest as its fallbacks, and its model.

    Pass the returned ``Target``'s ``endpoint`` and ``model`` wherever an endpoint and model go
    (``Agent(t.endpoint, t.model or ...)``). A candidate without a model asks for the run's model.

    Args:
        chain: ``"provider[:model],..."`` (only the first colon splits, so ``vllm:Qwen/Qwen3-8B`` and
            ``ollama:llama3:8b`` keep their model names whole), or a sequence of ``Target``s, endpoints,
            or ``(provider, model)`` pairs.
        env: the environment the providers' URLs and keys are read from (default: ``os.environ``).

    Raises:
        UnknownProvider: a candidate names no known provider.
        InvalidInput: an empty chain or an empty candidate.
    """
    targets = _targets(chain, env)
    if not targets:
        raise InvalidInput("a failover chain needs at least one candidate")
    first, *rest = targets
    return Target(first.endpoint.with_fallbacks(*rest) if rest else first.endpoint, first.model)


def _targets(
    chain: str | Sequence[Target | Endpoint | tuple[str, str | None]], env: Mapping[str, str] | None
) -> list[Target]:
    if isinstance(chain, str):
        return [_parse_candidate(part, env) for part in chain.split(",")]
    if not isinstance(chain, Sequence):
        raise InvalidInput(f"a failover chain is a string or a sequence, got {type(chain).__name__}")
    targets: list[Target] = []
    for item in chain:
        if isinstance(item, Target):
            targets.append(Target(_flat(item.endpoint), item.model))
        elif isinstance(item, Endpoint):
            targets.append(Target(_flat(item)))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            model = item[1] if isinstance(item[1], str) and item[1].strip() else None
            targets.append(Target(provider(item[0], env=env), model))
        else:
            raise InvalidInput(
                f"a failover candidate is a Target, an Endpoint or (provider, model): {item!r}"
            )
    return targets


def _flat(endpoint: Endpoint) -> Endpoint:
    # A chain inside a chain would be walked by nobody: list its candidates in the outer one instead.
    if endpoint.fallbacks:
        raise InvalidInput("a failover candidate cannot have fallbacks of its own: list them in one chain")
    return endpoint


def _parse_candidate(part: str, env: Mapping[str, str] | None) -> Target:
    text = part.strip()
    name, _, model = text.partition(":")
    if not name.strip():
        raise InvalidInput(f"an empty candidate in the failover chain ({part!r})")
    return Target(provider(name, env=env), model.strip() or None)


def provider_from_env(env: Mapping[str, str] | None = None) -> Target:
    """The provider and model the environment names.

    ``STEADYLOOP_FAILOVER`` (a chain, as ``failover`` reads it) wins; else ``STEADYLOOP_PROVIDER``
    (``openai`` when unset), whose URL ``STEADYLOOP_BASE_URL`` overrides before its own
    ``<NAME>_BASE_URL``. The model is ``STEADYLOOP_MODEL``, else the chain's first model, else ``None``
    (the caller's to choose, or the endpoint's to list). A chain's own first model wins over
    ``STEADYLOOP_MODEL``, which fills in for a first candidate that names none.

    Raises:
        UnknownProvider: the environment names no known provider.
    """
    env = os.environ if env is None else env
    model = env.get("STEADYLOOP_MODEL") or None
    chain = env.get("STEADYLOOP_FAILOVER", "").strip()
    if chain:
        target = failover(chain, env=env)
        return Target(target.endpoint, target.model or model)
    name = env.get("STEADYLOOP_PROVIDER", "").strip() or "openai"
    return Target(provider(name, base_url=env.get("STEADYLOOP_BASE_URL") or None, env=env), model)
