"""What a model call is, as one value, and where it reports: ``TurnRequest`` and ``TurnSink``.

A ``TurnRequest`` says everything about one call that does not change while it is tried: where it goes
(the endpoint, with its fallbacks, and the model), what it asks (a body, or a builder that makes one from
the latches on every attempt), how hard it tries (``RetryPolicy``), what may be dropped, the window it
must fit, how thinking is read out of the reply, and the host's interceptors. A ``TurnSink`` takes what
the call reports as it goes: answer text, reasoning, events, and which endpoint and model answered.

Both are frozen: a variant of a call (the same request held to a schema, asked without streaming its
text) is ``dataclasses.replace`` of it. A new request option is a field here and a line in the layer that
reads it (``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..events import Event
from ..wire.endpoints import Endpoint, Target
from ..wire.interceptors import Interceptors
from .assembly import TextCallback
from .capabilities import EndpointCapabilities, ModelCapabilities
from .fences import DEFAULT_FENCES, Fence

__all__ = ["BodyBuilder", "RetryPolicy", "TurnRequest", "TurnSink"]

#: Makes a request body from the endpoint's and the model's latches, on every attempt.
BodyBuilder: TypeAlias = Callable[[EndpointCapabilities, ModelCapabilities], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard one turn tries.

    Silence before the first token is bounded over the whole turn, not per attempt. An endpoint's
    first-token allowance (``Endpoint.first_token_timeout``, ten minutes by default) is sized for one long
    prefill on a CPU; multiplied by every re-send it let a dead endpoint (one that accepts the connection
    and never answers, or sends headers and then nothing) hold a turn for most of an hour. So the turn has
    ``first_token_budget_s`` of such silence in all. When an attempt reaches what is left of it, the
    endpoint is asked a cheap second question (``GET /models``, ``probe_timeout_s`` to answer): one that
    does not answer is given up on there and then, without another attempt; one that answers is working on
    it (a 2,500-token prompt takes 13 s on two CPU cores, and minutes on a loaded machine), so the attempt
    goes on up to its own allowance, asked again every ``first_token_budget_s``. By default a dead
    endpoint fails within two minutes with every backoff added (``silence_bound_s``); a live one is never
    cut short of its allowance.

    Attributes:
        max_retries: re-sends after transient failures (a model still loading does not spend these).
        base_delay_s: the first backoff; doubled per retry, with jitter.
        max_delay_s: the longest backoff of our own choosing.
        max_retry_delay_s: the longest wait a server may ask for (``Retry-After``, ``retry-after-ms``, or
            its body) before a re-send; a longer ask fails the turn at once with ``RetryDelayTooLong``,
            which carries the wait asked for, rather than waiting or sending again. 0 lifts the cap.
        loading_timeout_s: how long to wait for a model still loading; 0 turns the wait off.
        loading_poll_s: how often to ask again while it loads.
        busy_timeout_s: how long to keep sending again, with backoffs of up to ``max_delay_s``, to a local
            server whose slots' shared cache other requests filled (llama-server's "Context size has been
            exceeded", before anything was shown); such waits do not spend ``max_retries``. Other
            processes' requests hold that cache for tens of seconds on a CPU, far past three short backoffs:
            with three processes on one bundled server, runs stopped with that error. 0: such failures
            are retried as any transient one.
        first_token_budget_s: seconds one turn may spend, over all its attempts, on attempts that got no
            first token (silence before it, connections that timed out) before the endpoint must show it
            is there. ``None`` lifts the bound: each attempt then has the endpoint's whole allowance. An
            endpoint with no allowance at all (``request_timeout=None``) waits as long as it was told to.
        probe_timeout_s: how long the endpoint has to answer that question.
        carry_on_cut_answers: an answer whose stream broke after some of it was shown (a dropped
            connection, silence, a server's error event such as a full shared cache) cannot be sent
            again without showing it twice; with this on, a run carries it on from where it stopped,
            with the text so far as a trailing assistant message, after a backoff, up to
            ``max_retries`` times. Off by default: only a server that continues such a message (llama.cpp's
            llama-server, Anthropic) gives one answer; one that answers it afresh (OpenAI's API, vLLM by
            default) can give two stitched together where its fresh answer opens differently. Off, the
            run stops with the error and keeps what was shown.
    """

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_retry_delay_s: float = 60.0
    loading_timeout_s: float = 120.0
    loading_poll_s: float = 2.0
    busy_timeout_s: float = 180.0
    first_token_budget_s: float | None = 90.0
    probe_timeout_s: float = 15.0
    carry_on_cut_answers: bool = False

    @property
    def silence_bound_s(self) -> float | None:
        """The longest a turn can take against an endpoint that never answers: the budget, the probe, and
        the longest backoff before every re-send. ``None`` when the budget is lifted."""
        if self.first_token_budget_s is None:
            return None
        backoffs = sum(
            min(self.base_delay_s * 2.0**retry, self.max_delay_s) for retry in range(self.max_retries)
        )
        return self.first_token_budget_s + self.probe_timeout_s + backoffs


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """One model call: where it goes, what it asks, and how it is tried.

    Attributes:
        endpoint: where it goes; an endpoint with ``fallbacks`` is a failover chain.
        body: the chat-completions body the caller wants, or a builder that makes one from the latches.
            A plain body has the latches applied for it (token-limit spelling, temperature, effort,
            refused fields, relaxed tool schemas).
        model: the model, for its latches and calibration (default: ``body["model"]``).
        policy: retries, the loading wait and the first-token budget.
        context_limit: the window in tokens; a body that cannot fit is refused before sending.
        droppable: extra-body fields that may be dropped when the endpoint refuses them.
        fences: thinking fences to take out of content.
        start_in_reasoning: the template opened a thinking block in the prompt.
        step: the step number stamped on events.
        interceptors: the host's code at the edges of every attempt (``on_payload``, ``on_response``,
            ``on_sse_event`` are called once per attempt); ``on_assistant_event`` sees each text and
            reasoning piece, as a ``MessageUpdate``, before the sink hears it.
    """

    endpoint: Endpoint
    body: Mapping[str, Any] | BodyBuilder
    model: str | None = None
    policy: RetryPolicy = RetryPolicy()
    context_limit: int | None = None
    droppable: Collection[str] = ()
    fences: Sequence[Fence] = DEFAULT_FENCES
    start_in_reasoning: bool = False
    step: int = 0
    interceptors: Interceptors | None = None

    @property
    def named_model(self) -> str | None:
        """The model the call is for: ``model``, else a plain body's own ``model``."""
        if callable(self.body):
            return self.model
        if self.model:
            return self.model
        named = self.body.get("model")
        return named if isinstance(named, str) else None


