"""The one exception tree every steadyloop error belongs to (public).

::

    SteadyloopError
    ├── InvalidInput                 bad values from the caller (also a ValueError)
    │   ├── TranscriptError          a transcript no server would accept
    │   ├── SpecError                an agent document was refused, every reason listed (steadyloop.spec)
    │   └── UnknownProvider          a provider name steadyloop does not know (steadyloop.providers)
    ├── ToolArgumentsError           a tool call's arguments are not an object (kind: truncated | malformed)
    ├── InterceptorFailed            a host's interceptor raised (``interceptor`` names which)
    ├── EndpointError                a request to an endpoint failed (endpoint, model, status, words)
    │   ├── EndpointSilent           the stream went quiet past the watchdog's allowance
    │   ├── EndpointUnavailable      transport failure or a transient status, retries spent
    │   │   ├── EndpointUnreachable  no answer came: refused, DNS, TLS, timeout or a drop (``connection``)
    │   │   └── RetryDelayTooLong    the server asked to wait longer than the retry policy allows
    │   ├── EndpointUnreadable       a success whose body is no event stream and no completion
    │   └── EndpointRefused          the endpoint refused the request as it stands
    │       ├── ContextOverflow      the request does not fit the model's window
    │       ├── ModelRefusal         the model declined to answer (kind "refusal", with a category)
    │       ├── QuotaExhausted       a quota counted per day is used up (kind "rate_limited")
    │       └── MissingApiKey        the endpoint needs a key and has none; nothing was sent
    ├── RunError                     a run stopped early; carries the transcript so far
    │   ├── RunCancelled             the caller cancelled it (reason "cancelled")
    │   │   └── RunTimedOut          it outlived its run_timeout (reason "timeout")
    │   ├── RunLimitReached          max_turns or max_tool_iterations ran out (reason "max_turns" | "max_iterations")
    │   ├── ToolLoopDetected         the model kept repeating the same calls (reason "loop_detected")
    │   ├── ModelCallDenied          a before_llm_call hook refused the request (reason "hook_denied")
    │   ├── OutputInvalid            the answer kept missing the response schema (reason "invalid_output")
    │   ├── TranscriptRewritten      a request rewrote what the previous one sent (reason "rewritten")
    │   ├── RunInterceptorFailed     an interceptor raised; also an InterceptorFailed (reason "interceptor")
    │   └── RunEndpointError         a request failed; also an EndpointError (reason "endpoint")
    │       ├── RunEndpointSilent        also an EndpointSilent
    │       ├── RunEndpointUnavailable   also an EndpointUnavailable
    │       │   ├── RunEndpointUnreachable also an EndpointUnreachable
    │       │   └── RunRetryDelayTooLong also a RetryDelayTooLong
    │       ├── RunEndpointUnreadable    also an EndpointUnreadable
    │       └── RunEndpointRefused       also an EndpointRefused
    │           ├── RunContextOverflow   also a ContextOverflow (reason "overflow")
    │           ├── RunModelRefusal      also a ModelRefusal (reason "refusal")
    │           ├── RunQuotaExhausted    also a QuotaExhausted (reason "quota")
    │           └── RunMissingApiKey     also a MissingApiKey
    ├── MCPError                     an MCP server failed (steadyloop.tools.mcp)
    ├── StoreUnavailable             the session store's database could not be reached
                                     (steadyloop.sessions)
    ├── TokenizerUnavailable         a token counter cannot count (its extra, its data, its endpoint)
    └── LocalServerError             the bundled local server could not be installed or started
                                     (steadyloop.local)

Every error carries what a caller needs to act on it: which endpoint and model, the HTTP status, the
server's own words, how long the server asked us to wait, and for a run, the transcript up to the stop.

A run that stops because a request failed raises a ``RunEndpointError`` of the matching kind, so one
error is both: ``except ContextOverflow`` (or ``EndpointSilent``, ...) catches it as the endpoint's
failure, with the endpoint's attributes, and ``except RunError`` catches it as the stop of a run, with the
transcript. Every stop of a run is a ``RunError`` whatever its cause, and ``reason`` names the cause in
one word for a log or a row.

No error carries a credential: a password in a ``user:password@host`` URL is written ``***`` in every
message and in ``endpoint``, whoever built the error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    from .messages import Message
    from .usage import Usage

__all__ = [
    "ContextOverflow",
    "EndpointError",
    "EndpointRefused",
    "EndpointSilent",
    "EndpointUnavailable",
    "EndpointUnreachable",
    "EndpointUnreadable",
    "InterceptorFailed",
    "InvalidInput",
    "MissingApiKey",
    "ModelCallDenied",
    "ModelRefusal",
    "OutputInvalid",
    "QuotaExhausted",
    "RetryDelayTooLong",
    "RunCancelled",
    "RunContextOverflow",
    "RunEndpointError",
    "RunEndpointRefused",
    "RunEndpointSilent",
    "RunEndpointUnavailable",
    "RunEndpointUnreachable",
    "RunEndpointUnreadable",
    "RunError",
    "RunInterceptorFailed",
    "RunLimitReached",
    "RunMissingApiKey",
    "RunModelRefusal",
    "RunQuotaExhausted",
    "RunRetryDelayTooLong",
    "RunTimedOut",
    "SteadyloopError",
    "TokenizerUnavailable",
    "ToolArgumentsError",
    "ToolLoopDetected",
    "TranscriptError",
    "TranscriptRewritten",
    "error_code",
    "error_type",
    "redact_url",
    "run_error_for",
]

# The userinfo of a URL (``scheme://user:password@``, or a token alone before the ``@``).
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][\w+.-]{0,20}://)(?P<user>[^/\s:@]*)(?P<secret>:[^/\s@]*)?@")


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden: ``http://user:key@host`` becomes
    ``http://user:***@host``, and ``http://token@host`` becomes ``http://***@host``."""
    if "@" not in text:
        return text
    return _USERINFO.sub(_hidden, text)


