"""The idle stop: the reaper's decision, sans I/O and exhaustively, then the reaper process on a fake engine."""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.local import CLI_STARTED_BY, LocalServerConfig, start, start_reaper, status, stop
from steadyloop.local.__main__ import main
from steadyloop.local._process import alive, exit_waiter
from steadyloop.local.config import Cache
from steadyloop.local.models import MODELS, model_path
from steadyloop.local.reaper import IdleState, Sample, observe, poll_interval, should_stop, slots_sign

# ------------------------------------------------------------------------------------ the decision, sans I/O

# What happens at one look, as a person would describe it; `_timeline` turns it into samples.
QUIET = "quiet"  # nothing happened since the last look
REQUEST = "request"  # a request came and went: the sign moved
BUSY = "busy"  # a request is running right now
BLIND = "blind"  # the sign could not be read, and nothing happened
BLIND_REQUEST = "blind-request"  # a request came and went, but the sign could not be read this time
EVENTS = (QUIET, REQUEST, BUSY, BLIND, BLIND_REQUEST)


def _timeline(events: Sequence[str], times: Sequence[float]) -> list[Sample]:
    """Samples for ``events`` at ``times[1:]``, after a first look at ``times[0]``; the sign counts requests."""
    counter, samples = 0, [Sample(times[0], False, (0,))]
    for event, at in zip(events, times[1:], strict=True):
        counter += event in (REQUEST, BLIND_REQUEST)
        blind = event in (BLIND, BLIND_REQUEST)
        samples.append(Sample(at, event == BUSY, (None if blind else counter,)))
    return samples


def _expected_last_seen(events: Sequence[str], times: Sequence[float]) -> float:
    """The same answer, said the plain way: the latest look that was busy or read a moved counter."""
    last, pending = times[0], False
    for event, at in zip(events, times[1:], strict=True):
        pending = pending or event in (REQUEST, BLIND_REQUEST)
        if event == BUSY or (event not in (BLIND, BLIND_REQUEST) and pending):
            last = at
        if event not in (BLIND, BLIND_REQUEST):
            pending = False
    return last


def _fold(samples: Sequence[Sample]) -> IdleState:
    state: IdleState | None = None
    for sample in samples:
        state = observe(state, sample)
    assert state is not None
    return state


@pytest.mark.parametrize("length", range(6))
def test_every_timeline_stops_exactly_idle_after_the_last_use(length: int) -> None:
    times = [float(10 * i) for i in range(length + 1)]
    for events in itertools.product(EVENTS, repeat=length):
        state = _fold(_timeline(events, times))
        last = _expected_last_seen(events, times)
        assert state.last_active == last, events
        end = times[-1]
        for idle in (5.0, 10.0, 25.0, 60.0):
            assert should_stop(state, end, idle) == (end - last >= idle), (events, idle)


@given(
    st.lists(
        st.tuples(st.floats(0.0, 30.0), st.sampled_from(EVENTS)),
        max_size=40,
    ),
    st.floats(0.1, 120.0),
)
def test_random_timelines_agree_with_the_plain_rule(steps: list[tuple[float, str]], idle: float) -> None:
    times = list(itertools.accumulate([100.0, *(dt for dt, _ in steps)]))
    events = [event for _, event in steps]
    state = _fold(_timeline(events, times))
    assert state.last_active == _expected_last_seen(events, times)
    assert should_stop(state, times[-1], idle) == (times[-1] - state.last_active >= idle)
    # Stopping is monotone in time: once due, it stays due until something is used.
    if should_stop(state, times[-1], idle):
        assert should_stop(state, times[-1] + 1000.0, idle)


@given(st.lists(st.sampled_from(EVENTS), max_size=30), st.floats(0.0, 1e6))
def test_a_busy_look_is_use_whatever_came_before(events: list[str], later: float) -> None:
    times = [float(i) for i in range(len(events) + 2)]
    state = _fold(_timeline([*events, BUSY], times))
    assert state.last_active == times[-1]
    assert not should_stop(state, times[-1] + min(later, 0.999), idle=1.0)


@given(st.lists(st.sampled_from(EVENTS), max_size=20), st.floats(-10.0, 0.0), st.floats(0.0, 1e9))
def test_idle_zero_or_less_never_stops(events: list[str], idle: float, later: float) -> None:
    times = [float(i) for i in range(len(events) + 1)]
    assert not should_stop(_fold(_timeline(events, times)), times[-1] + later, idle)