@dataclass(frozen=True, slots=True)
class TurnSink:
    """Where a model call reports.

    Attributes:
        on_output: answer text as it streams.
        on_thinking: reasoning as it streams.
        on_event: ``RequestSent``, ``Retry``, ``Failover``, ``Downgrade`` and ``Notice`` events.
        on_answered: told which endpoint and model answered, without fallbacks: where anything that
            carries this answer on (a continuation) must go, so that no other model adds to it.
        output_held: ``on_output`` holds the text back and shows none of it until the turn is whole (an
            answer checked before it is shown): answer text alone then does not keep a failed request
            from being sent again, as text shown to someone does.
        enough: makes a new watch for each request sent: fed the answer text as it streams, the watch
            returns why the reply has said enough, or ``None``. The attempt then stops reading (which
            stops the server writing), the turn ends with finish reason ``"enough"``, and a notice gives
            the reason. A holder that reads its answer against something the turn layer does not know
            (the tool results a routed answer is written from) stops it this way.
    """

    on_output: TextCallback | None = None
    on_thinking: TextCallback | None = None
    on_event: Callable[[Event], object] | None = None
    on_answered: Callable[[Target], object] | None = None
    output_held: bool = False
    enough: Callable[[], Callable[[str], str | None]] | None = None

    def emit(self, event: Event) -> None:
        """Tell ``on_event`` of ``event``, when there is one to tell."""
        if self.on_event is not None:
            self.on_event(event)