def _hidden(match: re.Match[str]) -> str:
    if match.group("secret") is None:
        return f"{match.group('scheme')}***@"
    return f"{match.group('scheme')}{match.group('user')}:***@"


def error_type(error: BaseException) -> str:
    """The error's class by its canonical name: ``steadyloop.errors.RunEndpointUnavailable``, ``ValueError``.

    Builtins go by their bare name, as Python itself writes them; anything else with its module, so two
    classes of one name in different packages stay apart.
    """
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def error_code(error: BaseException) -> str | None:
    """The code the endpoint answered a failed request with (its HTTP status), when it answered one."""
    status = error.status if isinstance(error, EndpointError) else None
    return str(status) if status is not None else None


class SteadyloopError(Exception):
    """The root of every error steadyloop raises. Its message never shows a URL's credentials."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_url(arg) if isinstance(arg, str) else arg for arg in args))


class InvalidInput(SteadyloopError, ValueError):
    """A value the caller passed cannot be used as it is; the message says which and why."""


class TranscriptError(InvalidInput):
    """A transcript breaks a rule servers enforce (orphan results, duplicate call ids, ...).

    Attributes:
        index: position of the first offending message, when there is one.
    """

    def __init__(self, message: str, *, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


class ToolArgumentsError(SteadyloopError):
    """A tool call's arguments could not be read as a JSON object.

    The message is written for the model to read, so it can be returned as the tool's result.

    Attributes:
        kind: ``"truncated"`` when the turn stopped before it was done (at its token ceiling, or in a
            loop), ``"malformed"`` otherwise.
        raw: the arguments text as the model wrote it.
    """

    def __init__(self, message: str, *, kind: Literal["truncated", "malformed"], raw: str = "") -> None:
        super().__init__(message)
        self.kind: Literal["truncated", "malformed"] = kind
        self.raw = raw


class EndpointError(SteadyloopError):
    """A request to an endpoint failed.

    Attributes:
        endpoint: the base URL (never the key).
        model: the model the request named, when known.
        status: the HTTP status, ``None`` for a transport failure or a silent stream.
        body: the server's own words (its error message, or the raw body).
        retry_after: seconds the server asked us to wait, when it said.
        kind: the classification of the failure (see ``classify_failure``), when one was made; besides
            its kinds, ``"unreachable"`` for a connection that cannot succeed as things stand (nothing
            listening, a host name that does not resolve, a certificate not trusted), ``"silent"`` and
            ``"unreadable"``.
        field: the request field the server refused, where it named one.
        supported: values the server said it would take instead, where it listed them.
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str | None = None,
        model: str | None = None,
        status: int | None = None,
        body: str | None = None,
        retry_after: float | None = None,
        kind: str | None = None,
        field: str | None = None,
        supported: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.field = field
        self.supported = supported
        self.endpoint = redact_url(endpoint) if isinstance(endpoint, str) else endpoint
        self.model = model
        self.status = status
        self.body = redact_url(body) if isinstance(body, str) else body
        self.retry_after = retry_after
        self.kind = kind