def test_the_first_look_is_a_baseline_not_an_old_request() -> None:
    state = observe(None, Sample(50.0, False, ("tasks 1-9", 123, 456)))
    assert state.last_active == 50.0
    assert not should_stop(state, 54.9, idle=5.0) and should_stop(state, 55.0, idle=5.0)


def test_each_sign_counts_on_its_own_and_unreadable_ones_keep_their_value() -> None:
    state = observe(None, Sample(0.0, False, ("a", 1, None)))
    state = observe(state, Sample(10.0, False, (None, 1, 7)))  # the third sign is read for the first time
    assert state.last_active == 0.0 and state.signs == ("a", 1, 7)
    state = observe(state, Sample(20.0, False, (None, None, 8)))  # the sidecar was touched
    assert state.last_active == 20.0
    state = observe(state, Sample(30.0, False, ("b", None, None)))  # the slots moved while unread
    assert state.last_active == 30.0 and state.signs == ("b", 1, 8)
    state = observe(state, Sample(40.0, False, (None, None, None)))  # nothing could be read: no evidence
    assert state.last_active == 30.0


def test_samples_out_of_order_never_move_use_backwards() -> None:
    state = observe(observe(None, Sample(10.0, False, (1,))), Sample(5.0, True, (1,)))
    assert state.last_active == 10.0


def test_the_number_of_signs_is_fixed() -> None:
    with pytest.raises(ValueError, match="2 signs"):
        observe(observe(None, Sample(0.0, False, (1,))), Sample(1.0, False, (1, 2)))


def test_poll_interval_is_a_quarter_of_idle_within_bounds() -> None:
    assert poll_interval(3.0) == 0.75
    assert poll_interval(0.1) == 0.5
    assert poll_interval(900.0) == 5.0


def test_slots_sign_reads_llama_server_slots() -> None:
    fresh = [{"id": 0, "n_ctx": 512, "is_processing": False}, {"id": 1, "is_processing": False}]
    busy = [{"id": 0, "id_task": 4, "is_processing": True, "next_token": [{"n_decoded": 2}]}, fresh[1]]
    done = [{"id": 0, "id_task": 4, "is_processing": False, "next_token": [{"n_decoded": 9}]}, fresh[1]]
    again = [{"id": 0, "id_task": 7, "is_processing": False, "next_token": [{"n_decoded": 9}]}, fresh[1]]
    signs = [slots_sign(json.dumps(body).encode()) for body in (fresh, busy, done, again)]
    assert [b for b, _ in signs] == [False, True, False, False]
    assert len({s for _, s in signs}) == 4  # the same prompt again is still a new task
    assert slots_sign(json.dumps(fresh).encode()) == signs[0]
    for garbage in (b"", b"not json", b'{"error": "slots disabled"}', b"[1, 2]", b'{"data": []}'):
        assert slots_sign(garbage) == (False, None)


# ---------------------------------------------------------------------------------- the reaper process

# Answers /health and /slots like llama-server: every other request is a new task on slot 0. Given a key
# file, like llama-server it answers 401 to everything but /health that does not carry the key.
_FAKE_ENGINE = """#!{python}
import http.server, json, sys
argv = sys.argv
port, alias = int(argv[argv.index("--port") + 1]), argv[argv.index("--alias") + 1]
key = open(argv[argv.index("--api-key-file") + 1]).read().strip() if "--api-key-file" in argv else None
tasks = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global tasks
        if key and self.path != "/health" and self.headers.get("Authorization") != "Bearer " + key:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/health":
            body = b"{{}}"
        elif self.path == "/slots":
            body = json.dumps([{{"id": 0, "id_task": tasks, "is_processing": False}}]).encode()
        else:
            tasks += 1
            body = json.dumps({{"data": [{{"id": alias}}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
print("fake engine on", port, flush=True)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture
def fake_home(tmp_path: Path) -> Iterator[Path]:
    """A cache holding a fake llama-server and sparse files the size of each model."""
    cache = Cache(tmp_path)
    cache.make_dirs()
    cache.binary.write_text(_FAKE_ENGINE.format(python=sys.executable))
    cache.binary.chmod(0o755)
    for spec in MODELS.values():
        with open(model_path(tmp_path, spec), "wb") as f:
            f.truncate(spec.size)
    yield tmp_path
    for server in status(tmp_path):
        stop(server.port, tmp_path)


# The most any wait below is given. Each ends on the event itself (an exit, a line in a log), so the bound
# only matters when something is wrong; on two shared cores a Python child can take seconds to start.
PATIENCE = 120.0


def _exits_within(pid: int, timeout: float) -> bool:
    """Wait on a pidfd (woken by the exit itself, not by polling) for ``pid`` to end."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # gone already, and reaped
        return True
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return not alive(pid)  # alive() also reaps it when it is our child


