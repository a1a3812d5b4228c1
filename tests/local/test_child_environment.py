"""A bundled server is given what it needs of our environment, never the caller's credentials."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from steadyloop.local import LocalServerConfig, start
from steadyloop.local._process import child_environment
from steadyloop.local.config import Cache
from steadyloop.local.models import MODELS, model_path

CREDENTIALS = {
    "OPENAI_API_KEY": "sk-openai-secret",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "HF_TOKEN": "hf_secret",
    "GITHUB_TOKEN": "ghp_secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "MY_SERVICE_KEY": "svc-secret",
    "LLAMA_API_KEY": "llama-secret",  # llama-server would then refuse our keyless requests
    "LLAMA_ARG_API_KEY": "llama-arg-secret",
    "DB_PASSWORD": "hunter2",
}
NEEDED = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/someone",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TMPDIR": "/tmp",
    "LD_LIBRARY_PATH": "/opt/lib",
    "LLAMA_ARG_THREADS": "2",
    "GGML_NUMA": "1",
    "OMP_NUM_THREADS": "2",
}


def test_the_builder_keeps_what_a_server_needs_and_drops_credentials() -> None:
    given = {**CREDENTIALS, **NEEDED, "DATABASE_URL": "postgres://u:p@h/db", "EDITOR": "vi"}
    assert child_environment(given) == NEEDED


# The engine reports its own environment back, as llama-server would see it.
_ENGINE = """#!{python}
import http.server, json, os, sys
argv = sys.argv
port = int(argv[argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps(dict(os.environ)).encode() if self.path == "/env" else b"{{}}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_a_started_server_has_none_of_the_callers_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = Cache(tmp_path)
    cache.make_dirs()
    cache.binary.write_text(_ENGINE.format(python=sys.executable))
    cache.binary.chmod(0o755)
    spec = MODELS["qwen"]
    with open(model_path(tmp_path, spec), "wb") as f:
        f.truncate(spec.size)
    for name, value in {**CREDENTIALS, "LLAMA_ARG_THREADS": "2"}.items():
        monkeypatch.setenv(name, value)

    server = start(LocalServerConfig(home=tmp_path, model="qwen"), wait=10)
    try:
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        names = {entry.partition(b"=")[0].decode() for entry in environ if entry}
    finally:
        assert server.stop() is True
    assert names.isdisjoint(CREDENTIALS)
    assert {"PATH", "LLAMA_ARG_THREADS"} <= names
    assert not any(value.encode() in b"\0".join(environ) for value in CREDENTIALS.values())
