"""How big a model's context window is, asked of the server that serves it.

The window that matters is the one the server is serving the model in, not the one it was trained for:
a 256k model started with ``-c 16384`` refuses anything past 16k. ``context_limit_for`` takes the
operator's own number first (it wins outright and costs no request), then asks the endpoint in its own
API's terms (its wire's ``window``): a chat-completions server for the window it serves and then its
listing (``openai_chat/models.py``), an Anthropic or Gemini endpoint for the window its API names
(``listings.py``). Network I/O; call it before a run, not before every request.

Where the endpoint names none: a window an overflow refusal stated ("maximum context length is 128000
tokens", ``learn_window``), which is asked before the endpoint, else the window the model is documented
with (``known_windows``: hosted models such as api.openai.com's, whose listing names no window).
"""

from __future__ import annotations

from .endpoints import Endpoint, endpoint_key, missing_key, require_key
from .known_windows import known_window
from .registry import WIRES, wire_for
from .seam import LISTING_TIMEOUT, ModelInfo

__all__ = [
    "LISTING_TIMEOUT",
    "ModelInfo",
    "context_limit_for",
    "learn_window",
    "list_models",
    "reset_windows",
]

# Windows endpoints stated in overflow refusals, per endpoint and model: kept for every later run.
_learned: dict[tuple[str, str], int] = {}


def reset_windows() -> None:
    """Forget every cached listing, remembered miss and latched route."""
    _learned.clear()
    for wire in WIRES.values():
        wire.forget()


def learn_window(endpoint: Endpoint, model: str | None, tokens: int) -> None:
    """Keep the window an endpoint stated for ``model`` in a refusal, for every later run to size to."""
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
        _learned[(endpoint_key(endpoint), model or "")] = tokens


async def context_limit_for(endpoint: Endpoint, model: str, operator_value: int | None = None) -> int | None:
    """The context window, in tokens, that a request to this model must fit.

    Args:
        endpoint: the endpoint serving the model.
        model: the model the requests name.
        operator_value: the operator's own number; above zero it is the answer and nothing is asked.

    Returns:
        The window, or ``None`` when neither the operator nor the server says. Never raises for a server
        that cannot or will not say.
    """
    if (
        isinstance(operator_value, int | float)
        and not isinstance(operator_value, bool)
        and operator_value > 0
    ):
        return int(operator_value)
    learned = _learned.get((endpoint_key(endpoint), model or ""))
    if learned is not None:
        return learned
    if missing_key(endpoint) is not None:
        return None  # nothing is sent without the key it needs; the request says so when it is made
    return await wire_for(endpoint.api).window(endpoint, model) or known_window(model)


async def list_models(endpoint: Endpoint) -> list[ModelInfo]:
    """The models an endpoint lists, fetched now (and kept for ``context_limit_for``).

    A chat-completions endpoint is asked its ``/v1/models``; an Anthropic or Gemini endpoint its own
    listing (every page of it), each model's window read from ``max_input_tokens`` or ``inputTokenLimit``.

    Raises:
        MissingApiKey: the endpoint needs a key it was not given (nothing was sent).
        EndpointRefused: the endpoint answered with an error status, or with something that is not a
            model listing.
        EndpointUnavailable: it could not be reached, or answered with a transient status.
    """
    require_key(endpoint)
    return await wire_for(endpoint.api).list_models(endpoint)
