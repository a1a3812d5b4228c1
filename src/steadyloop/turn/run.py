"""``run_turn``: one turn with the retry loop around the negotiation around the stream.

Layering, outside in: the sizing guard (once: a body that cannot fit is refused before it is sent), the
retry loop (transient failures, a model still loading), the failover chain (an endpoint's ``fallbacks``,
tried in order within one attempt), negotiation (refusals the request can do without), and the streamed
request under its watchdog. Nothing is ever re-sent once output was produced: torn output cannot be
redone, and another model's answer is never stitched onto it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..context.calibration import body_chars, body_has_image, calibrate, chars_per_token_for
from ..context.counting import measure_before_sending
from ..context.tokens import request_tokens
from ..errors import ContextOverflow, EndpointError, EndpointSilent, QuotaExhausted, RetryDelayTooLong
from ..events import Downgrade, Event, Notice, Retry
from ..messages import Turn
from ..tools.schema_compat import relax_tools
from ..wire.endpoints import Endpoint, Target
from ..wire.failures import prompt_truncated
from ..wire.interceptors import Interceptors
from ..wire.liveness import endpoint_answers
from ..wire.provider import provider_for
from .assembly import Produced, TextCallback
from .body import apply_latches
from .capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from .failover import failover_event, hops
from .fences import DEFAULT_FENCES, Fence
from .negotiate import Downgraded, negotiate
from .stream import stream_turn

__all__ = ["BodyBuilder", "RetryPolicy", "backoff_delay", "run_turn"]

BodyBuilder = Callable[[EndpointCapabilities, ModelCapabilities], Mapping[str, Any]]

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 529})

# Less than this left of the first-token budget is not worth another attempt.
_LEAST_ALLOWANCE_S = 0.05


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
        first_token_budget_s: seconds one turn may spend, over all its attempts, on attempts that got no
            first token (silence before it, connections that timed out) before the endpoint must show it
            is there. ``None`` lifts the bound: each attempt then has the endpoint's whole allowance. An
            endpoint with no allowance at all (``request_timeout=None``) waits as long as it was told to.
        probe_timeout_s: how long the endpoint has to answer that question.
    """

    max_retries: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_retry_delay_s: float = 60.0
    loading_timeout_s: float = 120.0
    loading_poll_s: float = 2.0
    first_token_budget_s: float | None = 90.0
    probe_timeout_s: float = 15.0

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


def backoff_delay(
    retry: int, policy: RetryPolicy, retry_after: float | None = None, rng: random.Random | None = None
) -> float:
    """Seconds to wait before re-send number ``retry`` (from 0): the server's ask, else ours.

    Ours is exponential with jitter (between half and all of the step), so clients that failed together
    do not come back together.
    """
    if retry_after is not None and retry_after >= 0:
        cap = policy.max_retry_delay_s
        return min(retry_after, cap) if cap > 0 else retry_after
    step = min(policy.base_delay_s * (2.0**retry), policy.max_delay_s)
    draw: float = (rng or random).random()
    return step * (0.5 + 0.5 * draw)


def _check_retry_delay(error: EndpointError, policy: RetryPolicy) -> None:
    """Refuse to wait longer than the policy allows: a server asking for more fails the turn now, with the
    wait it asked for, so whoever is waiting sees it instead of a turn that hangs and then tries again."""
    asked, cap = error.retry_after, policy.max_retry_delay_s
    if asked is None or cap <= 0 or asked <= cap:
        return
    raise RetryDelayTooLong(
        f"the endpoint asked to wait {asked:g}s before trying again, longer than max_retry_delay_s "
        f"({cap:g}s): {error}",
        max_delay_s=cap,
        endpoint=error.endpoint,
        model=error.model,
        status=error.status,
        body=error.body,
        retry_after=asked,
        kind=error.kind,
        field=error.field,
        supported=error.supported,
    ) from error


def _is_transient(error: EndpointError) -> bool:
    # Decided by what the failure is, not its status alone: a 500 that says the grammar failed will fail
    # the same way again, and a 429 for an exhausted quota does not clear by waiting.
    if isinstance(error, EndpointSilent):
        return True
    if isinstance(error, QuotaExhausted):
        return False  # a quota counted per day: waiting seconds does not clear it
    if error.kind in ("transient", "rate_limited"):
        return True
    return error.kind is None and (error.status is None or error.status in TRANSIENT_STATUSES)


