"""Preparing a step's request: the transcript as the model will read it, and the body built from it.

In order: ``before_step`` may replace the transcript; the system prompt and tools in force are taken;
the API key is resolved; ``transform_context`` and ``convert_to_llm`` turn the transcript into what is
sent (every request, so a short-lived token or a pruning hook applies to every step of a long run);
pruned results become their stubs and the kept fold is applied; the lifecycle blocks ride on the
question; the transcript is checked; and when the request would fill three quarters of the window, the
keeper prunes and folds and the request is built again; when it would still leave the reply no room
(``context/room.py``), the keeper cuts the largest tool results, head and tail kept. A ``StablePrefix``
then admits it (it must start with what the previous request sent, unless the keeper just folded or
cut). Last, the ``before_llm_call`` hook sees it and may refuse it.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from ..context.compaction import transcript_tokens
from ..context.integrity import check_transcript
from ..context.room import reply_room
from ..errors import ModelCallDenied
from ..events import HookDenied, Notice
from ..messages import Message
from ..request_body import ModelParams, ToolBlock, build_body, order_tools
from ..sizing.calibration import chars_per_token_for
from ..sizing.counting import measure_before_sending, measured
from ..sizing.tokens import reply_ceiling, request_tokens
from ..tools.batch import HookDecision
from ..tools.definition import Tool
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from ..wire.endpoints import Endpoint, Target, with_resolved_key
from .config import BeforeLlmCall, ModelCall, ToolChoiceFn
from .prefix import admit, dress
from .state import LLM_TYPES, Cancelled, RunState, cancellable

__all__ = ["Request", "fit_window", "llm_view", "overage", "prepare_request", "rebuild"]


class Request:
    """One step's request: what it sends, and the body builder ``run_turn`` calls on every attempt.

    ``view`` is the transcript as the model reads it before the fold is applied (stubs in place) and
    ``index`` where the kept fold's tail starts in it, for the keeper; ``messages`` is what is sent.
    """

    __slots__ = (
        "answered",
        "block",
        "declared",
        "endpoint",
        "index",
        "last",
        "messages",
        "params",
        "prompt",
        "session_id",
        "tool_choice",
        "view",
    )

    def __init__(
        self,
        endpoint: Endpoint,
        params: ModelParams,
        prompt: str | None,
        declared: list[Tool],
        block: ToolBlock,
        session_id: str | None,
        tool_choice: ToolChoiceFn | None,
    ) -> None:
        self.endpoint = endpoint
        # Which endpoint and model answered, once one did (a failover chain may hand the step on).
        self.answered: Target | None = None
        self.params = params
        self.prompt = prompt
        self.declared = declared
        self.block = block
        self.session_id = session_id
        self.tool_choice = tool_choice
        self.view: list[Message] = []
        self.index: int | None = None
        self.messages: list[Message] = []
        self.last: dict[str, Any] = {}

    def answer_from(self, target: Target) -> None:
        """Note which endpoint and model answered the request."""
        self.answered = target

    def __call__(self, c: EndpointCapabilities, m: ModelCapabilities) -> dict[str, Any]:
        asked = self.params
        if self.tool_choice is not None:
            asked = replace(asked, tool_choice=self.tool_choice(self.messages))
        self.last = build_body(
            asked,
            self.prompt,
            self.messages,
            self.declared,
            c,
            m,
            block=self.block,
            prompt_cache_key=self.session_id,
        )
        return self.last


async def llm_view(run: RunState, transcript: list[Message]) -> list[Message]:
    """The transcript as a model reads it: ``transform_context``, then ``convert_to_llm``."""
    hooks = run.config.hooks
    working: list[Any] = transcript
    if hooks.transform_context is not None:
        working = list(await hooks.transform_context(list(working)))
    if hooks.convert_to_llm is not None:
        converted = hooks.convert_to_llm(working)
        if inspect.isawaitable(converted):
            converted = await converted
        return list(converted)
    if working is transcript and all(type(m) in LLM_TYPES for m in transcript):
        return transcript
    return [m for m in working if isinstance(m, LLM_TYPES)]


async def prepare_request(run: RunState) -> Request:
    """The step's request, folded if the window is filling, and allowed by ``before_llm_call``.

    Raises:
        ModelCallDenied: the ``before_llm_call`` hook refused it.
    """
    config, step = run.config, run.events.step
    before_step = config.hooks.before_step
    if before_step is not None:
        replaced = await before_step(list(run.transcript), step)
        if replaced is not None:
            run.transcript = list(replaced)
            run.context.reported = None
    run.follow_head()  # a system prompt or tool set the host changed is in force from this request on
    config = run.config
    endpoint = await with_resolved_key(config.endpoint, config.api_key)
    declared = order_tools(run.loader.declared(step), config.policy.tool_order)
    suffix = run.loader.system_suffix(step)
    system = config.system
    prompt = f"{system}\n\n{suffix}" if system and suffix else (system or suffix or None)
    request = Request(
        endpoint, config.params, prompt, declared, ToolBlock(), config.session_id, config.hooks.tool_choice
    )
    wire = await llm_view(run, run.transcript)
    rebuild(run, request, wire)
    keeper = run.keeper
    folded = False
    if keeper is not None:
        if not measured(endpoint, config.params.model):
            caps = capabilities_for(endpoint)
            planned = request(caps, caps.model(config.params.model))
            await measure_before_sending(
                endpoint,
                config.params.model,
                planned,
                on_notice=lambda text: run.events.emit(Notice(text=text, name="tokenizer", step=step)),
            )
        ratio = chars_per_token_for(endpoint, config.params.model)
        folded = await keeper.before_request(
            request.view, request.index, used=_used(run, request, ratio), chars_per_token=ratio, step=step
        )
        if folded:
            rebuild(run, request, wire)
        if fit_window(run, request, ratio):
            rebuild(run, request, wire)
            folded = True
    admit(run, request.messages, sanctioned=folded)
    hook = config.hooks.before_llm_call
    if hook is not None:
        await _ask_before_llm_call(run, request, hook)
    return request


def rebuild(run: RunState, request: Request, wire: list[Message]) -> None:
    """Set what the request sends from the wire: stubs and fold from the keeper, hook context, checked."""
    keeper = run.keeper
    if keeper is None:
        request.view, request.index = wire, None
        sent = dress(run, wire)
    else:
        request.view, request.index = keeper.view(wire, step=run.events.step)
        sent = keeper.sent(dress(run, request.view), request.index)
    request.messages = check_transcript(sent)


def _used(run: RunState, request: Request, ratio: float) -> int:
    """What the request is expected to take of the window."""
    caps = capabilities_for(request.endpoint)
    planned = request(caps, caps.model(run.config.params.model))
    used = request_tokens(planned, chars_per_token=ratio)
    reported = run.context.reported
    if reported is not None and reported[2] <= len(run.transcript):
        # The estimate runs low on purpose (it must not refuse what fits), which is the wrong way to err
        # when planning a fold. The last prompt and its reply are what the server counted; only what was
        # added since is a guess.
        added = [m for m in run.transcript[reported[2] :] if isinstance(m, LLM_TYPES)]
        since = transcript_tokens(added, ratio)
        used = max(used, reported[0] + reported[1] + since + reply_ceiling(planned))
    return used


def overage(run: RunState, request: Request, ratio: float) -> int:
    """The tokens by which the request leaves its reply less than the room it needs (``reply_room``);
    zero or less when it fits. Zero without a keeper (no window to plan against)."""
    keeper = run.keeper
    if keeper is None:
        return 0
    caps = capabilities_for(request.endpoint)
    ceiling = reply_ceiling(request(caps, caps.model(run.config.params.model)))
    prompt = _used(run, request, ratio) - ceiling
    return prompt - (keeper.limit - reply_room(keeper.limit, ceiling))


def fit_window(run: RunState, request: Request, ratio: float, *, over: int | None = None) -> bool:
    """Cut tool results (``ContextKeeper.fit``) until the request leaves the reply its room; whether any was.

    Args:
        over: the tokens to free, when the caller knows better than the estimate (a server's count).
    """
    keeper = run.keeper
    if over is None:
        over = overage(run, request, ratio)
    if keeper is None or over <= 0:
        return False
    return keeper.fit(request.view, request.index, over=over, chars_per_token=ratio, step=run.events.step)


async def _ask_before_llm_call(run: RunState, request: Request, hook: BeforeLlmCall) -> None:
    call = ModelCall(step=run.events.step, model=run.config.params.model, messages=tuple(request.messages))
    try:
        decision: object = hook(call)
        if inspect.isawaitable(decision):
            decision = await cancellable(decision, run.cancel)  # an abort ends the wait
    except Cancelled:
        raise
    except Exception as exc:
        # A guard that broke must not wave the request through.
        decision = HookDecision.block(f"the before_llm_call hook failed ({type(exc).__name__}: {exc})")
    if decision is None or (isinstance(decision, HookDecision) and decision.action == "allow"):
        return
    if isinstance(decision, HookDecision):
        reason = decision.reason or "no reason given"
    else:
        reason = f"the before_llm_call hook answered {type(decision).__name__}, not a HookDecision"
    run.events.emit(HookDenied(hook="before_llm_call", reason=reason, step=run.events.step))
    raise ModelCallDenied(
        f"the before_llm_call hook refused the request: {reason}",
        hook_reason=reason,
        messages=run.transcript,
        usage=run.totals,
        steps=run.steps,
    )
