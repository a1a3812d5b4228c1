"""``reset_all``: drop every cache and latch steadyloop keeps for the life of the process (public).

Each seam also has its own reset, for a test that wants only one: ``reset_clients``,
``reset_capabilities``, ``reset_calibration``, ``forget_measurements``, ``reset_windows``, ``reset_events``, ``reset_hooks``.
"""

from __future__ import annotations

from .bus import reset_events
from .hooks import reset_hooks
from .sizing.calibration import reset_calibration
from .sizing.counting import forget_measurements
from .turn.capabilities import reset_capabilities
from .wire.transport.clients import reset_clients
from .wire.windows import reset_windows

__all__ = ["reset_all"]


def reset_all() -> None:
    """Drop the client pool, capability latches, calibration (and which models were measured), window
    caches, the event bus and hook settings."""
    reset_clients()
    reset_capabilities()
    reset_calibration()
    forget_measurements()
    reset_windows()
    reset_events()
    reset_hooks()