class EndpointSilent(EndpointError):
    """The endpoint stopped sending (or never started) for longer than the watchdog allows.

    Attributes:
        waited: seconds of silence before giving up.
        produced: whether any text or reasoning had been shown before the silence (a tool call streaming
            in shows nothing, so the request could still be sent again).
    """

    def __init__(self, message: str, *, waited: float, produced: bool, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.waited = waited
        self.produced = produced


class EndpointUnavailable(EndpointError):
    """The endpoint could not be reached, or kept answering with a transient failure."""


#: How a connection failed before any answer came (``EndpointUnreachable.connection``).
Connection: TypeAlias = Literal["refused", "dns", "tls", "timeout", "dropped", "other"]


class EndpointUnreachable(EndpointUnavailable):
    """No answer came: the connection could not be made, or broke before the server said anything.

    ``connection`` says how, in a word a caller can act on; the message says it in words, with the fix.
    Nothing listening (``"refused"``), a host name that does not resolve (``"dns"``) and a certificate
    not trusted (``"tls"``) meet the same wall when sent again at once, so they are not retried and
    ``kind`` is ``"unreachable"``; the rest are ``"transient"`` and retried like a 503.

    Attributes:
        connection: ``"refused"`` (nothing listens on the port), ``"dns"`` (the host name did not
            resolve), ``"tls"`` (the TLS handshake failed: a certificate not trusted, or no TLS on that
            port), ``"timeout"`` (no connection, or no answer, within the allowance), ``"dropped"`` (the
            connection closed before an answer), ``"other"``.
        host: the host the connection was for, when known.
        port: its port, when known.
        problem: what happened, in a few words, without the fix ("nothing listens on 127.0.0.1:9").
        timeout_s: for a timeout, the allowance that ran out, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        connection: Connection,
        host: str | None = None,
        port: int | None = None,
        problem: str = "",
        timeout_s: float | None = None,
        **kw: object,
    ) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.connection: Connection = connection
        self.host = host
        self.port = port
        self.problem = redact_url(problem)
        self.timeout_s = timeout_s


class RetryDelayTooLong(EndpointUnavailable):
    """The server asked to be asked again later than the retry policy waits (``max_retry_delay_s``).

    Raised at once, without waiting and without sending again, so a caller (or a person) decides what a
    long wait is worth. ``retry_after`` is the wait the server asked for, in seconds.

    Attributes:
        max_delay_s: the longest wait the policy allowed.
    """

    def __init__(self, message: str, *, max_delay_s: float, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.max_delay_s = max_delay_s


class EndpointUnreadable(EndpointError):
    """The endpoint answered a success whose body is neither an event stream nor a chat completion.

    An HTML page from a proxy or a login wall, plain text, a truncated document: sending the request again
    gets the same page, so it is not retried. ``body`` quotes the first bytes (bounded, credentials masked).

    Attributes:
        content_type: the response's ``Content-Type``, ``""`` when it sent none.
    """

    def __init__(self, message: str, *, content_type: str = "", **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.content_type = content_type


class EndpointRefused(EndpointError):
    """The endpoint refused the request as it stands; re-sending it unchanged will not help."""


class ModelRefusal(EndpointRefused):
    """The model declined to answer: a provider's safety or recitation stop, not a blank reply.

    Anthropic ends such a reply with ``stop_reason: refusal``; Gemini with a ``SAFETY``, ``RECITATION``
    (or similar) finish reason. Sending the same request again gets the same answer. ``kind`` is
    ``"refusal"``.

    Attributes:
        category: what the provider named as the reason (``"cyber"``, ``"SAFETY"``, ``"RECITATION"``),
            ``None`` when it named none.
    """

    def __init__(self, message: str, *, category: str | None = None, **kw: object) -> None:
        kw.setdefault("kind", "refusal")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.category = category


class QuotaExhausted(EndpointRefused):
    """A quota counted per day is used up, and the server named no wait: the request cannot succeed again
    until the quota resets (Gemini's free tier, Code Assist, OpenRouter's free models). It is not retried;
    a failover chain hands the turn to its next candidate, as for any rate limit. ``kind`` is
    ``"rate_limited"``.

    Attributes:
        period: what the quota is counted over (``"day"``).
    """

    def __init__(self, message: str, *, period: str = "day", **kw: object) -> None:
        kw.setdefault("kind", "rate_limited")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.period = period


class MissingApiKey(EndpointRefused):
    """The endpoint needs an API key and none was given; raised before anything is sent (``kind``
    ``"auth"``, no status).

    A hosted provider's endpoint made by ``sl.provider`` or ``Endpoint.from_env`` at the provider's own
    URL needs a key; a local server, or a URL of the caller's own (a proxy may add the key), does not.

    Attributes:
        variables: the environment variables the key is read from, in the order they are tried
            (``("GEMINI_API_KEY", "GOOGLE_API_KEY")``).
    """

    def __init__(self, message: str, *, variables: tuple[str, ...] = (), **kw: object) -> None:
        kw.setdefault("kind", "auth")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.variables = variables


class ContextOverflow(EndpointRefused):
    """The request does not fit the model's context window.

    Raised before sending when the sizing guard knows the window, or from the endpoint's own refusal.

    Attributes:
        limit: the window in tokens, when known.
        requested: the tokens the request needed (estimated or as the server counted), when known.
    """

    def __init__(
        self, message: str, *, limit: int | None = None, requested: int | None = None, **kw: object
    ) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.limit = limit
        self.requested = requested


class TokenizerUnavailable(SteadyloopError):
    """A token counter cannot count: its extra is not installed, its data cannot be loaded, or the
    provider's count endpoint failed. The message says which and how to fix it."""


class InterceptorFailed(SteadyloopError):
    """One of the host's interceptors (``steadyloop.Interceptors``) raised; the request or turn it was
    watching ends there, and is not retried. The interceptor's exception is chained as ``__cause__``.

    Attributes:
        interceptor: which one: ``"on_payload"``, ``"on_response"``, ``"on_sse_event"`` or
            ``"on_assistant_event"``.
    """

    def __init__(self, message: str, *, interceptor: str) -> None:
        super().__init__(message)
        self.interceptor = interceptor


class RunError(SteadyloopError):
    """A run stopped before the model finished; nothing done so far is lost.

    Attributes:
        reason: why it stopped (``"max_iterations"``, ``"endpoint"``, ``"overflow"``, ``"timeout"``, ...).
        messages: the transcript so far, balanced so the next request can replay it.
        usage: tokens spent so far.
        steps: requests made.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        messages: Sequence[Message] = (),
        usage: Usage | None = None,
        steps: int = 0,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.messages = list(messages)
        self.usage = usage
        self.steps = steps


class RunCancelled(RunError):
    """The caller cancelled the run (``abort()``, its cancel event, or ``force_abort()``)."""


class RunTimedOut(RunCancelled):
    """The run took longer than its ``run_timeout`` and was cancelled there (reason ``"timeout"``).

    Attributes:
        timeout: the allowance, in seconds.
    """

    def __init__(self, message: str, *, timeout: float, **kw: object) -> None:
        kw.setdefault("reason", "timeout")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.timeout = timeout


class RunLimitReached(RunError):
    """The model wanted to go on past one of the run's budgets.

    ``max_turns`` counts requests and ``max_tool_iterations`` counts steps that ended in tool calls; both
    are checked at the same point, when the run would send another request, and both raise this. A step
    that answers without calling a tool ends the run normally, even at the limit.

    Attributes:
        limit: ``"max_turns"`` or ``"max_tool_iterations"``.
        value: the budget that ran out.
    """

    def __init__(self, message: str, *, limit: str, value: int, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.limit = limit
        self.value = value


class ToolLoopDetected(RunError):
    """The model kept repeating the same tool calls, so the run stopped (reason ``"loop_detected"``)."""


class ModelCallDenied(RunError):
    """A ``before_llm_call`` hook refused the request; the run ended before sending it.

    Attributes:
        hook_reason: what the hook said.
    """

    def __init__(self, message: str, *, hook_reason: str, **kw: object) -> None:
        kw.setdefault("reason", "hook_denied")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.hook_reason = hook_reason


class TranscriptRewritten(RunError):
    """A request about to be sent rewrote a message the previous request had sent, and the run's
    ``StablePrefix`` was told to refuse that (``on_rewrite="raise"``); nothing was sent.

    Attributes:
        index: the first message that differs, counted after the system prompt.
    """

    def __init__(self, message: str, *, index: int, **kw: object) -> None:
        kw.setdefault("reason", "rewritten")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.index = index


class OutputInvalid(RunError):
    """The final answer did not meet the response schema, also after it was sent back to be fixed.

    Attributes:
        problem: what was wrong with the last answer.
    """

    def __init__(self, message: str, *, problem: str, **kw: object) -> None:
        kw.setdefault("reason", "invalid_output")
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.problem = problem


class RunInterceptorFailed(RunError, InterceptorFailed):
    """A run stopped because one of its interceptors raised; also an ``InterceptorFailed``
    (reason ``"interceptor"``)."""

    def __init__(
        self,
        message: str,
        *,
        interceptor: str,
        reason: str = "interceptor",
        messages: Sequence[Message] = (),
        usage: Usage | None = None,
        steps: int = 0,
    ) -> None:
        InterceptorFailed.__init__(self, message, interceptor=interceptor)
        self.reason = reason
        self.messages = list(messages)
        self.usage = usage
        self.steps = steps


class RunEndpointError(RunError, EndpointError):
    """A run stopped because a request failed: the run's transcript and the endpoint's failure in one.

    It carries every attribute of the ``EndpointError`` it stands for (``endpoint``, ``status``, ``body``,
    ``retry_after``, ...; ``waited`` and ``produced`` for silence; ``limit`` and ``requested`` for an
    overflow) besides the run's ``messages``, ``usage`` and ``steps``. ``cause`` is the original error,
    also chained as ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        cause: EndpointError,
        reason: str = "endpoint",
        messages: Sequence[Message] = (),
        usage: Usage | None = None,
        steps: int = 0,
    ) -> None:
        Exception.__init__(self, message)
        # The endpoint's attributes first, then the run's, so neither side's names are lost.
        self.__dict__.update(cause.__dict__)
        self.cause = cause
        self.reason = reason
        self.messages = list(messages)
        self.usage = usage
        self.steps = steps