def _wait_for_line(path: Path, text: str, timeout: float = PATIENCE) -> None:
    """Wait until the reaper has said ``text`` in its log (it has no other way to tell it is watching)."""
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, f"never saw {text!r} in {path}"
        time.sleep(0.05)


def test_a_wait_on_a_process_gone_before_it_was_watched_does_not_sleep_its_interval() -> None:
    # The reaper's race: the server was stopped and reaped between its last look and the wait, so there is
    # no pidfd to open. That exit has happened; sleeping the whole poll interval on it (5 s at a long idle)
    # made the reaper outlive its server by that much, and a loaded CI machine past the test's bound.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with exit_waiter(gone.pid) as pause:
        waiting = threading.Thread(target=pause, args=(3600.0,), daemon=True)
        waiting.start()
        waiting.join(PATIENCE)
    assert not waiting.is_alive(), "the pause slept on a process that had already exited"


def test_a_server_nobody_uses_is_stopped_by_its_reaper(fake_home: Path) -> None:
    server = start(LocalServerConfig(home=fake_home), wait=PATIENCE, idle_stop=1.0, started_by=CLI_STARTED_BY)
    assert server.reaper_pid is not None and server.idle_stop == 1.0
    [listed] = status(fake_home)
    assert (listed.reaper_pid, listed.idle_stop, listed.started_by) == (
        server.reaper_pid,
        1.0,
        CLI_STARTED_BY,
    )
    assert _exits_within(server.pid, PATIENCE), "the idle server was not stopped"
    assert _exits_within(server.reaper_pid, PATIENCE), "the reaper outlived its server"
    assert not list(Cache(fake_home).run.iterdir())
    assert "stopping port" in Cache(fake_home).reaper_log(server.port).read_text()


def test_a_reaper_leaves_when_its_server_is_stopped_otherwise(fake_home: Path) -> None:
    server = start(LocalServerConfig(home=fake_home), wait=PATIENCE, idle_stop=600.0)
    assert server.reaper_pid is not None
    _wait_for_line(Cache(fake_home).reaper_log(server.port), "watching port")
    assert server.stop() is True
    assert _exits_within(server.reaper_pid, PATIENCE)
    assert "is gone" in Cache(fake_home).reaper_log(server.port).read_text()
    assert not list(Cache(fake_home).run.iterdir())


def test_start_reaper_replaces_or_removes_the_reaper(fake_home: Path) -> None:
    server = start(LocalServerConfig(home=fake_home), wait=PATIENCE)
    assert server.reaper_pid is None and status(fake_home)[0].reaper_pid is None
    first = start_reaper(server.port, 600.0, fake_home)
    assert first is not None and status(fake_home)[0].idle_stop == 600.0
    second = start_reaper(server.port, 300.0, fake_home)
    assert second is not None and _exits_within(first, PATIENCE)
    assert (status(fake_home)[0].reaper_pid, status(fake_home)[0].idle_stop) == (second, 300.0)
    assert start_reaper(server.port, 0, fake_home) is None
    assert _exits_within(second, PATIENCE)
    [listed] = status(fake_home)
    assert (listed.reaper_pid, listed.idle_stop, listed.started_by) == (None, None, "steadyloop.local")


