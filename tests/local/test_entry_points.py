"""Every way to start the bundled model serves the same one, and each reads STEADYLOOP_LOCAL_MODEL.

The entry points run as a user runs them (a shell script, ``python -m``, the example, the command), against a
cache holding a fake engine that answers a chat request with the model alias it was started with.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.local import DEFAULT_MODEL, LocalServerConfig, default_model, start, status, stop
from steadyloop.local.config import Cache
from steadyloop.local.models import MODELS, model_path

ROOT = Path(__file__).parent.parent.parent

_ENGINE = """#!{python}
import http.server, json, sys
argv = sys.argv
port, alias = int(argv[argv.index("--port") + 1]), argv[argv.index("--alias") + 1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def _send(self, body, kind="application/json"):
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self._send(b"{{}}" if self.path == "/health" else json.dumps({{"data": [{{"id": alias}}]}}).encode())
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        chunks = [
            {{"choices": [{{"index": 0, "delta": {{"role": "assistant", "content": "served as " + alias}}}}]}},
            {{"choices": [{{"index": 0, "delta": {{}}, "finish_reason": "stop"}}]}},
        ]
        frames = "".join("data: " + json.dumps(c) + "\\n\\n" for c in chunks) + "data: [DONE]\\n\\n"
        self._send(frames.encode(), "text/event-stream")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A cache with a fake engine built for this CPU and every model in place (sparse files)."""
    cache = Cache(tmp_path / "llm")
    cache.make_dirs()
    cache.binary.write_text(_ENGINE.format(python=sys.executable))
    cache.binary.chmod(0o755)
    for spec in MODELS.values():
        with open(model_path(cache.home, spec), "wb") as f:
            f.truncate(spec.size)
    yield cache.home
    for server in status(cache.home):
        stop(server.port, cache.home)


def _environment(home: Path, tmp_path: Path, model: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STEADYLOOP_"))}
    env.update(
        STEADYLOOP_LLM_HOME=str(home),
        STEADYLOOP_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PYTHON=sys.executable,  # scripts/llm-up's interpreter
        NO_COLOR="1",
    )
    if model is not None:
        env["STEADYLOOP_LOCAL_MODEL"] = model
    return env


ENTRY_POINTS = {
    "scripts/llm-up": ["bash", str(ROOT / "scripts" / "llm-up")],
    "python -m steadyloop.local up": [sys.executable, "-m", "steadyloop.local", "up"],
    "steadyloop local up": [sys.executable, "-m", "steadyloop.cli", "local", "up", "--idle", "0"],
    "examples/quickstart.py": [sys.executable, str(ROOT / "examples" / "quickstart.py"), "Who serves?"],
}


@pytest.mark.parametrize("model", [None, "qwen"])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_every_entry_point_serves_the_default_model_or_the_one_the_environment_names(
    home: Path, tmp_path: Path, entry: str, model: str | None
) -> None:
    done = subprocess.run(
        ENTRY_POINTS[entry],
        env=_environment(home, tmp_path, model),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    alias = MODELS[model or DEFAULT_MODEL].alias
    if entry == "examples/quickstart.py":
        assert done.stdout.strip() == f"served as {alias}"  # the example's server ran the model
    else:
        assert [s.model for s in status(home)] == [alias]


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_model_name_no_entry_point_knows_is_refused_naming_the_variable(
    home: Path, tmp_path: Path, entry: str
) -> None:
    done = subprocess.run(
        ENTRY_POINTS[entry],
        env=_environment(home, tmp_path, "llama-70b"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert "STEADYLOOP_LOCAL_MODEL must be one of qwen, qwen-1.5b, smollm, not 'llama-70b'" in done.stderr
    assert status(home) == []


def test_the_default_is_the_1_5b_model_and_the_variable_overrides_it(
    monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    assert DEFAULT_MODEL == "qwen-1.5b"
    assert default_model({}) == default_model({"STEADYLOOP_LOCAL_MODEL": "  "}) == "qwen-1.5b"
    assert default_model({"STEADYLOOP_LOCAL_MODEL": " qwen "}) == "qwen"
    with pytest.raises(InvalidInput, match="STEADYLOOP_LOCAL_MODEL"):
        default_model({"STEADYLOOP_LOCAL_MODEL": "llama-70b"})
    assert LocalServerConfig(home=home).model == "qwen-1.5b"
    monkeypatch.setenv("STEADYLOOP_LOCAL_MODEL", "smollm")
    assert LocalServerConfig(home=home).model == "smollm"
    assert LocalServerConfig(home=home, model="qwen").model == "qwen"  # a named model over the variable
    with start(LocalServerConfig(home=home), wait=30) as server:
        assert server.model == MODELS["smollm"].alias
