"""The ``steadyloop`` command: run and chat against any OpenAI-compatible endpoint, or the bundled model (internal: its interface is the command line).

A shell over the public API, like any outside user's. ``main`` is the console-script entry point.
"""

from .app import main

__all__ = ["main"]
