"""Which endpoint and model a command talks to: flags, environment, config file, or the bundled model.

The first of these that names an endpoint wins:

0. ``--provider NAME[:MODEL][,NAME[:MODEL]...]``: a named provider (``steadyloop.PROVIDERS``), or a
   failover chain of them, each at ``<NAME>_BASE_URL`` with ``<NAME>_API_KEY``; ``--base-url`` and
   ``--api-key`` then override the first one's URL and key;
1. ``--api anthropic|gemini`` without a URL: that provider's own service (key from ``--api-key``, else
   ``ANTHROPIC_API_KEY`` / ``GEMINI_API_KEY``);
2. ``--base-url URL`` (key from ``--api-key`` or ``OPENAI_API_KEY``; with ``--api anthropic|gemini`` the URL
   speaks that wire and the key comes from that provider's variable);
3. ``-e NAME`` / ``--local-preset NAME``: an endpoint of the config file by that name, else a local preset
   (``llamacpp`` 8080, ``vllm`` 8000, ``sglang`` 30000, ``ollama`` 11434, ``lmstudio`` 1234);
4. ``STEADYLOOP_FAILOVER`` or ``STEADYLOOP_PROVIDER`` (``steadyloop.provider_from_env``);
5. ``OPENAI_BASE_URL`` (key from ``OPENAI_API_KEY``);
6. the config file's ``default`` endpoint;
7. the bundled local model, started on first use and left running for the next command; it stops by
   itself after ``STEADYLOOP_LOCAL_IDLE`` seconds without a request (15 minutes; ``0`` never).

The model is ``-m``, else the first model a ``--provider`` chain names, else ``STEADYLOOP_MODEL``, else the
endpoint's configured one, else the only (or first) model the endpoint lists at ``/v1/models``.

The config file is ``$XDG_CONFIG_HOME/steadyloop/config.toml`` (``~/.config/steadyloop/config.toml``)::

    default = "work"

    [endpoints.work]
    base_url = "https://llm.example.com/v1"
    api_key_env = "WORK_LLM_KEY"      # the key is read from this variable, never stored in the file
    model = "big-model"
    context_length = 131072
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import Endpoint, InvalidInput, failover, list_models, provider_from_env
from ..local import DEFAULT_MODEL, default_model, key_for
from ..wire import API, require_key
from .files import read_text_if_any

__all__ = [
    "BUNDLED",
    "DEFAULT_LOCAL_IDLE",
    "DEFAULT_LOCAL_MODEL",
    "PRESETS",
    "EndpointChoice",
    "Resolved",
    "config_path",
    "discover_model",
    "load_config",
    "local_idle",
    "local_model",
    "resolve",
    "with_model",
]

#: Local servers' default ports, by the names ``-e`` and ``--local-preset`` take.
PRESETS: Mapping[str, int] = {
    "llamacpp": 8080,
    "vllm": 8000,
    "sglang": 30000,
    "ollama": 11434,
    "lmstudio": 1234,
}

#: The label of the bundled local model, the endpoint used when nothing else is named.
BUNDLED = "bundled"

#: A native wire's own service and the variable its key is read from, for ``--api`` without a URL.
NATIVE_DEFAULTS: Mapping[str, tuple[str, str]] = {
    "anthropic": ("https://api.anthropic.com/v1", "ANTHROPIC_API_KEY"),
    "gemini": ("https://generativelanguage.googleapis.com/v1beta", "GEMINI_API_KEY"),
}

#: Seconds without a request after which the bundled server the CLI started stops by itself.
DEFAULT_LOCAL_IDLE = 15 * 60.0
#: The model the steadyloop command serves when no endpoint is named, as every other entry point does
#: (``STEADYLOOP_LOCAL_MODEL`` or ``local up --model`` pick another of ``steadyloop.local.models.MODELS``).
DEFAULT_LOCAL_MODEL = DEFAULT_MODEL


@dataclass(frozen=True, slots=True)
class EndpointChoice:
    """What the command line asked for; every field may be absent.

    Attributes:
        name: ``-e NAME`` or ``--local-preset NAME``.
        base_url: ``--base-url``.
        api_key: ``--api-key``.
        model: ``-m``.
        provider: ``--provider``: a provider name or a failover chain of them.
        api: ``--api``: the wire format of ``--base-url`` (or of the provider's own URL when no URL is
            given); ``None`` is chat completions.
    """

    name: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    provider: str | None = None
    api: API | None = None


@dataclass(frozen=True, slots=True)
class Resolved:
    """The endpoint a command talks to.

    Attributes:
        endpoint: base URL and key.
        model: the model to name in requests; ``None`` until ``with_model`` asks the endpoint.
        label: where it came from, for messages (``--base-url``, ``work``, ``bundled``, ...).
        context_length: the window the config file states, if it does.
    """

    endpoint: Endpoint
    model: str | None
    label: str
    context_length: int | None = None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the config file is looked for."""
    env = os.environ if env is None else env
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "steadyloop" / "config.toml"


