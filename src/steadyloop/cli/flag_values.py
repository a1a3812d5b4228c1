"""The value types of the command line's flags: each refuses a value it cannot use while argv is parsed, as
argparse's usage error, before an endpoint is resolved or a bundled model started.

``type=int`` and ``type=float`` alone let through ``--temperature nan``, ``--max-turns -3``, ``--port
99999999`` and ``--idle 1e999``; each was refused much later (after the model server was started), by a
server as a 400, or came out of uvicorn or the socket layer as a traceback. A text flag that names a
folder, a host or a node cannot hold a NUL or a lone surrogate: no system call takes one.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["count", "host", "name", "path_text", "port", "seconds", "temperature"]

#: The largest count a flag takes: what a 32-bit signed field holds (a context size, a token count).
MAX_COUNT = 2**31 - 1


def count(text: str) -> int:
    """A positive whole number, at most ``MAX_COUNT`` (``--max-turns``, ``--max-tokens``, ``--ctx``)."""
    value = _whole(text)
    if not 1 <= value <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_COUNT}, not {text!r}")
    return value


def port(lowest: int) -> Callable[[str], int]:
    """A TCP port from ``lowest`` (0 lets the system pick one) to 65535."""

    def parse(text: str) -> int:
        value = _whole(text)
        if not lowest <= value <= 65535:
            raise argparse.ArgumentTypeError(f"must be a port from {lowest} to 65535, not {text!r}")
        return value

    parse.__name__ = "port"  # argparse names the type in its "invalid ... value" message
    return parse


def seconds(text: str) -> float:
    """A finite number of seconds, zero or more (``--idle``)."""
    value = _number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, 0 or more, not {text!r}")
    return value


def temperature(text: str) -> float:
    """A finite sampling temperature, zero or more."""
    value = _number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number, 0 or more, not {text!r}")
    return value


def path_text(text: str) -> str:
    """A file or folder name a system call can take: no NUL, no lone surrogate."""
    return _usable(text, "a path")


def host(text: str) -> str:
    """An address or host name to listen on: not empty, no space or control character."""
    _usable(text, "a host")
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"must be an address or a host name, not {text!r}")
    return text


def name(text: str) -> str:
    """A name shown and stored (``--node``): 1 to 200 printable characters."""
    _usable(text, "a name")
    if not 1 <= len(text) <= 200 or not text.isprintable():
        raise argparse.ArgumentTypeError(f"must be 1 to 200 printable characters, not {text[:60]!r}")
    return text


def _usable(text: str, what: str) -> str:
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"{what} cannot hold a NUL character")
    try:
        text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"{what} cannot hold a lone surrogate: {text[:60]!r}") from None
    return text


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text[:60]!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text[:60]!r}") from None
