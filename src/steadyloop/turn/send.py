"""``send_turn``: one model call, sent reliably, as named layers; ``run_turn``, the same spelled with keywords.

Outside in: the plan (``plan.py``: the body builder and the first body, once), the size guard
(``size_guard.py``: a body that cannot fit is refused before it is sent), the retry loop (``retry.py``:
transient failures, a model still loading, the first-token budget), the failover chain
(``failover.py``: an endpoint's ``fallbacks``, tried in order within one attempt), negotiation
(``negotiate.py``: refusals the request can do without), and one attempt under the watchdog
(``attempt.py``). Nothing is ever re-sent once output was produced: torn output cannot be redone, and
another model's answer is never stitched onto it. Once answered, the endpoint's own count calibrates the
estimate (or says the prompt was truncated), and the sink is told who answered.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..events import Event, Notice
from ..messages import Turn
from ..sizing.calibration import body_chars, calibrate
from ..wire.endpoints import Endpoint, Target
from ..wire.failures import prompt_truncated
from ..wire.interceptors import Interceptors
from .assembly import TextCallback
from .failover import Candidate, Chain
from .fences import DEFAULT_FENCES, Fence
from .plan import Plan, plan_turn
from .request import BodyBuilder, RetryPolicy, TurnRequest, TurnSink
from .retry import with_retries
from .size_guard import guard_size

__all__ = ["run_turn", "send_turn"]

_NO_SINK = TurnSink()


async def send_turn(request: TurnRequest, sink: TurnSink = _NO_SINK) -> Turn:
    """Send one turn reliably: planned, sized, retried, failed over, negotiated, watched.

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
    plan = plan_turn(request)
    await guard_size(request, sink, plan)
    chain = Chain(request, sink, plan)
    turn, answered = await with_retries(request, sink, chain)
    _settle(sink, plan, turn, answered)
    return turn


def _settle(sink: TurnSink, plan: Plan, turn: Turn, answered: Candidate) -> None:
    """Tell the sink who answered, and let the endpoint's count calibrate the estimate."""
    target = answered.target
    if sink.on_answered is not None:
        pinned = replace(target.endpoint, fallbacks=()) if target.endpoint.fallbacks else target.endpoint
        sink.on_answered(Target(pinned, target.model))
    prompt, chars = turn.usage.prompt_tokens, plan.chars
    if prompt <= 0 or chars <= 0:
        return
    if prompt_truncated(-(-chars // 8), prompt):
        # More than eight characters a token is no tokenizer: the server read less than it was sent.
        sink.emit(
            Notice(
                text=f"the endpoint reported {prompt} prompt tokens for about {chars} characters: it "
                "probably truncated the prompt (Ollama does this silently; set its num_ctx)",
                name="truncated",
                step=answered.request.step,
            )
        )
        return
    if answered.fallback:  # a fallback's request differs in its model and latches
        chars = body_chars(answered.sent)
    calibrate(target.endpoint, target.model or "", chars, prompt, has_image=plan.has_image)


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
    """Send one turn reliably: ``send_turn`` with the request and the sink spelled as keywords.

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

    Raises:
        ContextOverflow: the body does not fit (before sending, or as the endpoint said).
        RetryDelayTooLong: the endpoint asked to wait longer than ``policy.max_retry_delay_s``.
        InterceptorFailed: an interceptor raised; the turn is not retried.
        EndpointSilent: the stream went silent after producing output, or on every attempt.
        EndpointError: any other failure, once retries are spent.
    """
    request = TurnRequest(
        endpoint=endpoint,
        body=body,
        model=model,
        policy=policy or RetryPolicy(),
        context_limit=context_limit,
        droppable=droppable,
        fences=fences,
        start_in_reasoning=start_in_reasoning,
        step=step,
        interceptors=interceptors,
    )
    sink = TurnSink(on_output=on_output, on_thinking=on_thinking, on_event=on_event, on_answered=on_answered)
    return await send_turn(request, sink)
