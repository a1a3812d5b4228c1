"""Test doubles for steadyloop's users and its own tests: a scripted HTTP server that speaks chat completions,
Anthropic Messages and Gemini's streamed calls, and a fault-injecting proxy to put in front of it (or of any
server) (public).

Names are loaded on first use, so ``python -m steadyloop.testing.server`` does not import the server twice.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ALL_FAULTS",
    "BodyReply",
    "Fault",
    "FaultProxy",
    "RecordedRequest",
    "Reply",
    "ScriptedServer",
    "StallReply",
    "StreamReply",
    "anthropic_events",
    "anthropic_stream",
    "finish_chunk",
    "gemini_chunks",
    "gemini_stream",
    "llamacpp_timings",
    "reasoning_chunks",
    "sse_reply",
    "stream_of",
    "text_chunks",
    "tool_call_chunks",
    "usage_chunk",
]

_WHERE = {
    "ALL_FAULTS": "fault_proxy",
    "BodyReply": "replies",
    "Fault": "fault_proxy",
    "FaultProxy": "fault_proxy",
    "RecordedRequest": "server",
    "Reply": "replies",
    "ScriptedServer": "server",
    "StallReply": "replies",
    "StreamReply": "replies",
    "finish_chunk": "chunks",
    "llamacpp_timings": "chunks",
    "reasoning_chunks": "chunks",
    "stream_of": "chunks",
    "text_chunks": "chunks",
    "tool_call_chunks": "chunks",
    "usage_chunk": "chunks",
    "anthropic_events": "provider_streams",
    "anthropic_stream": "provider_streams",
    "gemini_chunks": "provider_streams",
    "gemini_stream": "provider_streams",
    "sse_reply": "provider_streams",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'steadyloop.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