def local_idle(env: Mapping[str, str] | None = None) -> float:
    """The bundled server's idle stop in seconds: ``STEADYLOOP_LOCAL_IDLE``, else 15 minutes; ``0`` never.

    Raises:
        InvalidInput: the variable is not a number of seconds.
    """
    env = os.environ if env is None else env
    text = env.get("STEADYLOOP_LOCAL_IDLE", "").strip()
    if not text:
        return DEFAULT_LOCAL_IDLE
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise InvalidInput(f"STEADYLOOP_LOCAL_IDLE must be seconds (0 = never stop), not {text!r}")
    return seconds


def local_model(env: Mapping[str, str] | None = None) -> str:
    """The bundled model to serve: ``STEADYLOOP_LOCAL_MODEL``, else :data:`DEFAULT_LOCAL_MODEL`.

    Raises:
        InvalidInput: the variable names no model steadyloop can install.
    """
    return default_model(env)


def load_config(path: Path) -> dict[str, Any]:
    """The config file's contents, ``{}`` when there is none.

    Raises:
        InvalidInput: it cannot be read, is not valid TOML, or a value in it has the wrong type (an
            endpoint without a ``base_url``, a ``model`` that is no string, a ``context_length`` that is no
            positive integer, a ``default`` naming no endpoint).
    """
    text = read_text_if_any(path, "config file")
    if text is None:
        return {}
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise InvalidInput(f"{path} is not valid TOML: nested too deep") from None
    endpoints = data.get("endpoints", {})
    if not isinstance(endpoints, dict):
        raise InvalidInput(f"{path}: [endpoints] must be a table of named endpoints")
    for name, entry in endpoints.items():
        _check_entry(path, name, entry)
    default = data.get("default")
    if default is not None and not isinstance(default, str):
        raise InvalidInput(f"{path}: default must be the name of an endpoint, not {type(default).__name__}")
    if default is not None and default not in endpoints and default not in PRESETS:
        raise InvalidInput(f"{path}: default = {default!r} names no endpoint in the file")
    return data


def _check_entry(path: Path, name: str, entry: object) -> None:
    """Refuse an endpoint entry whose values would otherwise be dropped for their type, unsaid."""
    if not isinstance(entry, dict) or not isinstance(entry.get("base_url"), str):
        raise InvalidInput(f'{path}: [endpoints.{name}] needs base_url = "http://..."')
    for key in ("api_key_env", "model"):
        if key in entry and not isinstance(entry[key], str):
            raise InvalidInput(f"{path}: [endpoints.{name}] {key} must be a string")
    window = entry.get("context_length")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise InvalidInput(f"{path}: [endpoints.{name}] context_length must be a positive integer")


def _from_entry(
    name: str, entry: Mapping[str, Any], env: Mapping[str, str], api_key: str | None
) -> tuple[Endpoint, str | None, int | None]:
    # load_config checked the types; a config handed to resolve() directly is checked here the same way.
    _check_entry(Path("config"), name, entry)
    key = api_key
    key_env = entry.get("api_key_env")
    if key is None and key_env is not None:
        key = env.get(key_env)
        if not key:
            raise InvalidInput(f"endpoint {name!r} reads its key from ${key_env}, which is not set")
    key = key or key_for(entry["base_url"])
    return Endpoint(entry["base_url"], api_key=key), entry.get("model"), entry.get("context_length")


def _preset(name: str, api_key: str | None) -> Endpoint:
    url = f"http://127.0.0.1:{PRESETS[name]}/v1"
    return Endpoint(url, api_key=api_key or key_for(url))