class RunEndpointSilent(RunEndpointError, EndpointSilent):
    """A run stopped because the endpoint went silent; also an ``EndpointSilent``."""

    waited: float
    produced: bool


class RunEndpointUnavailable(RunEndpointError, EndpointUnavailable):
    """A run stopped because the endpoint could not be reached; also an ``EndpointUnavailable``."""


class RunEndpointUnreachable(RunEndpointUnavailable, EndpointUnreachable):
    """A run stopped because no answer came from the endpoint; also an ``EndpointUnreachable``."""

    connection: Connection
    host: str | None
    port: int | None
    problem: str
    timeout_s: float | None


class RunRetryDelayTooLong(RunEndpointUnavailable, RetryDelayTooLong):
    """A run stopped because the server asked to wait longer than the retry policy allows; also a
    ``RetryDelayTooLong``."""

    max_delay_s: float


class RunEndpointUnreadable(RunEndpointError, EndpointUnreadable):
    """A run stopped because a success's body could not be read as an answer; also an
    ``EndpointUnreadable``."""


class RunEndpointRefused(RunEndpointError, EndpointRefused):
    """A run stopped because the endpoint refused a request; also an ``EndpointRefused``."""


class RunContextOverflow(RunEndpointRefused, ContextOverflow):
    """A run stopped because a request did not fit the window; also a ``ContextOverflow``."""

    limit: int | None
    requested: int | None


