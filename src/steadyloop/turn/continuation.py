"""``continue_answer``: carrying on an answer the token ceiling cut off.

The transcript is sent again with the answer so far as a trailing assistant message, which servers such as
llama.cpp render as a prefill: the model picks up from its last token and the prompt cache holds all of the
prompt and most of the reply. Whether a model does this is latched per model as ``assistant_prefill``: a
400/422 for the request turns it off, and so does a continuation that starts the answer over word for word
(a server that takes the trailing message and ignores it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import EndpointError, EndpointRefused
from ..events import Event, Notice
from ..messages import Turn
from ..wire.endpoints import Endpoint
from ..wire.interceptors import Interceptors
from .assembly import TextCallback
from .capabilities import model_capabilities_for
from .fences import DEFAULT_FENCES, Fence
from .request import RetryPolicy, TurnRequest, TurnSink
from .send import send_turn

__all__ = ["can_continue", "continue_answer", "continue_turn", "join_turns"]

# How much of the answer so far a continuation must repeat, from its start, to count as starting over.
_RESTART_PROBE = 48


def can_continue(turn: Turn) -> bool:
    """Whether a turn is an answer begun and cut off: not one cut in its scratchpad, not a tool call."""
    return turn.finish_reason == "length" and bool(turn.content.strip()) and not turn.tool_calls


def join_turns(first: Turn, rest: Sequence[Turn]) -> Turn:
    """Pieces of one answer as one turn: text joined, counts summed, continuations counted."""
    usage = first.usage
    for piece in rest:
        usage = usage + piece.usage
    usage = usage.with_(continuations=(first.usage.continuations or 0) + len(rest))
    return Turn(
        content=first.content + "".join(p.content for p in rest),
        reasoning=first.reasoning + "".join(p.reasoning for p in rest),
        tool_calls=list(rest[-1].tool_calls) if rest else list(first.tool_calls),
        usage=usage,
        finish_reason=rest[-1].finish_reason if rest else first.finish_reason,
        thinking=first.thinking + tuple(b for p in rest for b in p.thinking),
        response_id=rest[-1].response_id if rest else first.response_id,
        response_model=first.response_model,
    )


def _restarted(so_far: str, piece: str) -> bool:
    probe = so_far.strip()[:_RESTART_PROBE]
    return len(probe) >= 8 and piece.lstrip().startswith(probe)


async def continue_answer(request: TurnRequest, sink: TurnSink, turn: Turn, limit: int = 1) -> Turn:
    """Carry on an answer cut off at the token ceiling, returning the pieces as one turn.

    A turn that is not an answer cut off is returned as it is. Any failure keeps the cut-off answer,
    with a notice; only cancellation propagates.

    Args:
        request: the call that produced ``turn``; its body, a mapping, is the body as it was sent (its
            ``messages`` are sent again with the answer appended) and it names the endpoint and model that
            wrote the answer, without fallbacks.
        sink: the continued text as it streams, reasoning, notices and retry events.
        turn: the cut-off turn.
        limit: extra requests to spend at most.
    """
    assert not callable(request.body), "a continuation carries on a body as it was sent"
    body, step = request.body, request.step
    latches = model_capabilities_for(request.endpoint, request.model)
    if limit <= 0 or not can_continue(turn):
        return turn
    if not latches.assistant_prefill:
        _notice(
            sink, step, "the answer was cut off at the token ceiling; this model does not continue a prefill"
        )
        return turn
    quiet = replace(sink, on_output=None, on_answered=None)
    pieces: list[Turn] = []
    while len(pieces) < limit:
        so_far = turn.content + "".join(p.content for p in pieces)
        messages = [*body.get("messages", ()), {"role": "assistant", "content": so_far}]
        piece = await _piece(replace(request, body={**body, "messages": messages}), quiet)
        if piece is None:
            break
        if so_far and piece.content.startswith(so_far) and len(piece.content) > len(so_far):
            # llama.cpp answers a prefill with the prefilled text followed by its continuation; a server that
            # ignored the prefill and started over cannot produce more than one piece's worth of text.
            piece = replace(piece, content=piece.content[len(so_far) :])
        elif _restarted(so_far, piece.content):
            latches.assistant_prefill = False
            _notice(
                sink,
                step,
                "the endpoint started the answer over instead of continuing it; prefill is off for this model",
            )
            break
        if sink.on_output is not None and piece.content:
            sink.on_output(piece.content)
        pieces.append(piece)
        if not can_continue(piece):
            break
    return join_turns(turn, pieces) if pieces else turn


async def _piece(request: TurnRequest, sink: TurnSink) -> Turn | None:
    """The next piece of the answer; ``None`` (with a notice) when the request failed."""
    try:
        return await send_turn(request, sink)
    except EndpointRefused as error:
        if error.status in (400, 422):
            model_capabilities_for(request.endpoint, request.model).assistant_prefill = False
            _notice(
                sink,
                request.step,
                f"this model does not continue a prefill ({error.status}); the answer stays cut off",
            )
        else:
            _notice(sink, request.step, f"continuing the cut-off answer failed: {error}")
    except EndpointError as error:
        _notice(sink, request.step, f"continuing the cut-off answer failed: {error}")
    return None


def _notice(sink: TurnSink, step: int, text: str) -> None:
    sink.emit(Notice(text=text, name="continuation", step=step))


async def continue_turn(
    endpoint: Endpoint,
    body: Mapping[str, Any],
    turn: Turn,
    *,
    max_continuations: int = 1,
    policy: RetryPolicy | None = None,
    droppable: Collection[str] = (),
    on_output: TextCallback | None = None,
    on_thinking: TextCallback | None = None,
    on_event: Callable[[Event], object] | None = None,
    fences: Sequence[Fence] = DEFAULT_FENCES,
    step: int = 0,
    interceptors: Interceptors | None = None,
) -> Turn:
    """Carry on an answer cut off at the token ceiling: ``continue_answer`` spelled with keywords.

    Args:
        endpoint: where the turn was sent.
        body: the body that produced ``turn`` (its ``messages`` are re-sent with the answer appended).
        turn: the cut-off turn.
        max_continuations: extra requests to spend at most.
        policy: retries for each continuation.
        droppable: extra-body fields that may be dropped.
        on_output: the continued text as it streams.
        on_thinking: reasoning as it streams.
        on_event: notices and retry events.
        fences: thinking fences.
        step: the step number stamped on events.
        interceptors: the host's interceptors, for each continuation request.
    """
    model = body.get("model")
    request = TurnRequest(
        endpoint=endpoint,
        body=body,
        model=model if isinstance(model, str) else None,
        policy=policy or RetryPolicy(),
        droppable=droppable,
        fences=fences,
        step=step,
        interceptors=interceptors,
    )
    sink = TurnSink(on_output=on_output, on_thinking=on_thinking, on_event=on_event)
    return await continue_answer(request, sink, turn, max_continuations)
