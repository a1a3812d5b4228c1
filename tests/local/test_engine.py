"""The engine choice: the prebuilt engine serves until a native llama-server is built, then the native one.

The decision is a sans-I/O function checked over every input; then the same choice seen through ``start``,
``status`` and every entry point, on a cache with and without a native binary.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.local import LocalServerConfig, running_server, start, status, stop
from steadyloop.local.__main__ import main
from steadyloop.local.config import XLLAMACPP_VERSION, Cache
from steadyloop.local.engine import choose_engine, engine_for, prebuilt_here
from steadyloop.local.models import MODELS, model_path
from steadyloop.local.server import engine_of, server_command

ROOT = Path(__file__).parent.parent.parent

# ---------------------------------------------------------------------------------- the decision, sans I/O

# (native built, llama-server flags given, a prebuilt wheel exists for this platform) -> engine under "auto"
AUTO = {
    (False, False, True): "xllamacpp",  # a first run: nothing to compile on the way to the answer
    (True, False, True): "llama-server",  # built once: the faster one from then on
    (False, True, True): "llama-server",  # flags only llama-server takes: build it
    (True, True, True): "llama-server",
    (False, False, False): "llama-server",  # no wheel for this platform: building is the only way
    (True, False, False): "llama-server",
    (False, True, False): "llama-server",
    (True, True, False): "llama-server",
}


def test_auto_picks_the_prebuilt_engine_only_while_nothing_needs_or_has_the_native_one() -> None:
    assert len(AUTO) == 2**3  # every combination
    for (built, flags, wheel), engine in AUTO.items():
        got = choose_engine("auto", native_built=built, needs_native=flags, prebuilt_here=wheel)
        assert got == engine, (built, flags, wheel)


def test_an_engine_asked_for_by_name_is_taken_whatever_the_machine_has() -> None:
    for asked, built, flags, wheel in itertools.product(("llama-server", "xllamacpp"), *[(False, True)] * 3):
        assert choose_engine(asked, native_built=built, needs_native=flags, prebuilt_here=wheel) == asked


def test_the_prebuilt_engine_exists_where_pypi_has_its_wheel() -> None:
    assert prebuilt_here("Linux", "x86_64") and prebuilt_here("Darwin", "arm64")
    assert not prebuilt_here("Linux", "aarch64") and not prebuilt_here("Windows", "AMD64")


def test_the_local_extra_pins_the_prebuilt_engine_steadyloop_was_checked_against() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["local"]
    assert [spec.split(";")[0].strip() for spec in extra] == [f"xllamacpp=={XLLAMACPP_VERSION}"]


def test_engine_of_a_command_line() -> None:
    assert engine_of(["/c/bin/llama-server-b11434-x", "-m", "m.gguf"]) == "llama-server"
    assert engine_of(["/v/bin/python", "/s/_xllamacpp_main.py", "--model", "m"]) == "xllamacpp"
    assert engine_of(["/usr/bin/python3", "/v/bin/python", "/s/_xllamacpp_main.py"]) == "xllamacpp"
    assert engine_of(None) is None and engine_of([]) is None


# ------------------------------------------------------------------------------------- against a cache

_ENGINE = """#!{python}
import http.server, sys
argv = sys.argv
port, alias = int(argv[argv.index("--port") + 1]), argv[argv.index("--alias") + 1]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"{{}}" if self.path == "/health" else ('{{"data":[{{"id":"%s"}}]}}' % alias).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A cache with every model in place (sparse files) and no native binary."""
    cache = Cache(tmp_path / "llm")
    cache.make_dirs()
    for spec in MODELS.values():
        with open(model_path(cache.home, spec), "wb") as f:
            f.truncate(spec.size)
    yield cache.home
    for server in status(cache.home):
        stop(server.port, cache.home)


def _fake(path: Path) -> Path:
    path.write_text(_ENGINE.format(python=sys.executable))
    path.chmod(0o755)
    return path


def _build_natively(home: Path) -> None:
    """What ``steadyloop local build`` leaves behind: a binary for this CPU in the cache."""
    _fake(Cache(home).binary)


@pytest.fixture
def prebuilt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The prebuilt engine's interpreter replaced by a fake engine that serves what the script would."""
    python = _fake(tmp_path / "prebuilt-python")
    monkeypatch.setattr("steadyloop.local.server.xllamacpp_python", lambda home: python)
    monkeypatch.setattr("steadyloop.local.build.xllamacpp_python", lambda home: python)
    return python


