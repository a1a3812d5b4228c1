"""How many tokens a chat-completions request weighs, guessed from its characters (sans-I/O).

Nothing here talks to a server: a token count is characters over a divisor. Four characters a token is
right for English prose and low for what a tool-using run is made of (JSON schemas and tool results pack
closer to two or three), so callers that can should pass the ratio measured for their model
(``chars_per_token_for``) rather than the default.

What is counted, the same way everywhere in this module:

- every string the server reads: message text and text parts, an assistant's ``reasoning_content``,
  the name and arguments of each tool call, a message's ``name``;
- ``MESSAGE_OVERHEAD_CHARS`` per message for the chat template's framing (role markers and separators),
  counted as characters rather than tokens so that a measured ratio absorbs the template's real cost;
- the JSON of the declared tools, as templates render it (``json.dumps`` with its default separators);
- ``IMAGE_TOKENS`` per image, a fixed allowance: what an image costs depends on its size and on the
  model's vision encoder, none of which the body says;
- for ``request_tokens`` only, the reply ceiling under whichever spelling the body carries it.

Other content parts (audio, files) are not counted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_CHARS",
    "ContextParts",
    "ContextTokens",
    "context_chars",
    "context_tokens",
    "estimate_tokens",
    "reply_ceiling",
    "request_tokens",
    "tool_schema_tokens",
]

#: The divisor used until a model's own ratio has been measured.
CHARS_PER_TOKEN = 4

#: The tokens allowed for each image: OpenAI's price of one 512-pixel tile at high detail plus the base
#: (85 + 170 * 4), which is also in the range local vision encoders use for a mid-sized picture.
IMAGE_TOKENS = 765

#: Characters allowed per message for the template's framing: about four tokens at the default ratio.
MESSAGE_OVERHEAD_CHARS = 16

_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "function"})


@dataclass(frozen=True, slots=True)
class ContextParts:
    """The characters of a request body's prompt, cut along the four things a caller can act on.

    Counts are exact for what this module weighs (see the module docstring), framing included.

    Attributes:
        system: system and developer messages.
        tools: the JSON of the declared tool schemas.
        tool_results: the tool messages.
        history: everything else, the arguments of the calls the assistant made included.
        images: how many images the messages carry (weighed as tokens, not characters).
        tool_result_images: how many of those images sit in tool messages.
    """

    system: int = 0
    tools: int = 0
    tool_results: int = 0
    history: int = 0
    images: int = 0
    tool_result_images: int = 0

    @property
    def total(self) -> int:
        """All the characters the prompt weighs."""
        return self.system + self.tools + self.tool_results + self.history


@dataclass(frozen=True, slots=True)
class ContextTokens:
    """What is filling the window, in tokens; the four parts always sum exactly to ``total``.

    Attributes:
        system: system and developer messages (shorten the prompt).
        tools: declared tool schemas (load them on demand).
        tool_results: tool messages (prune them).
        history: everything else (compact it).
        total: the prompt's tokens.
    """

    system: int
    tools: int
    tool_results: int
    history: int
    total: int


def _check_ratio(chars_per_token: float) -> float:
    if (
        isinstance(chars_per_token, bool)
        or not isinstance(chars_per_token, int | float)
        or not math.isfinite(chars_per_token)
        or chars_per_token <= 0
    ):
        raise InvalidInput(f"chars_per_token must be a number above zero, got {chars_per_token!r}")
    return float(chars_per_token)


def _tokens(chars: int, chars_per_token: float) -> int:
    return math.ceil(chars / chars_per_token) if chars > 0 else 0


def estimate_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """The tokens a piece of text is guessed to weigh: its characters over the ratio, rounded up.

    At the default ratio this is a low-side guess for JSON and code, which pack tighter than prose.
    """
    return _tokens(len(text), _check_ratio(chars_per_token))


def json_text(value: Any) -> str:
    """``value`` written as JSON the way a body's tools and arguments are weighed (internal).

    Raises:
        InvalidInput: the value is nothing JSON can write (a key that is no string, a value that holds
            itself, nesting past the stack), so no request could carry it either.
    """
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"the request holds a value JSON cannot write ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None


def _tools_chars(tools: object) -> int:
    if not tools or not isinstance(tools, Sequence) or isinstance(tools, str):
        return 0
    return len(json_text(list(tools)))


def tool_schema_tokens(
    tools: Sequence[Mapping[str, Any]] | None, chars_per_token: float = CHARS_PER_TOKEN
) -> int:
    """The tokens declared tool schemas weigh, counted exactly as ``request_tokens`` counts them."""
    return _tokens(_tools_chars(tools), _check_ratio(chars_per_token))


def reply_ceiling(body: Mapping[str, Any]) -> int:
    """The reply ceiling a body carries under either spelling; 0 when it carries none.

    ``max_completion_tokens`` and ``max_tokens`` are the same request under two names; should a body
    carry both, the larger is what a server may reserve. A non-positive value (llama.cpp's ``-1``,
    "until the window is full") reserves nothing.
    """
    ceiling = 0
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > ceiling:
            ceiling = value
    return ceiling


def _content_chars(content: object) -> tuple[int, int]:
    """Characters and images in a message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return len(content), 0
    if not isinstance(content, Sequence):
        return 0, 0
    chars = images = 0
    for part in content:
        if isinstance(part, str):
            chars += len(part)
        elif isinstance(part, Mapping):
            text = part.get("text")
            if isinstance(text, str):
                chars += len(text)
            elif part.get("type") in ("image_url", "input_image", "image"):
                images += 1
    return chars, images


