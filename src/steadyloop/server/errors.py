"""Every error the API answers with: a status, a typed JSON body, and nothing a caller should not see.

The body is always ``{"error": {"code": ..., "message": ..., "hint": ...}}``; ``code`` is one of ``CODES``
and is what a client branches on. Text that leaves the server is scrubbed: the server's own secrets (the
endpoint key, the bearer tokens) and anything shaped like a credential or an absolute file path are
replaced, so a failing endpoint or tool cannot leak them through an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from starlette.responses import JSONResponse

__all__ = ["CODES", "ApiError", "Scrubber", "error_body", "error_response"]

#: Every ``error.code`` the API uses, with the status it comes with.
CODES: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "host_not_allowed": 403,
    "origin_not_allowed": 403,
    "approvals_below_floor": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "run_in_progress": 409,
    "no_run_in_progress": 409,
    "already_decided": 409,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "unknown_entry": 422,
    "too_many_runs": 429,
    "internal": 500,
    "unavailable": 503,
}


class ApiError(Exception):
    """An error answered as ``CODES[code]`` with a typed body.

    Args:
        code: the error's code (a key of ``CODES``).
        message: what went wrong, in words.
        hint: what to do instead, when there is something.
        headers: extra response headers (``WWW-Authenticate``, ``Allow``).
    """

    def __init__(
        self, code: str, message: str, *, hint: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = CODES[code]
        self.message = message
        self.hint = hint
        self.headers = headers or {}


def error_body(code: str, message: str, hint: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if hint is not None:
        error["hint"] = hint
    return {"error": error}


def error_response(error: ApiError, scrub: Scrubber | None = None) -> JSONResponse:
    clean = scrub or Scrubber(())
    return JSONResponse(
        error_body(error.code, clean(error.message), clean(error.hint) if error.hint is not None else None),
        status_code=error.status,
        headers=error.headers,
    )


_KEYLIKE = re.compile(
    r"(?i)\b(?:bearer\s+[A-Za-z0-9._~+/=-]{8,}|sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|xox[abposr]-[A-Za-z0-9-]{8,})"
)
# An absolute file path under a directory a server's files live in; API paths (/sessions/...) are left.
_ROOTS = "home|root|tmp|var|usr|etc|opt|srv|mnt|work|app|data|Users|private|proc|run|nix|snap"
_PATH = re.compile(rf"(?<![\w:/.])/(?:{_ROOTS})(?:/[\w.@+-]+)+/?|\b[A-Za-z]:\\[\w.\\-]+")


class Scrubber:
    """Takes secrets and paths out of text that leaves the server.

    Args:
        secrets: exact strings never to show (keys, tokens); short ones are ignored.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        text = _KEYLIKE.sub("[redacted]", text)
        return _PATH.sub("[path]", text)

    def secrets_only(self, text: str) -> str:
        """Only the server's own secrets taken out (for content such as tool results, where paths belong)."""
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text
