"""Test doubles for steadyloop's users and its own tests: a scripted OpenAI-compatible HTTP server, and a
fault-injecting proxy to put in front of it (or of any server).

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
    "finish_chunk",
    "llamacpp_timings",
    "reasoning_chunks",
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
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'steadyloop.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
