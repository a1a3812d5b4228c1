"""Internal: the key a local server asks of every request but its health check.

A server on loopback is reachable by every user of the machine and, through the browser, by any web page
the user opens: llama.cpp's server answers any origin's CORS preflight, and a page can post a completion
without one. So each server this package starts gets a key of its own, drawn at start, kept in
``$home/run/llama-server-PORT.key`` (mode 0600: its owner alone reads it) and handed to the server as a
file, never on its command line, which ``/proc`` shows to everyone. Callers that know the cache find the
key from the server's URL with :func:`key_for`; a request without it gets 401.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from .config import Cache, default_home

__all__ = ["LOOPBACK_HOSTS", "key_file_for", "key_for", "key_note", "new_key", "read_key", "write_key"]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MAX_KEY_FILE = 4096  # a key is 43 characters; anything longer is not ours


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe base64 (fits an ``Authorization: Bearer`` header)."""
    return secrets.token_urlsafe(32)


def write_key(path: Path, key: str) -> None:
    """Write ``key`` to ``path`` readable by its owner alone, replacing any file there atomically."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    # Created 0600 from the start: a chmod after the write would leave a moment in which others can read it.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (key + "\n").encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_key(path: Path) -> str | None:
    """The key in ``path``; ``None`` when there is none, it cannot be read, or it is not one of ours."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_KEY_FILE + 1)
    except OSError:
        return None
    if len(data) > _MAX_KEY_FILE:
        return None
    try:
        key = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return key if key and key.isprintable() and " " not in key else None


def key_note(path: Path) -> str:
    """What to tell whoever started a keyed server: where its key is, and who finds it without help."""
    return (
        f"requests need its key (Authorization: Bearer KEY), in {path}, readable by you alone; the steadyloop "
        "command finds it from the URL by itself, and Python code with steadyloop.local.key_for(URL)"
    )


def key_file_for(base_url: str, home: Path | None = None) -> Path | None:
    """Where the key of the local server ``base_url`` points at would be, when this cache started it.

    Only a loopback URL with an explicit port has one, so a hosted endpoint's URL never reads the cache.
    """
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return None
    if parts.hostname not in LOOPBACK_HOSTS or port is None:
        return None
    return Cache(home or default_home()).key_file(port)


def key_for(base_url: str, home: Path | None = None) -> str | None:
    """The key of the local server ``base_url`` points at, when this cache started it; else ``None``.

    Only a loopback URL with an explicit port is looked up (:func:`key_file_for`). ``None`` means no key
    is known here (another program's server, or one started without a key).
    """
    path = key_file_for(base_url, home)
    return None if path is None else read_key(path)