class RunModelRefusal(RunEndpointRefused, ModelRefusal):
    """A run stopped because the model declined to answer; also a ``ModelRefusal`` (reason ``"refusal"``)."""

    category: str | None


class RunQuotaExhausted(RunEndpointRefused, QuotaExhausted):
    """A run stopped because a daily quota is used up; also a ``QuotaExhausted`` (reason ``"quota"``)."""

    period: str


class RunMissingApiKey(RunEndpointRefused, MissingApiKey):
    """A run stopped because its endpoint needs a key it was not given; also a ``MissingApiKey``."""

    variables: tuple[str, ...]


def run_error_for(
    cause: EndpointError, message: str, *, messages: Sequence[Message], usage: Usage | None, steps: int
) -> RunEndpointError:
    """The run's stop for a failed request: the ``RunEndpointError`` of the cause's kind."""
    kind: type[RunEndpointError]
    reason = "endpoint"
    if isinstance(cause, ContextOverflow):
        kind, reason = RunContextOverflow, "overflow"
    elif isinstance(cause, ModelRefusal):
        kind, reason = RunModelRefusal, "refusal"
    elif isinstance(cause, QuotaExhausted):
        kind, reason = RunQuotaExhausted, "quota"
    elif isinstance(cause, MissingApiKey):
        kind = RunMissingApiKey
    elif isinstance(cause, EndpointRefused):
        kind = RunEndpointRefused
    elif isinstance(cause, EndpointSilent):
        kind = RunEndpointSilent
    elif isinstance(cause, RetryDelayTooLong):
        kind = RunRetryDelayTooLong
    elif isinstance(cause, EndpointUnreachable):
        kind = RunEndpointUnreachable
    elif isinstance(cause, EndpointUnavailable):
        kind = RunEndpointUnavailable
    elif isinstance(cause, EndpointUnreadable):
        kind = RunEndpointUnreadable
    else:
        kind = RunEndpointError
    return kind(message, cause=cause, reason=reason, messages=messages, usage=usage, steps=steps)
