"""Token arithmetic: how many tokens a request holds, estimated, calibrated and counted (public).

``tokens`` weighs a chat-completions body in characters and estimates its tokens; ``calibration`` keeps
each (endpoint, model)'s characters per token from what the endpoint reported; ``counting`` counts a
request before it is sent, with the model's own tokenizer where there is one. It sits below the turn
(which sizes a request before sending it) and above the wire (whose native APIs count for themselves).
"""

from .calibration import calibrate, chars_per_token_for, reset_calibration
from .counting import (
    AnthropicCounter,
    EstimateCounter,
    GeminiCounter,
    TiktokenCounter,
    TokenCount,
    TokenCounter,
    TokenizerUnavailable,
    count_tokens,
    token_counter_for,
)
from .tokens import (
    CHARS_PER_TOKEN,
    ContextTokens,
    context_tokens,
    estimate_tokens,
    reply_ceiling,
    request_tokens,
    tool_schema_tokens,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "AnthropicCounter",
    "ContextTokens",
    "EstimateCounter",
    "GeminiCounter",
    "TiktokenCounter",
    "TokenCount",
    "TokenCounter",
    "TokenizerUnavailable",
    "calibrate",
    "chars_per_token_for",
    "context_tokens",
    "count_tokens",
    "estimate_tokens",
    "reply_ceiling",
    "request_tokens",
    "reset_calibration",
    "token_counter_for",
    "tool_schema_tokens",
]