def resolve(
    choice: EndpointChoice,
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    start_local: Callable[[], tuple[str, str]] | None = None,
) -> Resolved:
    """The endpoint and model to use (see the module docstring for the order).

    Args:
        choice: what the command line asked for.
        env: the environment (``os.environ`` by default).
        config: the config file's contents (read from ``config_path()`` by default).
        start_local: returns the bundled server's ``(base_url, model)``, starting it if need be. It is
            called in the caller's thread, so Ctrl-C stops an install cleanly.

    Raises:
        InvalidInput: an unknown endpoint name or a bad config file.
        MissingApiKey: a hosted provider's endpoint, with no fallback, has no key; the message names the
            variable to set.
    """
    env = os.environ if env is None else env
    config = load_config(config_path(env)) if config is None else config
    endpoints: Mapping[str, Any] = config.get("endpoints", {})
    model = choice.model or env.get("STEADYLOOP_MODEL") or None
    window: int | None = None
    configured: str | None = None
    named_elsewhere = (
        choice.base_url
        or env.get("STEADYLOOP_FAILOVER")
        or env.get("STEADYLOOP_PROVIDER")
        or env.get("OPENAI_BASE_URL")
    )
    name = choice.name or (None if named_elsewhere else config.get("default"))

    label: str
    if choice.provider:
        chain = failover(choice.provider, env=env)
        endpoint, label = chain.endpoint, choice.provider
        if choice.base_url:
            # A URL of the user's own: the provider's key may be added on the way (a proxy), or not needed.
            endpoint = replace(endpoint, base_url=choice.base_url, key_env=())
        if choice.api_key:
            endpoint = replace(endpoint, api_key=choice.api_key)
        model = choice.model or chain.model or model
    elif (
        choice.api is not None
        and choice.api in NATIVE_DEFAULTS
        and not choice.base_url
        and choice.name is None
    ):
        # A native wire with no URL: the provider's own service.
        url, key_name = NATIVE_DEFAULTS[choice.api]
        endpoint = Endpoint(
            url, api_key=choice.api_key or env.get(key_name), api=choice.api, key_env=(key_name,)
        )
        label = str(choice.api)
    elif choice.base_url:
        native = NATIVE_DEFAULTS.get(choice.api or "openai")
        key_name = native[1] if native is not None else "OPENAI_API_KEY"
        # A local server this cache started asks for its own key, which wins over a hosted one in the
        # environment: OPENAI_API_KEY is not sent to a port on this machine that did not ask for it.
        key = choice.api_key or key_for(choice.base_url) or env.get(key_name)
        endpoint = Endpoint(choice.base_url, api_key=key, api=choice.api or "openai")
        label = endpoint.shown_url
    elif name is not None and name in endpoints:
        endpoint, configured, window = _from_entry(name, endpoints[name], env, choice.api_key)
        label = name
    elif name is not None and name in PRESETS:
        endpoint, label = _preset(name, choice.api_key), name
    elif name is not None and name != BUNDLED:
        known = sorted({*endpoints, *PRESETS, BUNDLED})
        raise InvalidInput(f"no endpoint named {name!r}; known: {', '.join(known)}")
    elif name is None and (env.get("STEADYLOOP_FAILOVER") or env.get("STEADYLOOP_PROVIDER")):
        chosen = provider_from_env(env)
        endpoint, model = chosen.endpoint, choice.model or chosen.model
        if choice.api_key:
            endpoint = replace(endpoint, api_key=choice.api_key)
        label = env.get("STEADYLOOP_FAILOVER") or env.get("STEADYLOOP_PROVIDER") or ""
    elif name is None and env.get("OPENAI_BASE_URL"):
        url = env["OPENAI_BASE_URL"]
        endpoint = Endpoint(url, api_key=choice.api_key or key_for(url) or env.get("OPENAI_API_KEY"))
        label = "OPENAI_BASE_URL"
    else:
        if start_local is None:
            raise InvalidInput("no endpoint configured: pass --base-url URL -m MODEL or set OPENAI_BASE_URL")
        url, alias = start_local()
        endpoint = Endpoint(url, api_key=key_for(url), request_timeout=None)
        label, configured = BUNDLED, alias
    if not endpoint.fallbacks:
        # Said now, in one line, rather than by the first request (a chain hands a keyless one on).
        require_key(endpoint)
    return Resolved(endpoint=endpoint, model=model or configured, label=label, context_length=window)


async def with_model(resolved: Resolved) -> Resolved:
    """``resolved`` with its model named, asking the endpoint when nobody said which.

    Raises:
        EndpointError: the endpoint could not be asked.
        InvalidInput: it lists no models.
    """
    if resolved.model:
        return resolved
    return replace(resolved, model=await discover_model(resolved.endpoint))


async def discover_model(endpoint: Endpoint) -> str:
    """The only model the endpoint lists, or its first.

    Raises:
        EndpointError: it could not be asked.
        InvalidInput: it lists nothing.
    """
    models = await list_models(endpoint)
    if not models:
        raise InvalidInput(f"{endpoint.shown_url} lists no models; name one with -m MODEL")
    return models[0].id