def test_a_cache_without_a_native_binary_is_served_by_the_prebuilt_engine_without_compiling(
    monkeypatch: pytest.MonkeyPatch, home: Path, prebuilt: Path
) -> None:
    def compile_anything(*args: object, **kwargs: object) -> Path:
        raise AssertionError("a first start must not build llama-server")

    monkeypatch.setattr("steadyloop.local.server.ensure_binary", compile_anything)
    cfg = LocalServerConfig(home=home)
    assert engine_for(cfg) == "xllamacpp"
    assert server_command(cfg, 1)[:2] == [
        str(prebuilt),
        str(ROOT / "src/steadyloop/local/_xllamacpp_main.py"),
    ]
    with start(cfg, wait=30) as server:
        assert server.engine == "xllamacpp"
        assert [(s.port, s.engine) for s in status(home)] == [(server.port, "xllamacpp")]


def test_once_a_native_binary_is_built_it_serves(home: Path, prebuilt: Path) -> None:
    cfg = LocalServerConfig(home=home)
    first = start(cfg, wait=30)
    try:
        assert first.engine == "xllamacpp"
        _build_natively(home)
        assert engine_for(cfg) == "llama-server"
        assert server_command(cfg, 1)[0] == str(Cache(home).binary)
        # The server running the prebuilt engine is not what cfg runs now: a native one is started.
        with running_server(cfg, wait=30) as native:
            assert native.engine == "llama-server" and native.port != first.port
    finally:
        first.stop()


def test_llama_server_flags_ask_for_the_native_server(home: Path) -> None:
    cfg = LocalServerConfig(home=home, extra_args=("--metrics",))
    assert engine_for(cfg) == "llama-server"
    with pytest.raises(InvalidInput, match="cannot take them"):
        LocalServerConfig(home=home, engine="xllamacpp", extra_args=("--metrics",))


def test_build_prints_the_binary_and_builds_nothing_when_there_is_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _build_natively(home)
    assert main(["build", "--home", str(home)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(Cache(home).binary)
    assert "servers started from now on run the native llama-server" in err


# ---------------------------------------------------------------------------------- every entry point

ENTRY_POINTS = {
    "scripts/llm-up": ["bash", str(ROOT / "scripts" / "llm-up")],
    "python -m steadyloop.local up": [sys.executable, "-m", "steadyloop.local", "up"],
    "steadyloop local up": [sys.executable, "-m", "steadyloop.cli", "local", "up", "--idle", "0"],
    "examples/quickstart.py": [sys.executable, str(ROOT / "examples" / "quickstart.py"), "Hi?"],
}


def _shell_only(folder: Path) -> Path:
    """A folder with what scripts/llm-up runs besides Python, and nothing that compiles."""
    folder.mkdir()
    for tool in ("bash", "dirname"):
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    return folder


def _prebuilt_installed_here() -> bool:
    try:
        return version("xllamacpp") == XLLAMACPP_VERSION
    except PackageNotFoundError:
        return False


@pytest.mark.skipif(
    not _prebuilt_installed_here(), reason="needs the local extra (pip install -e '.[local]')"
)
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_starts_the_prebuilt_engine_when_no_native_one_is_built(
    home: Path, tmp_path: Path, entry: str
) -> None:
    # The real prebuilt engine, given a model file of zeros, refuses it at once: what matters here is that
    # each entry point asked it to serve, with no compiler run on the way.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(
        STEADYLOOP_LLM_HOME=str(home),
        STEADYLOOP_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PYTHON=sys.executable,
        PATH=f"{os.path.dirname(sys.executable)}:{_shell_only(tmp_path / 'bin')}",  # no cmake, no compiler
    )
    done = subprocess.run(
        ENTRY_POINTS[entry], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode != 0
    assert "start xllamacpp on 127.0.0.1:" in done.stderr, done.stderr
    logs = [log.read_text() for log in Cache(home).logs.glob("llama-server-*.log")]
    assert any("Failed to init server" in log for log in logs)  # the prebuilt engine's own words
    assert not Cache(home).binary.exists() and not (Cache(home).home / "build").exists()


def test_the_command_builds_too_and_refuses_what_does_not_go_with_a_build(home: Path, tmp_path: Path) -> None:
    _build_natively(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(STEADYLOOP_LLM_HOME=str(home), STEADYLOOP_HOME=str(tmp_path / "home"), NO_COLOR="1")
    cli = [sys.executable, "-m", "steadyloop.cli", "local", "build"]
    done = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(Cache(home).binary)
    refused = subprocess.run([*cli, "--port", "5"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "do not go with `steadyloop local build`" in refused.stderr
