"""The wire: endpoints, the provider seam and the wires behind it, and how servers' failures read (public).

Knows an API's shape and nothing of tools or loops. What a user needs of it is importable from here:
``Endpoint`` and ``Target`` (and ``require_key``, refusing one that needs a key it was not given); the seam (``Provider``, ``provider_for``, ``provider_from``) and what else a
wire answers (``Wire``, ``ModelInfo``, ``list_models``, ``context_limit_for``, ``endpoint_answers``); the
pooled clients (``configure_clients``, ``aclose_clients``, ``get_client``); ``classify_failure``; the
host's ``Interceptors``; and the tool-schema compat a strict or grammar server needs
(``sanitize_tools``, ``relax_tools``). The modules under it (one folder per wire, ``transport/``) are
internal.
"""

from .custom import StreamFunction, provider_from
from .endpoints import (
    API,
    APIS,
    DEFAULT_REQUEST_TIMEOUT,
    NO_KEY,
    ApiKeyResolver,
    Endpoint,
    Target,
    endpoint_id,
    endpoint_key,
    missing_key,
    require_key,
    with_resolved_key,
)
from .failures import Failure, classify_failure
from .interceptors import (
    DROP,
    AssistantEventInterceptor,
    Interceptors,
    PayloadInterceptor,
    ResponseInfo,
    ResponseInterceptor,
    SseEvent,
    SseEventInterceptor,
)
from .liveness import endpoint_answers
from .provider import Provider, ProviderStream
from .registry import WIRES, provider_for, wire_for
from .schema_compat import is_grammar_error, relax_tools, sanitize_tools
from .seam import ModelInfo, TokenCounter, Wire
from .transport.clients import ClientSettings, aclose_clients, client_settings, configure_clients, get_client
from .windows import context_limit_for, list_models, reset_windows

__all__ = [
    "API",
    "APIS",
    "DEFAULT_REQUEST_TIMEOUT",
    "DROP",
    "NO_KEY",
    "WIRES",
    "ApiKeyResolver",
    "AssistantEventInterceptor",
    "ClientSettings",
    "Endpoint",
    "Failure",
    "Interceptors",
    "ModelInfo",
    "PayloadInterceptor",
    "Provider",
    "ProviderStream",
    "ResponseInfo",
    "ResponseInterceptor",
    "SseEvent",
    "SseEventInterceptor",
    "StreamFunction",
    "Target",
    "TokenCounter",
    "Wire",
    "aclose_clients",
    "classify_failure",
    "client_settings",
    "configure_clients",
    "context_limit_for",
    "endpoint_answers",
    "endpoint_id",
    "endpoint_key",
    "get_client",
    "is_grammar_error",
    "list_models",
    "missing_key",
    "provider_for",
    "provider_from",
    "relax_tools",
    "require_key",
    "reset_windows",
    "sanitize_tools",
    "wire_for",
    "with_resolved_key",
]
