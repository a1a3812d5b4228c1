"""``reset_all``: drop every cache and latch steadyloop keeps for the life of the process.

Each seam also has its own reset, for a test that wants only one: ``reset_clients``,
"""

from __future__ import annotations

from .turn.capabilities import reset_capabilities
from .wire.clients import reset_clients

__all__ = ["reset_all"]


def reset_all() -> None:
    reset_clients()
    reset_capabilities()
