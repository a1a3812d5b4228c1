"""What an endpoint's error response means, read without doing any I/O.

``classify_failure(status, body, headers)`` turns a refusal into a :class:`Failure`: its kind, the
request field the server named, the values it said it takes, how long it asked us to wait, and its own
words. It reads the error shapes OpenAI-compatible servers, Anthropic, Gemini and the proxies in front
of them use, including error events from a stream and errors wrapped inside another server's error.
The wordings themselves are data, in ``_failure_patterns``.

``prompt_truncated`` spots the one failure that arrives as a success: a server (Ollama) that cut the
prompt to fit its window and said nothing.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, cast

from .._nesting import too_deep
from ..errors import InvalidInput
from ._failure_patterns import (
    DURATION_PART,
    KINDS,
    OVERFLOW_NUMBERS,
    PER_DAY_ID,
    PER_DAY_WORDS,
    QUOTA_IDS,
    QUOTED,
    RETRY_IN_BODY,
    RULES,
    SHARED_CACHE_FULL,
    SHARED_CACHE_STATUSES,
    SUPPORTED,
    UNIT_SECONDS,
    FailureKind,
)
from .web_pages import is_web_page, page_words

__all__ = ["Failure", "FailureKind", "classify_failure", "parse_retry_after", "prompt_truncated"]

_BY_STATUS: dict[int, FailureKind] = {
    401: "auth",
    402: "other",  # payment required: waiting will not help
    403: "auth",
    404: "not_found",
    408: "transient",
    425: "transient",
    429: "rate_limited",
    500: "transient",
    502: "transient",
    503: "transient",
    504: "transient",
    529: "transient",
}
_NAMES_A_FIELD: frozenset[str] = frozenset(
    {"refused_field", "refused_value", "out_of_range", "tools_unsupported"}
)
_WAITABLE: frozenset[str] = frozenset({"rate_limited", "transient"})
_MAX_DEPTH = 6  # errors wrapped in errors; a body nested deeper than this is not an error shape
_MAX_TEXT = 8_000  # bounds the regex work on a proxy's HTML error page; the words come first
_CAMEL = re.compile(r"[a-z]+(?:[A-Z][a-z0-9]*)+")
_FIELD_PATH = re.compile(r"[\w.\[\]]+")
_SSE_LINE = re.compile(r"^\s*(?:data|error):\s*(?P<json>[{\[].*)$")

# Ollama keeps the last num_ctx tokens of an over-long prompt and reports only those. The estimate we
# compare against may be off by a quarter either way, and on a short prompt the chat template alone
# moves the count by a few hundred tokens, so only a drop both large in ratio and in tokens is a cut.
_TRUNCATION_RATIO = 0.7
_TRUNCATION_MARGIN = 256


@dataclass(frozen=True, slots=True)
class Failure:
    """What an endpoint's error response means.

    Attributes:
        kind: what went wrong, one of ``FailureKind``.
        status: the HTTP status, ``None`` when the connection failed before one arrived.
        message: the server's own words, taken out of its error shape.
        field: the request field the server named (``"max_tokens"``, ``"reasoning_effort"``, ...).
        supported: the values the server said the field takes, in its order.
        retry_after: seconds the server asked us to wait, from its headers or its words.
        code: the server's error code, when it gave one.
        type: the server's error type, when it gave one.
        limit: for an overflow, the window in tokens, when the server said.
        requested: for an overflow, the tokens the request needed as the server counted, when it said.
        daily_quota: a rate limit for a quota counted per day, with no wait named: sending again today
            fails the same way, so it is not transient.
        web_page: the body was an HTML page, not an API's answer (a proxy's error page, a login wall, a
            site at a wrong base URL); ``message`` is then what the page says (its title or heading).
    """

    kind: FailureKind
    status: int | None = None
    message: str = ""
    field: str | None = None
    supported: tuple[str, ...] = ()
    retry_after: float | None = None
    code: str | None = None
    type: str | None = None
    limit: int | None = None
    requested: int | None = None
    daily_quota: bool = False
    web_page: bool = False

    @property
    def transient(self) -> bool:
        """Whether sending the same request again later may succeed.

        A loading model is not included: it is waited for on its own, longer clock. Neither is an
        overflow, a refusal, a 429 for exhausted billing or a used-up daily quota: the same request fails
        the same way.
        """
        return self.kind in _WAITABLE and not self.daily_quota

    def to_json(self) -> dict[str, str | int | float | bool | list[str] | None]:
        """The failure as a JSON-safe dict; :meth:`from_json` reads it back."""
        return {
            "kind": self.kind,
            "status": self.status,
            "message": self.message,
            "field": self.field,
            "supported": list(self.supported),
            "retry_after": self.retry_after,
            "code": self.code,
            "type": self.type,
            "limit": self.limit,
            "requested": self.requested,
            "daily_quota": self.daily_quota,
            "web_page": self.web_page,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Failure:
        """Read back what :meth:`to_json` wrote.

        Raises:
            InvalidInput: the kind is not one steadyloop knows, or a value has the wrong type.
        """
        kind = data.get("kind")
        if not isinstance(kind, str) or kind not in KINDS:
            raise InvalidInput(f"unknown failure kind: {kind!r}")
        status, retry_after = data.get("status"), data.get("retry_after")
        supported = data.get("supported", [])
        if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
            raise InvalidInput(f"failure status must be an int or null, got {status!r}")
        if retry_after is not None and (
            isinstance(retry_after, bool) or not isinstance(retry_after, int | float)
        ):
            raise InvalidInput(f"failure retry_after must be a number or null, got {retry_after!r}")
        limit, requested = _optional_int(data, "limit"), _optional_int(data, "requested")
        web_page = data.get("web_page", False)  # absent from what older versions wrote
        if not isinstance(web_page, bool):
            raise InvalidInput(f"failure web_page must be a boolean, got {web_page!r}")
        if not isinstance(supported, list) or not all(isinstance(v, str) for v in supported):
            raise InvalidInput(f"failure supported must be a list of strings, got {supported!r}")
        return cls(
            kind=cast(FailureKind, kind),
            status=status,
            message=_optional_str(data, "message") or "",
            field=_optional_str(data, "field"),
            supported=tuple(supported),
            retry_after=None if retry_after is None else float(retry_after),
            code=_optional_str(data, "code"),
            type=_optional_str(data, "type"),
            limit=limit,
            requested=requested,
            daily_quota=data.get("daily_quota") is True,
            web_page=web_page,
        )


def classify_failure(
    status: int | None,
    body: str | Mapping[str, Any] | None,
    headers: Mapping[str, str] | None = None,
) -> Failure:
    """Read what an endpoint's error response means.

    Args:
        status: the HTTP status, or ``None`` for a connection that failed before one arrived.
        body: the response body as text or parsed JSON; a stream's error event or its raw SSE text works
            too.
        headers: the response headers, for ``Retry-After`` and ``retry-after-ms``.

    Returns:
        The failure. The server's words decide the kind where they say something; the status decides
        it where they do not. A 429 is never an overflow, whatever its words borrow. An HTML page (a
        proxy's, a login wall's, a site's at a wrong URL) is read for its title or heading only, and
        marked ``web_page``. Nothing a server can send makes this raise: a status that is not a number
        reads as none, header values of any type are read where they can be, and a body nested past
        what any error shape needs is read as text.
    """
    status = _status(status)
    words = _Words()
    page = body if isinstance(body, str) and is_web_page(body) else None
    if page is not None:
        # A page's markup and scripts are no server's words: its title or heading is what it says.
        words.say(page_words(page))
    else:
        _read(body, words, 0)
    said = "\n".join([*words.texts, words.code or "", words.type or ""])[:_MAX_TEXT]
    kind, field = _match(status, said)
    if kind is None:
        kind = _kind_of_status(status)
    elif kind == "context_overflow" and status == 429:
        kind, field = "rate_limited", None
    if field is None and kind in _NAMES_A_FIELD:
        field = words.param
    waited_for = None
    if kind in _WAITABLE:
        # Gemini's retryDelay and quota ids sit in error details that are not words, so the whole body is
        # read too (as text when it came as text: an array of errors is no mapping).
        raw = body if isinstance(body, str) else "" if body is None else _dumped(body)
        waited_for = said + "\n" + raw[:_MAX_TEXT]
    limit, requested = words.limit, words.requested
    if kind == "context_overflow":
        found_limit, found_requested = _overflow_numbers(said)
        limit, requested = limit or found_limit, requested or found_requested
    retry_after = parse_retry_after(headers, waited_for)
    daily = kind == "rate_limited" and retry_after is None and _per_day(said, waited_for or said)
    return Failure(
        kind=kind,
        status=status,
        message=words.message,
        field=_clean_field(field),
        supported=_supported(said) if kind == "refused_value" else (),
        retry_after=retry_after,
        code=words.code,
        type=words.type,
        limit=limit,
        requested=requested,
        daily_quota=daily,
        web_page=page is not None,
    )


def _per_day(said: str, whole: str) -> bool:
    """Whether the quota that ran out is counted per day: every quota the body names is a daily one, or,
    where it names none, its words say so."""
    named = [found["id"] for found in QUOTA_IDS.finditer(whole)]
    if named:
        return all(PER_DAY_ID.search(quota) for quota in named)
    return PER_DAY_WORDS.search(said) is not None


def parse_retry_after(
    headers: Mapping[str, str] | None,
    body_text: str | None = None,
    now: float | None = None,
) -> float | None:
    """Seconds the server asked us to wait, or ``None`` when it did not say.

    ``retry-after-ms`` wins over ``Retry-After`` (seconds or an HTTP date), which wins over the words
    ("Please try again in 20s", "in 1.5s", "in 250ms", "retry after 7 seconds", Gemini's ``retryDelay``).
    A date already past gives ``0.0``.

    Args:
        headers: response headers, any case.
        body_text: the error's text, read only when the headers say nothing.
        now: the current time as a Unix timestamp, for an HTTP-date header; defaults to the clock.
    """
    lowered = _lowered(headers)
    millis = _number(lowered.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000.0)
    value = lowered.get("retry-after")
    if value is not None:
        seconds = _number(value)
        if seconds is not None:
            return max(0.0, seconds)
        when = _http_date(value)
        if when is not None:
            return max(0.0, when - (time.time() if now is None else now))
    if isinstance(body_text, str) and body_text:
        for pattern in RETRY_IN_BODY:
            match = pattern.search(body_text[:_MAX_TEXT])
            if match is not None:
                return _seconds_in(match)
    return None


def shared_cache_full(status: int | None, message: str | None) -> bool:
    """Whether a ``transient`` failure is a local server's shared cache filled by requests at once
    (llama-server's 500 "Context size has been exceeded."): one request at a time clears it."""
    if status not in SHARED_CACHE_STATUSES or not message:
        return False
    return SHARED_CACHE_FULL.search(message[:_MAX_TEXT]) is not None


def prompt_truncated(sent_tokens: int, reported_prompt_tokens: int) -> bool:
    """Whether the server's prompt count says it cut the prompt we sent.

    Ollama truncates an over-long prompt to its window without an error; the only trace is a prompt
    count well below what was sent. A drop counts when the server reports less than 70% of the tokens
    sent *and* at least 256 fewer: the first absorbs an estimate that is off by a quarter, the second
    a chat template's overhead on a short prompt. A count of zero means the server reported none.

    Args:
        sent_tokens: the prompt tokens we sent, exact or estimated.
        reported_prompt_tokens: the prompt tokens the server says it processed.
    """
    if sent_tokens <= 0 or reported_prompt_tokens <= 0:
        return False
    return (
        reported_prompt_tokens < _TRUNCATION_RATIO * sent_tokens
        and sent_tokens - reported_prompt_tokens > _TRUNCATION_MARGIN
    )


@dataclass(slots=True)
class _Words:
    """What a body says, gathered from whichever error shape it uses."""

    message: str = ""
    code: str | None = None
    type: str | None = None
    param: str | None = None
    limit: int | None = None
    requested: int | None = None
    texts: list[str] = dataclass_field(default_factory=list)

    def say(self, text: str) -> None:
        text = text.strip()
        if text:
            self.texts.append(text)
            if not self.message:
                self.message = text


def _read(body: object, words: _Words, depth: int) -> None:
    if depth > _MAX_DEPTH or body is None:
        return
    if isinstance(body, str):
        parsed = _parse(body)
        if parsed is None:
            words.say(body)
        else:
            _read(parsed, words, depth + 1)
    elif isinstance(body, Mapping):
        _read_mapping(body, words, depth)
    elif isinstance(body, list):
        _read_list(body, words, depth)


def _read_list(items: list[Any], words: _Words, depth: int) -> None:
    if items and all(isinstance(item, Mapping) and "msg" in item for item in items):
        # FastAPI/pydantic validation errors: "<where>: <what>" keeps the field next to the complaint
        for item in items:
            loc = item.get("loc")
            parts = loc if isinstance(loc, list | tuple) else ([loc] if loc is not None else [])
            where = ".".join(str(part) for part in parts if part != "body" and isinstance(part, str | int))
            said = item["msg"]
            if isinstance(said, str):
                words.say(f"{where}: {said}" if where else said)
        return
    first = next((item for item in items if isinstance(item, Mapping)), None)
    _read(first, words, depth + 1)


def _read_mapping(obj: Mapping[str, Any], words: _Words, depth: int) -> None:
    error, response = obj.get("error"), obj.get("response")
    if isinstance(error, Mapping):
        _read(error, words, depth + 1)
        return
    if isinstance(response, Mapping) and isinstance(response.get("error"), Mapping):
        _read(response["error"], words, depth + 1)  # a Responses API "response.failed" event
        return
    if isinstance(error, str):
        words.say(error)
    for key in ("message", "msg", "detail", "details"):
        value = obj.get(key)
        if isinstance(value, str):
            _read_text(value, words, depth)
        elif isinstance(value, Mapping | list):
            _read(value, words, depth + 1)
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        raw = metadata.get("raw")  # OpenRouter: the upstream provider's own error, as text
        if isinstance(raw, str):
            _read_text(raw, words, depth)
        elif isinstance(raw, Mapping):
            _read_nested(raw, words, depth)
    words.code = words.code or _scalar(obj.get("code"))
    kind = _scalar(obj.get("type"))
    words.type = words.type or (kind if kind not in ("error", None) else None)
    param = obj.get("param")
    words.param = words.param or _param(param)
    if isinstance(param, str) and _param(param) is None:
        words.texts.append(param)  # a proxy that put the upstream's words in "param"
    # llama.cpp states both counts as fields of its exceed_context_size_error
    words.limit = words.limit or _count(obj.get("n_ctx"))
    words.requested = words.requested or _count(obj.get("n_prompt_tokens"))
    state = obj.get("status")
    if isinstance(state, str) and state.strip():
        if words.message:
            words.type = words.type or state  # Gemini: "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"
        else:
            words.say(state)  # llama.cpp's health route: {"status": "no slot available"}


def _read_text(text: str, words: _Words, depth: int) -> None:
    inner = _parse(text) if text.lstrip()[:1] in ("{", "[") else None
    if inner is None:
        words.say(text)
    else:
        _read_nested(inner, words, depth)


def _read_nested(inner: object, words: _Words, depth: int) -> None:
    # An error wrapped in another server's error: the inner words are the specific ones, so they
    # replace a wrapper's "Provider returned error" as the message, while both stay matchable.
    nested = _Words()
    _read(inner, nested, depth + 1)
    words.texts.extend(nested.texts)
    words.message = nested.message or words.message
    words.code = words.code or nested.code
    words.type = words.type or nested.type
    words.param = words.param or nested.param


def _parse(text: str) -> object | None:
    stripped = text.strip()
    if too_deep(stripped):
        return None  # no error shape nests this deep: it is words
    if stripped[:1] in ("{", "["):
        try:
            parsed: object = json.loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            return parsed
    for line in stripped.splitlines():  # an SSE stream carrying an error event
        match = _SSE_LINE.match(line)
        if match is not None:
            try:
                event: object = json.loads(match["json"])
            except (ValueError, RecursionError):
                continue
            if isinstance(event, Mapping | list):
                return event
    return None


def _match(status: int | None, said: str) -> tuple[FailureKind | None, str | None]:
    for rule in RULES:
        if rule.statuses is not None and status not in rule.statuses:
            continue
        found = rule.pattern.search(said)
        if found is not None:
            return rule.kind, found.groupdict().get("field") or rule.field
    return None, None


def _kind_of_status(status: int | None) -> FailureKind:
    if status is None:
        return "transient"  # the connection failed before any answer
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return "invalid_request" if 400 <= status < 500 else "other"


def _supported(said: str) -> tuple[str, ...]:
    for pattern in SUPPORTED:
        found = pattern.search(said)
        if found is None:
            continue
        groups = found.groupdict()
        if groups.get("value") is not None:
            return (groups["value"].strip(),)
        listed = re.split(r"\.\s|\.$|\n", groups["list"], maxsplit=1)[0]
        return tuple(next(part for part in found if part) for found in QUOTED.findall(listed) if any(found))
    return ()


def _overflow_numbers(said: str) -> tuple[int | None, int | None]:
    limit: int | None = None
    requested: int | None = None
    for pattern in OVERFLOW_NUMBERS:
        found = pattern.search(said)
        if found is None:
            continue
        groups = found.groupdict()
        if limit is None:
            limit = _digits(groups.get("limit"))
        if requested is None and groups.get("requested"):
            requested = _digits(groups["requested"])
        elif requested is None and groups.get("add1") and groups.get("add2"):
            add1, add2 = _digits(groups["add1"]), _digits(groups["add2"])
            requested = add1 + add2 if add1 is not None and add2 is not None else None
        if limit is not None and requested is not None:
            break
    return limit, requested


def _clean_field(field: str | None) -> str | None:
    if field is None:
        return None
    field = field.strip("'\"`. ")
    if _CAMEL.fullmatch(field):  # xAI names fields the way its SDK spells them: frequencyPenalty
        field = re.sub(r"(?<!^)(?=[A-Z])", "_", field).lower()
    return field or None


def _seconds_in(match: re.Match[str]) -> float | None:
    groups = match.groupdict()
    if groups.get("dur"):
        parts = DURATION_PART.findall(groups["dur"])
        seconds = sum(float(amount) * UNIT_SECONDS[unit] for amount, unit in parts)
    else:
        unit = groups["unit"].lower()
        scale = 0.001 if unit.startswith("milli") else 60.0 if unit.startswith("min") else 1.0
        seconds = float(groups["num"]) * scale
    return seconds if math.isfinite(seconds) else None


def _status(status: object) -> int | None:
    """The HTTP status as a number, or ``None`` for anything that is not one."""
    if (
        isinstance(status, str)
        and status.strip().isascii()
        and status.strip().isdigit()
        and len(status.strip()) == 3
    ):
        status = int(status.strip())
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 999:
        return status
    return None


def _lowered(headers: object) -> dict[str, object]:
    """Headers by lower-cased name, whatever shape they came in; names that are not text are left out."""
    if not headers:
        return {}
    try:
        items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return {}
    lowered: dict[str, object] = {}
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            name, value = item
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if isinstance(name, str):
                lowered[name.lower()] = value
    return lowered


def _number(value: object) -> float | None:
    """A header value as a finite number of seconds, whatever type it came as."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str) and len(value) <= 64:
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _http_date(value: object) -> float | None:
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str) or len(value) > 128:
        return None
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None  # not a date, or one no calendar holds (year 99999, an offset of days)


def _digits(text: str | None) -> int | None:
    """A count from the words; a run of digits longer than any window is not one."""
    return int(text) if text and len(text) <= 18 else None


def _dumped(body: object) -> str:
    """The whole body as text, for waits named outside the words; nothing when it cannot be written."""
    try:
        return json.dumps(body, default=str)
    except (TypeError, ValueError, RecursionError):
        return ""


def _scalar(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int):
        return str(value).strip() or None
    return None


def _param(value: object) -> str | None:
    if isinstance(value, str) and _FIELD_PATH.fullmatch(value) and value.lower() not in ("none", "null"):
        return value
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _optional_int(data: Mapping[str, object], key: str) -> int | None:
    value = data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidInput(f"failure {key} must be an int or null, got {value!r}")
    return value


def _optional_str(data: Mapping[str, object], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"failure {key} must be a string or null, got {value!r}")
    return value