def _message_chars(message: Mapping[str, Any]) -> tuple[int, int]:
    chars, images = _content_chars(message.get("content"))
    chars += MESSAGE_OVERHEAD_CHARS
    for name in ("reasoning_content", "name"):
        value = message.get(name)
        if isinstance(value, str):
            chars += len(value)
    calls = message.get("tool_calls")
    if isinstance(calls, Sequence):
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            called = function.get("name")
            arguments = function.get("arguments")
            chars += len(called) if isinstance(called, str) else 0
            if isinstance(arguments, str):
                chars += len(arguments)
            elif arguments is not None:
                chars += len(json_text(arguments))
    return chars, images


def context_chars(body: Mapping[str, Any]) -> ContextParts:
    """The characters of a request body's prompt, per part, as sizing weighs them."""
    system = tool_results = history = images = tool_result_images = 0
    messages = body.get("messages")
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        for message in messages:
            if not isinstance(message, Mapping):
                continue
            chars, found = _message_chars(message)
            images += found
            role = message.get("role")
            role = role if isinstance(role, str) else ""  # a list or an object is no role, and unhashable
            if role in _SYSTEM_ROLES:
                system += chars
            elif role in _TOOL_ROLES:
                tool_results += chars
                tool_result_images += found
            else:
                history += chars
    return ContextParts(
        system=system,
        tools=_tools_chars(body.get("tools")),
        tool_results=tool_results,
        history=history,
        images=images,
        tool_result_images=tool_result_images,
    )


def _prompt_tokens(parts: ContextParts, chars_per_token: float) -> int:
    # Tools are rounded on their own so that this total and tool_schema_tokens agree to the token.
    messages = parts.system + parts.tool_results + parts.history
    return (
        _tokens(messages, chars_per_token)
        + _tokens(parts.tools, chars_per_token)
        + parts.images * IMAGE_TOKENS
    )


def request_tokens(body: Mapping[str, Any], *, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """The tokens a chat-completions request body weighs at the endpoint: prompt plus reply ceiling.

    The ceiling counts because the endpoint counts it: a 30k prompt with ``max_tokens: 4096`` does not
    fit a 32k window. A body with no ceiling reserves nothing for the reply.
    """
    ratio = _check_ratio(chars_per_token)
    return _prompt_tokens(context_chars(body), ratio) + reply_ceiling(body)


def _share(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` cut in proportion to ``weights``; the heaviest part takes what rounding left over."""
    weight = sum(weights)
    if total <= 0 or weight <= 0:
        shares = [0] * len(weights)
        shares[-1] = max(total, 0)
        return shares
    # Flooring the others means the heaviest part only ever gains, so no part can go negative.
    shares = [math.floor(total * w / weight) for w in weights]
    heaviest = max(range(len(weights)), key=lambda i: weights[i])
    shares[heaviest] = 0
    shares[heaviest] = total - sum(shares)
    return shares


def context_tokens(
    body: Mapping[str, Any],
    *,
    chars_per_token: float = CHARS_PER_TOKEN,
    prompt_tokens: int | None = None,
) -> ContextTokens:
    """What is filling the window: the prompt's tokens cut four ways that sum exactly to the total.

    Nothing reports where a prompt's tokens came from, so the parts are always shares of one total.

    Args:
        body: the chat-completions request body.
        chars_per_token: the ratio to weigh characters at (``chars_per_token_for`` gives the measured one).
        prompt_tokens: what the endpoint said the prompt cost, once a turn has come back. When given it
            is the total and every part is its share by characters. Otherwise the total is the
            prompt part of ``request_tokens`` and the tools part is exactly ``tool_schema_tokens``.
    """
    ratio = _check_ratio(chars_per_token)
    parts = context_chars(body)
    # An image weighs a fixed number of tokens; as characters that is the allowance at this ratio. One in
    # a system message (rare enough not to track) is weighed with the history.
    image_chars = IMAGE_TOKENS * ratio
    message_images = parts.images - parts.tool_result_images
    system_w = float(parts.system)
    results_w = parts.tool_results + parts.tool_result_images * image_chars
    history_w = parts.history + message_images * image_chars
    if prompt_tokens is not None:
        total = max(int(prompt_tokens), 0)
        tools, system, results, history = _share(total, [float(parts.tools), system_w, results_w, history_w])
    else:
        total = _prompt_tokens(parts, ratio)
        tools = _tokens(parts.tools, ratio)
        system, results, history = _share(total - tools, [system_w, results_w, history_w])
    return ContextTokens(system=system, tools=tools, tool_results=results, history=history, total=total)
