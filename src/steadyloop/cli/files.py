"""Reading a file a flag or the environment names: every way its name or its bytes can be wrong comes out as
one ``InvalidInput`` naming the file.

``Path.read_text`` raises ``ValueError`` for a name with a NUL, ``UnicodeEncodeError`` for a name with a
lone surrogate and ``UnicodeDecodeError`` for content that is not UTF-8; none of them is an ``OSError``, so
a reader that caught only that let them out as a traceback. And it reads ``/dev/zero`` until memory runs
out: here a file is read up to a limit, and refused past it.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidInput

__all__ = ["MAX_FILE_BYTES", "read_named_bytes", "read_named_text", "read_text_if_any"]

#: The most a named file may hold; past it the file is refused unread.
MAX_FILE_BYTES = 16 * 1024 * 1024


def read_named_bytes(path: str | Path, what: str, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the file at ``path``.

    Args:
        path: the name as given.
        what: what the file is, for the message (``"agent file"``, ``"config file"``).
        limit: the most bytes the file may hold.

    Raises:
        InvalidInput: the name cannot name a file, the file cannot be read, or it holds more than
            ``limit`` bytes.
    """
    data = _read(path, what, limit, missing_ok=False)
    assert data is not None
    return data


def read_named_text(path: str | Path, what: str, *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the file at ``path``.

    Raises:
        InvalidInput: as ``read_named_bytes``, or the file is not UTF-8.
    """
    return _decoded(read_named_bytes(path, what, limit=limit), path, what)


def read_text_if_any(path: str | Path, what: str, *, limit: int = MAX_FILE_BYTES) -> str | None:
    """The UTF-8 text of the file at ``path``, ``None`` when there is no such file.

    Raises:
        InvalidInput: as ``read_named_text``.
    """
    data = _read(path, what, limit, missing_ok=True)
    return None if data is None else _decoded(data, path, what)


def _read(path: str | Path, what: str, limit: int, *, missing_ok: bool) -> bytes | None:
    try:
        with Path(path).open("rb") as file:
            data = file.read(limit + 1)
    except FileNotFoundError as exc:
        if missing_ok:
            return None
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except UnicodeEncodeError:
        raise InvalidInput(f"cannot read {what} {str(path)!r}: the name is not valid text") from None
    except ValueError:  # the only other one opening raises: an embedded NUL
        raise InvalidInput(f"cannot read {what} {str(path)!r}: a file name cannot hold a NUL") from None
    if len(data) > limit:
        cap = f"{limit // 2**20} MB" if limit >= 2**20 else f"{limit:,} bytes"
        raise InvalidInput(f"{path} is over {cap}; {what}s are capped at {cap} each")
    return data


def _decoded(data: bytes, path: str | Path, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} {path} is not UTF-8 text (byte {exc.start} is not)") from None