def test_down_without_arguments_stops_only_what_the_cli_started(
    fake_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = LocalServerConfig(home=fake_home)
    mine = start(cfg, wait=PATIENCE, started_by=CLI_STARTED_BY)
    other = start(cfg, wait=PATIENCE)
    home = ["--home", str(fake_home)]
    assert main(["down", *home]) == 0
    assert f"stopped port {mine.port}" in capsys.readouterr().err
    assert [s.port for s in status(fake_home)] == [other.port]
    assert main(["down", *home]) == 0
    assert "1 other server(s) left running" in capsys.readouterr().err
    assert main(["status", *home]) == 0
    assert "steadyloop.local\truns until down" in capsys.readouterr().out
    assert main(["down", *home, "--port", str(other.port)]) == 0
    assert status(fake_home) == []


def test_up_with_idle_arms_a_reaper(fake_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--home", str(fake_home), "--idle", "600"]) == 0
    capsys.readouterr()
    [server] = status(fake_home)
    assert server.idle_stop == 600.0 and server.reaper_pid is not None
    assert main(["status", "--home", str(fake_home)]) == 0
    assert f"stops after 600 s idle (reaper pid {server.reaper_pid})" in capsys.readouterr().out
    assert main(["down", "--home", str(fake_home), "--all"]) == 0
    assert _exits_within(server.reaper_pid, PATIENCE)


def test_a_server_stops_with_the_process_it_was_started_for_even_when_that_is_killed(fake_home: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        server = start(LocalServerConfig(home=fake_home), wait=PATIENCE, stop_with=owner.pid)
        assert server.reaper_pid is not None and server.owner == owner.pid and server.idle_stop is None
        [listed] = status(fake_home)
        assert listed.owner == owner.pid
        log = Cache(fake_home).reaper_log(server.port)
        _wait_for_line(log, f"when pid {owner.pid} exits")
        assert alive(server.pid)
    finally:
        owner.kill()
        owner.wait()
    assert _exits_within(server.pid, PATIENCE), "the server outlived the process it was started for"
    assert _exits_within(server.reaper_pid, PATIENCE)
    assert f"pid {owner.pid} exited: stopping port" in log.read_text()
    assert status(fake_home) == []


def test_an_owner_already_gone_stops_the_server_at_once(fake_home: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    server = start(LocalServerConfig(home=fake_home), wait=PATIENCE, stop_with=gone.pid)
    assert _exits_within(server.pid, PATIENCE)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(STEADYLOOP_LLM_HOME=str(home), STEADYLOOP_HOME=str(home / "sl-home"), NO_COLOR="1")
    cli = [sys.executable, "-m", "steadyloop.cli", *args]
    return subprocess.run(cli, capture_output=True, text=True, env=env, timeout=PATIENCE, check=True)


def test_the_cli_never_picks_up_a_server_someone_else_started(fake_home: Path) -> None:
    other = start(LocalServerConfig(home=fake_home), wait=PATIENCE)  # e.g. a test run's, in the shared cache
    first = _cli(fake_home, "local", "up", "--idle", "0")
    url = first.stdout.split("\t")[0]
    assert url != other.base_url
    assert f"started the bundled model at {url}" in first.stderr
    again = _cli(fake_home, "local", "up")
    assert again.stdout.split("\t")[0] == url
    assert f"using the bundled model at {url} (started by steadyloop" in again.stderr
    sized = _cli(fake_home, "local", "up", "--ctx", "1024", "--template", "stock", "--idle", "0")
    assert sized.stdout.split("\t")[0] not in (url, other.base_url)  # other settings: a server of its own
    assert "started the bundled model" in sized.stderr
    quiet = _cli(fake_home, "local", "up", "--quiet")
    assert quiet.stderr == ""


def test_the_cli_starts_keyed_servers_and_keyless_ones_only_when_told(fake_home: Path) -> None:
    keyed = _cli(fake_home, "local", "up", "--idle", "0")
    url = keyed.stdout.split("\t")[0]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    assert (
        f"requests need its key (Authorization: Bearer KEY), in {Cache(fake_home).key_file(port)}"
        in keyed.stderr
    )
    [listed] = status(fake_home)
    assert listed.api_key is not None and listed.api_key not in keyed.stdout + keyed.stderr
    stop(port, fake_home)
    keyless = _cli(fake_home, "local", "up", "--no-key", "--idle", "0")
    url = keyless.stdout.split("\t")[0]
    assert "requests need its key" not in keyless.stderr
    [listed] = status(fake_home)
    assert listed.api_key is None
    again = _cli(fake_home, "local", "up")  # the keyless server its owner asked for is reused
    assert again.stdout.split("\t")[0] == url
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _cli(fake_home, "local", "status", "--no-key")
    assert "--no-key goes with `steadyloop local up`" in refused.value.stderr
