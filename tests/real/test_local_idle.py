"""The bundled server's idle stop and ``down``, on real llama-servers in a home of the test's own.

The home links the shared cache's built binary and model (installed there first when missing, as every
real-server test does), and every server here is started, watched and stopped from that home only:
servers of the shared cache are never seen.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from steadyloop.local import (
    CLI_STARTED_BY,
    LocalServer,
    LocalServerConfig,
    default_home,
    ensure_binary,
    ensure_model,
    start,
    status,
    stop,
)
from steadyloop.local._process import alive, health
from steadyloop.local.config import Cache
from steadyloop.local.models import MODELS, model_path

from ._model import real_config

pytestmark = pytest.mark.real_server


def _progress(event: str, done: int | None, total: int | None) -> None:
    print(f"[local server] {event}", file=sys.stderr)


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServerConfig]:
    """The bundled model, small and on one thread, in a tmp home linking the shared cache's binary and model.

    The same model as the other real-server tests, so a fresh machine installs nothing more for these.
    """
    monkeypatch.delenv("STEADYLOOP_LLM_HOME", raising=False)
    shared = real_config(home=default_home())
    ensure_binary(shared, _progress)
    ensure_model(shared, _progress)
    own = Cache(tmp_path / "llm")
    spec = MODELS[shared.model]
    own.make_dirs()
    own.binary.symlink_to(Cache(shared.home).binary)
    model_path(own.home, spec).symlink_to(model_path(shared.home, spec))
    yield real_config(home=own.home, ctx=512, threads=1)
    for server in status(own.home):
        stop(server.port, own.home)


def _exits_within(pid: int, timeout: float) -> bool:
    """Wait on a pidfd, woken by the exit itself, for ``pid`` to end."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return not alive(pid)  # alive() also reaps it when it is our child


def _ask(server: LocalServer) -> None:
    body = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {server.api_key}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert json.load(response)["choices"]


def test_an_idle_server_stops_by_itself(cfg: LocalServerConfig) -> None:
    server = start(cfg, wait=60, idle_stop=3.0, started_by=CLI_STARTED_BY, stop_with=os.getpid())
    assert server.reaper_pid is not None
    [listed] = status(cfg.home)
    assert (listed.reaper_pid, listed.idle_stop) == (server.reaper_pid, 3.0)
    asked = time.monotonic()
    _ask(server)
    assert _exits_within(server.pid, 15), "the server was still running 15 s after its only request"
    assert time.monotonic() - asked >= 3.0, "stopped before it had been idle for 3 s"
    assert _exits_within(server.reaper_pid, 10), "the reaper outlived its server"
    assert "stopping port" in Cache(cfg.home).reaper_log(server.port).read_text()
    assert status(cfg.home) == [] and not list(Cache(cfg.home).run.iterdir())


def test_down_stops_only_what_the_cli_started(cfg: LocalServerConfig, tmp_path: Path) -> None:
    mine = start(cfg, wait=60, idle_stop=600.0, started_by=CLI_STARTED_BY, stop_with=os.getpid())
    other = start(cfg, wait=60, stop_with=os.getpid())
    assert mine.reaper_pid is not None and other.reaper_pid is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(STEADYLOOP_LLM_HOME=str(cfg.home), STEADYLOOP_HOME=str(tmp_path / "home"))

    def steadyloop(*args: str) -> subprocess.CompletedProcess[str]:
        cli = [sys.executable, "-m", "steadyloop.cli", *args]
        return subprocess.run(cli, capture_output=True, text=True, env=env, timeout=60, check=True)

    shown = steadyloop("local", "status").stdout
    assert f"started by {CLI_STARTED_BY}\tstops after 600 s idle" in shown
    assert f"started by steadyloop.local\tstops when pid {os.getpid()} exits" in shown
    assert f"stopped {mine.base_url}" in steadyloop("local", "down").stderr
    assert _exits_within(mine.pid, 10) and _exits_within(mine.reaper_pid, 10)
    assert [s.port for s in status(cfg.home)] == [other.port] and health(other.port) == 200
    assert "1 started elsewhere left running" in steadyloop("local", "down").stderr
    assert f"stopped {other.base_url}" in steadyloop("local", "down", "--all").stderr
    assert _exits_within(other.pid, 10)
    assert status(cfg.home) == []
