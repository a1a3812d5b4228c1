"""Which engine serves a local model, decided in one place for every entry point.

Two engines run the same llama.cpp server code and answer the same HTTP API. The prebuilt one (PyPI's
``xllamacpp`` wheel, compiled for generic AVX2) comes with ``pip install 'steadyloop[local]'`` and needs no
compiler, so a first run goes from install to answer without building anything. The native ``llama-server``
is compiled from llama.cpp's source for this CPU (about 6 minutes on 2 cores, once, by ``steadyloop local
build``) and reads prompts faster: 90 tokens/s against 70 for the 1.5B model on 2 threads, with the same
tool-call output and the same writing speed. Once it is built, it is used.
"""

from __future__ import annotations

import platform
from dataclasses import replace

from .build import native_built
from .config import Engine, EngineChoice, LocalServerConfig

__all__ = ["PREBUILT_PLATFORMS", "choose_engine", "engine_for", "prebuilt_here", "with_engine"]

PREBUILT_PLATFORMS = frozenset({("Linux", "x86_64"), ("Darwin", "arm64")})
"""``(platform.system(), platform.machine())`` pairs PyPI has an ``xllamacpp`` wheel for (its Windows wheel
aside: the local server's process handling is POSIX only)."""


def choose_engine(
    asked: EngineChoice, *, native_built: bool, needs_native: bool, prebuilt_here: bool
) -> Engine:
    """The engine to run, from what was asked and what this machine has; no I/O.

    Args:
        asked: the configured engine; anything but ``"auto"`` is taken as it is.
        native_built: a ``llama-server`` built for this CPU is in the cache.
        needs_native: the configuration passes ``llama-server`` flags, which only the native server takes.
        prebuilt_here: PyPI has a prebuilt wheel for this platform.
    """
    if asked != "auto":
        return asked
    if native_built or needs_native or not prebuilt_here:
        return "llama-server"
    return "xllamacpp"


def prebuilt_here(system: str | None = None, machine: str | None = None) -> bool:
    """Whether the prebuilt engine exists for this platform (or for ``system``/``machine``)."""
    pair = (system or platform.system(), machine or platform.machine())
    return pair in PREBUILT_PLATFORMS


def engine_for(cfg: LocalServerConfig) -> Engine:
    """The engine ``cfg`` runs on this machine now (see :func:`choose_engine`)."""
    return choose_engine(
        cfg.engine,
        native_built=native_built(cfg.home),
        needs_native=bool(cfg.extra_args),
        prebuilt_here=prebuilt_here(),
    )


def with_engine(cfg: LocalServerConfig) -> LocalServerConfig:
    """``cfg`` with ``"auto"`` replaced by the engine it runs now; any other ``cfg`` as it is."""
    return cfg if cfg.engine != "auto" else replace(cfg, engine=engine_for(cfg))