async def run_turn(
    endpoint: Endpoint,
    body: Mapping[str, Any] | BodyBuilder,
    *,
    model: str | None = None,
    policy: RetryPolicy | None = None,
    context_limit: int | None = None,
    droppable: Collection[str] = (),
    on_output: TextCallback | None = None,
    on_thinking: TextCallback | None = None,
    on_event: Callable[[Event], object] | None = None,
    fences: Sequence[Fence] = DEFAULT_FENCES,
    start_in_reasoning: bool = False,
    step: int = 0,
    interceptors: Interceptors | None = None,
    on_answered: Callable[[Target], object] | None = None,
) -> Turn:
    """Send one turn reliably: sized, negotiated, retried, watched.

    Args:
        endpoint: where to send it.
        body: the chat-completions body the caller wants, or a builder that makes one from the latches.
            A plain body has the latches applied for it (token-limit spelling, temperature, effort,
            refused fields, relaxed tool schemas).
        model: the model, for its latches and calibration (default: ``body["model"]``).
        policy: retries and the loading wait.
        context_limit: the window in tokens; a body that cannot fit is refused before sending.
        droppable: extra-body fields that may be dropped when the endpoint refuses them.
        on_output: answer text as it streams.
        on_thinking: reasoning as it streams.
        on_event: ``Retry``, ``Failover``, ``Downgrade`` and ``Notice`` events.
        fences: thinking fences to take out of content.
        start_in_reasoning: the template opened a thinking block in the prompt.
        step: the step number stamped on events.
        interceptors: the host's code at the edges of every attempt (``on_payload``, ``on_response``,
            ``on_sse_event`` are called once per attempt); ``on_assistant_event`` sees each text and
            reasoning piece, as a ``MessageUpdate``, before ``on_output``/``on_thinking``.
        on_answered: told which endpoint and model answered, without fallbacks: where anything that
            carries this answer on (a continuation) must go, so that no other model adds to it.

    An endpoint with ``fallbacks`` is a failover chain: a failure before anything was shown that says
    nothing about the request itself (auth, rate limit, not found, network, silence, overloaded, a model
    loading) hands the turn to the next candidate at once, with a ``Failover`` event; when the last one
    fails too, the retry loop treats its failure as it would a single endpoint's and starts again from
    the first. Sizing and the context window are the first candidate's.

    Raises:
        ContextOverflow: the body does not fit (before sending, or as the endpoint said).
        RetryDelayTooLong: the endpoint asked to wait longer than ``policy.max_retry_delay_s``.
        InterceptorFailed: an interceptor raised; the turn is not retried.
        EndpointSilent: the stream went silent after producing output, or on every attempt.
        EndpointError: any other failure, once retries are spent.
    """
    policy = policy or RetryPolicy()
    caps = capabilities_for(endpoint)
    if callable(body):
        builder: BodyBuilder = body
        name = model
    else:
        requested = dict(body)
        name = model or (requested.get("model") if isinstance(requested.get("model"), str) else None)
        builder = _Latched(requested)

    latches = caps.model(name)
    asked = builder(caps, latches)
    # The effort the caller asked for: a plain body's own, before the latches moved it.
    source = builder.requested if isinstance(builder, _Latched) else asked
    effort = source.get("reasoning_effort")
    effort = effort if isinstance(effort, str) else None

    # Sized once: a downgraded request is never larger, and the transcript does not change on retry.
    chars = body_chars(asked)
    has_image = body_has_image(asked)
    # Before the endpoint has reported a count, the model's tokenizer (where there is one) calibrates.
    await measure_before_sending(
        endpoint,
        name,
        asked,
        on_notice=None
        if on_event is None
        else lambda text: on_event(Notice(text=text, name="tokenizer", step=step)),
    )
    if context_limit:
        need = request_tokens(asked, chars_per_token=chars_per_token_for(endpoint, name or ""))
        if need > context_limit:
            raise ContextOverflow(
                f"the request needs about {need} tokens but {name or 'the model'} has a window of "
                f"{context_limit}",
                limit=context_limit,
                requested=need,
                endpoint=endpoint.base_url,
                model=name,
                kind="context_overflow",
            )

    sender = _Sender(
        endpoint, builder, caps, policy, on_output, on_thinking, on_event, fences, start_in_reasoning, step
    )
    sender.interceptors = interceptors
    sender.first = asked
    sender.model = name
    emit = sender.emit
    chain = [sender]
    for target in endpoint.fallbacks:
        fallback_model = target.model or name
        chain.append(
            _Sender(
                target.endpoint,
                _for_model(builder, fallback_model),
                capabilities_for(target.endpoint),
                policy,
                on_output,
                on_thinking,
                on_event,
                fences,
                start_in_reasoning,
                step,
            )
        )
        chain[-1].model = fallback_model
        chain[-1].interceptors = interceptors

    started = time.perf_counter()
    retries = 0
    timeouts = 0
    loading_since: float | None = None
    allowance = endpoint.first_chunk_timeout
    budget = policy.first_token_budget_s if allowance is not None else None
    silent_s = 0.0
    while True:
        produced = Produced()
        if budget is not None:
            for candidate in chain:
                candidate.probe_after = budget - silent_s
        attempt_started = time.monotonic()
        try:
            turn, answered = await _through_chain(chain, produced, effort, droppable, step)
            break
        except EndpointError as error:
            if produced.value or isinstance(error, ContextOverflow):
                raise
            if error.kind == "model_loading" and policy.loading_timeout_s > 0:
                now = time.monotonic()
                if loading_since is None:
                    loading_since = now
                    emit(Notice(text=f"{endpoint.shown_url} is loading the model; waiting", name="loading"))
                if now - loading_since < policy.loading_timeout_s:
                    await asyncio.sleep(policy.loading_poll_s)
                    continue
                raise
            if not _is_transient(error) or retries >= policy.max_retries:
                raise
            if budget is not None and (isinstance(error, EndpointSilent) or error.status is None):
                # An attempt that got nothing back, however it ended: it spent the first-token budget.
                silent_s += time.monotonic() - attempt_started
                if budget - silent_s < _LEAST_ALLOWANCE_S:
                    raise
            if isinstance(error, EndpointSilent):
                timeouts += 1
            _check_retry_delay(error, policy)
            delay = backoff_delay(retries, policy, error.retry_after)
            retries += 1
            emit(Retry(attempt=retries, delay_s=delay, reason=str(error), step=step))
            await asyncio.sleep(delay)

    usage = turn.usage.with_(
        wall_ms=(time.perf_counter() - started) * 1000, retries=retries, timeouts=timeouts
    )
    if on_answered is not None:
        pinned = (
            replace(answered.endpoint, fallbacks=()) if answered.endpoint.fallbacks else answered.endpoint
        )
        on_answered(Target(pinned, answered.model))
    prompt = usage.prompt_tokens
    if prompt > 0 and chars > 0:
        if prompt_truncated(-(-chars // 8), prompt):
            # More than eight characters a token is no tokenizer: the server read less than it was sent.
            emit(
                Notice(
                    text=f"the endpoint reported {prompt} prompt tokens for about {chars} characters: it "
                    "probably truncated the prompt (Ollama does this silently; set its num_ctx)",
                    name="truncated",
                    step=step,
                )
            )
        else:
            if answered is not sender:  # a fallback's request differs in its model and latches
                chars = body_chars(answered.sent)
            calibrate(answered.endpoint, answered.model or "", chars, prompt, has_image=has_image)
    return Turn(
        content=turn.content,
        reasoning=turn.reasoning,
        tool_calls=turn.tool_calls,
        usage=usage,
        finish_reason=turn.finish_reason,
        thinking=turn.thinking,
    )


async def _through_chain(
    chain: Sequence[_Sender], produced: Produced, effort: str | None, droppable: Collection[str], step: int
) -> tuple[Turn, _Sender]:
    """One attempt: each candidate in order until one answers, or one fails in a way that must not hop."""
    last = len(chain) - 1
    for index, candidate in enumerate(chain):
        try:
            turn = await negotiate(
                candidate.caps,
                candidate.send,
                model=candidate.model,
                effort=effort,
                droppable=droppable,
                sent_fields=candidate.fields_sent,
                on_downgrade=candidate.downgraded,
                produced=produced,
            )
        except EndpointError as error:
            if index == last or produced.value or isinstance(error, ContextOverflow) or not hops(error):
                raise
            following = chain[index + 1]
            candidate.emit(
                failover_event(
                    candidate.endpoint, candidate.model, following.endpoint, following.model, error, step
                )
            )
            continue
        return turn, candidate
    raise AssertionError("a chain has at least one candidate")  # pragma: no cover


def _for_model(builder: BodyBuilder, model: str | None) -> BodyBuilder:
    """The builder of a fallback: the same request, naming the fallback's model."""
    if isinstance(builder, _Latched):
        requested = dict(builder.requested)
        if model is not None:
            requested["model"] = model
        return _Latched(requested)

    def build(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = builder(c, m)
        return {**body, "model": model} if model is not None else body

    return build


class _Latched:
    """A body the caller built, with the latches applied again on every attempt."""

    __slots__ = ("requested",)

    def __init__(self, requested: dict[str, Any]) -> None:
        self.requested = requested

    def __call__(self, c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        return apply_latches(self.requested, c, m, relax=relax_tools)


class _Sender:
    """One turn's attempts: each rebuilds the body from the latches and streams it.

    A class rather than closures: a thousand runs in flight each hold one of these for as long as their
    stream lasts, and one slotted object is far less for the cyclic collector to scan than a dozen cells.
    """

    __slots__ = (
        "builder",
        "caps",
        "client",
        "endpoint",
        "fences",
        "first",
        "interceptors",
        "model",
        "on_event",
        "on_output",
        "on_thinking",
        "policy",
        "probe_after",
        "sent",
        "start_in_reasoning",
        "step",
    )

    def __init__(
        self,
        endpoint: Endpoint,
        builder: BodyBuilder,
        caps: EndpointCapabilities,
        policy: RetryPolicy,
        on_output: TextCallback | None,
        on_thinking: TextCallback | None,
        on_event: Callable[[Event], object] | None,
        fences: Sequence[Fence],
        start_in_reasoning: bool,
        step: int,
    ) -> None:
        self.endpoint = endpoint
        self.client = provider_for(endpoint)
        self.builder = builder
        self.caps = caps
        self.on_output = on_output
        self.on_thinking = on_thinking
        self.on_event = on_event
        self.fences = fences
        self.start_in_reasoning = start_in_reasoning
        self.step = step
        self.sent: dict[str, Any] = {}
        self.model: str | None = None  # the model this candidate asks for, for its latches
        # The body built for sizing, sent as it is by the first attempt: nothing can move the latches
        # between the two, and building a body costs as much as reading a short reply.
        self.first: Mapping[str, Any] | None = None
        # What is left of the turn's first-token budget: past it, this attempt asks whether the endpoint
        # is there at all.
        self.policy = policy
        self.probe_after: float | None = None
        self.interceptors: Interceptors | None = None

    def emit(self, event: Event) -> None:
        if self.on_event is not None:
            self.on_event(event)

    async def send(self, c: EndpointCapabilities, m: ModelCapabilities, produced: Produced) -> Turn:
        first, self.first = self.first, None
        self.sent = dict(first if first is not None else self.builder(c, m))
        endpoint = self.endpoint
        return await stream_turn(
            self.client,
            self.sent,
            on_output=self.on_output,
            on_thinking=self.on_thinking,
            produced=produced,
            idle_timeout=endpoint.idle_timeout,
            first_token_timeout=endpoint.first_chunk_timeout,
            fences=self.fences,
            start_in_reasoning=self.start_in_reasoning,
            include_usage=c.usage_in_stream,
            on_event=self.on_event,
            step=self.step,
            latches=m,
            probe=self.probe if self.probe_after is not None else None,
            probe_after=self.probe_after,
            interceptors=self.interceptors,
        )

    async def probe(self) -> bool:
        return await endpoint_answers(self.endpoint, self.policy.probe_timeout_s)

    def fields_sent(self) -> Collection[str]:
        fields = set(self.sent)
        if self.caps.usage_in_stream:
            fields.add("stream_options")
        return fields

    def downgraded(self, change: Downgraded) -> None:
        self.emit(Downgrade(field=change.field, reason=change.reason, value=change.value, step=self.step))
        self.emit(Notice(text=change.notice, name="downgrade", step=self.step))
