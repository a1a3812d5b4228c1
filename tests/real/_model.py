"""The server the real-server tests run: the 0.5B model on llama.cpp's own ``llama-server``, pinned.

Not the bundled default (the 1.5B model, served by whichever engine is installed): these tests check the
wire against llama-server b11434 itself, and the 0.5B model reads a prompt about twice as fast, which a suite
of a few hundred requests on two cores needs. A fresh machine builds the binary once for them.
"""

from __future__ import annotations

from typing import Any

from steadyloop.local import LocalServerConfig

MODEL = "qwen"
ALIAS = "qwen2.5-coder-0.5b-instruct"


def real_config(**settings: Any) -> LocalServerConfig:
    """``LocalServerConfig(**settings)`` with the tests' model and engine unless ``settings`` name others."""
    return LocalServerConfig(**{"model": MODEL, "engine": "llama-server", **settings})
