"""Side tasks: small one-shot calls that support a run and are never worth failing it over.

``ask`` returns the answer text, ``ask_json`` an object held to a JSON schema; both return ``None`` (with a
notice) when the endpoint could not answer, and only cancellation propagates. ``ask_json`` sends the
schema as ``response_format`` (which grammar-constrained servers compile, so a small model cannot wrap the
JSON in prose), relaxes it where the server could not build a grammar, states it in the system prompt as
well, and reads the reply leniently.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._nesting import too_deep
from ..arguments import repair_value
from ..errors import EndpointError, error_code, error_type
from ..events import Event, Notice, Retry, SideTask
from ..messages import ContentPart, Turn, UserMessage, to_openai
from ..usage import Usage
from ..wire.endpoints import Endpoint
from ..wire.interceptors import Interceptors
from ..wire.schema_compat import relax_tools, sanitize_tools
from .body import apply_latches
from .capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from .fences import ALL_FENCES, strip_thinking
from .request import RetryPolicy, TurnRequest, TurnSink
from .send import send_turn

__all__ = ["SideTaskWatch", "ask", "ask_json"]

SideTaskInput = str | Sequence[ContentPart]

#: Characters of broken JSON one side-task reply may have repaired (as many as a reply's call envelopes).
_REPAIR_ALLOWANCE = 16_000


def _user(content: SideTaskInput) -> dict[str, Any]:
    return to_openai(UserMessage(content=content if isinstance(content, str) else tuple(content)))


def _body(model: str, system: str, user: SideTaskInput, limits: Mapping[str, Any]) -> dict[str, Any]:
    """A side task's request: the instructions, the question, and the limits set (see ``_limits``)."""
    return {"model": model, "messages": [{"role": "system", "content": system}, _user(user)], **limits}


def _limits(
    max_tokens: int | None, temperature: float | None, reasoning_effort: str | None
) -> dict[str, Any]:
    """The limits a side task sets, unset ones left out."""
    limits: dict[str, Any] = {}
    if max_tokens:
        limits["max_tokens"] = max_tokens
    if temperature is not None:
        limits["temperature"] = temperature
    if reasoning_effort:
        limits["reasoning_effort"] = reasoning_effort
    return limits


def _notify(on_event: Callable[[Event], object] | None, text: str) -> None:
    if on_event is not None:
        on_event(Notice(text=text, name="side_task"))


class SideTaskWatch:
    """One side task's clock and retry count, for the ``SideTask`` event that closes it: ``relay`` is the
    task's own ``on_event`` (its retries counted and passed on), then ``answered`` or ``failed`` closes it.
    Also the tool gate's (``steering/gate_request.py``), which is a side task of the step ``step``."""

    __slots__ = ("kind", "model", "on_event", "retries", "started", "step")

    def __init__(
        self, kind: str, model: str, on_event: Callable[[Event], object] | None, *, step: int = 0
    ) -> None:
        self.kind = kind
        self.model = model
        self.on_event = on_event
        self.step = step
        self.retries = 0
        self.started = time.perf_counter()

    def relay(self, event: Event) -> None:
        if isinstance(event, Retry):
            self.retries += 1
        if self.on_event is not None:
            self.on_event(event)

    def answered(self, turn: Turn) -> None:
        if self.on_event is not None:
            self.on_event(
                SideTask(
                    kind=self.kind,
                    model=self.model,
                    usage=turn.usage,
                    finish_reason=turn.finish_reason,
                    response_id=turn.response_id or None,
                    response_model=turn.response_model or None,
                    step=self.step,
                )
            )

    def failed(self, error: BaseException) -> None:
        if self.on_event is not None:
            wall = (time.perf_counter() - self.started) * 1000
            usage = Usage(wall_ms=wall, retries=self.retries)
            self.on_event(
                SideTask(
                    kind=self.kind,
                    model=self.model,
                    usage=usage,
                    error=str(error),
                    error_type=error_type(error),
                    error_code=error_code(error),
                    step=self.step,
                )
            )


async def ask(
    endpoint: Endpoint,
    model: str,
    system: str,
    user: SideTaskInput,
    *,
    max_tokens: int | None = 512,
    temperature: float | None = 0.0,
    reasoning_effort: str | None = None,
    policy: RetryPolicy | None = None,
    on_event: Callable[[Event], object] | None = None,
    kind: str = "ask",
    interceptors: Interceptors | None = None,
) -> str | None:
    """A short answer to a one-shot question, thinking taken out; ``None`` when none came back.

    Args:
        endpoint: where to ask.
        model: which model.
        system: the instructions.
        user: the question: text, or content parts (images reach the server as ``image_url`` parts).
        max_tokens: the reply ceiling.
        temperature: sent unless ``None`` or the model picks its own; 0 by default: a side task is the
            runtime's own question, and sampled, a small model's answer to it flips from call to call.
        reasoning_effort: the effort to ask for, moved by this model's latches like a run's: a rung it
            refused is never sent, and nothing is sent to a model that takes no effort.
        policy: retries.
        on_event: notices about a failure, and a ``SideTask`` event when it is over.
        kind: what the task is for, named on its ``SideTask`` event (``summary``, ``branch_summary``, ...).
        interceptors: the host's interceptors, for this request as for any other.
    """
    body = _body(model, system, user, _limits(max_tokens, temperature, reasoning_effort))
    watch = SideTaskWatch(kind, model, on_event)
    request = TurnRequest(
        endpoint=endpoint,
        body=body,
        model=model,
        policy=policy or RetryPolicy(),
        fences=ALL_FENCES,
        interceptors=interceptors,
    )
    try:
        turn = await send_turn(request, TurnSink(on_event=watch.relay))
    except EndpointError as error:
        watch.failed(error)
        _notify(on_event, f"side task failed: {error}")
        return None
    watch.answered(turn)
    text = turn.content.strip()
    return text or None


def _tool_of(schema: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": dict(schema)}}


def _schema_of(tools: list[dict[str, Any]]) -> dict[str, Any]:
    parameters: dict[str, Any] = tools[0]["function"]["parameters"]
    return parameters


def read_json(text: str) -> Any | None:
    """The JSON a reply holds, read leniently (thinking, code fences and prose around it are skipped)."""
    answer = strip_thinking(text, ALL_FENCES).content.strip()
    if not answer or too_deep(answer):
        return None
    try:
        return json.loads(answer)
    except (ValueError, RecursionError):
        pass
    start = min((i for i in (answer.find("{"), answer.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    # The repairer is far from linear in what it reads (a megabyte of '{xxx...' took minutes): it gets the
    # same allowance a reply's call envelopes get, and a longer broken reply reads as none.
    value, _ = repair_value(answer[start:], _REPAIR_ALLOWANCE)
    return value if value not in ("", None) else None


async def ask_json(
    endpoint: Endpoint,
    model: str,
    system: str,
    user: SideTaskInput,
    schema: Mapping[str, Any],
    *,
    name: str = "answer",
    strict: bool = True,
    max_tokens: int | None = 1024,
    temperature: float | None = 0.0,
    reasoning_effort: str | None = None,
    policy: RetryPolicy | None = None,
    on_event: Callable[[Event], object] | None = None,
    kind: str = "ask_json",
) -> Any | None:
    """An answer held to a JSON schema; ``None`` when no JSON came back.

    Args:
        endpoint: where to ask.
        model: which model.
        system: the instructions; the schema is appended to them.
        user: the question: text or content parts.
        schema: the JSON schema of the answer.
        name: the schema's name in ``response_format``.
        strict: ask for strict adherence (OpenAI then wants every property required and no extras).
        max_tokens: the reply ceiling.
        temperature: as in ``ask`` (0 by default).
        reasoning_effort: the effort to ask for, through this model's latches (see ``ask``).
        policy: retries.
        on_event: notices about downgrades and failures, and a ``SideTask`` event when it is over.
        kind: what the task is for, named on its ``SideTask`` event.
    """
    sanitized = _schema_of(sanitize_tools([_tool_of(schema, name)]))
    relaxed = _schema_of(relax_tools([_tool_of(sanitized, name)]))
    stated = json.dumps(sanitized, ensure_ascii=False, sort_keys=True)
    instructions = (
        f"{system}\n\nAnswer with one JSON value matching this JSON Schema, and nothing else:\n{stated}"
    )
    base = _body(model, instructions, user, _limits(max_tokens, temperature, reasoning_effort))
    capabilities_for(endpoint)
    watch = SideTaskWatch(kind, model, on_event)
    request = TurnRequest(
        endpoint=endpoint,
        body=_HeldToSchema(base, name, strict, (sanitized, relaxed)),
        model=model,
        policy=policy or RetryPolicy(),
        droppable=("response_format",),
        fences=ALL_FENCES,
    )
    try:
        turn = await send_turn(request, TurnSink(on_event=watch.relay))
    except EndpointError as error:
        if error.kind == "grammar" and _relax(endpoint, error, on_event):
            return await ask_json(
                endpoint,
                model,
                system,
                user,
                schema,
                name=name,
                strict=strict,
                max_tokens=max_tokens,
                temperature=temperature,
                reasoning_effort=reasoning_effort,
                policy=policy,
                on_event=on_event,
                kind=kind,
            )
        watch.failed(error)
        _notify(on_event, f"side task failed: {error}")
        return None
    watch.answered(turn)
    value = read_json(turn.content)
    if value is None:
        _notify(on_event, "side task returned no JSON")
    return value


class _HeldToSchema:
    """A side task's body held to a JSON schema where the model takes one, rebuilt from the latches."""

    __slots__ = ("base", "name", "relaxed", "sanitized", "strict")

    def __init__(
        self, base: Mapping[str, Any], name: str, strict: bool, schemas: tuple[dict[str, Any], dict[str, Any]]
    ) -> None:
        self.base = base
        self.name = name
        self.strict = strict
        self.sanitized, self.relaxed = schemas

    def __call__(self, caps: EndpointCapabilities, latches: ModelCapabilities) -> Mapping[str, Any]:
        body = apply_latches(self.base, caps, latches)
        if latches.structured_output:
            # The same converter reads tool schemas and response_format on grammar servers, so a server
            # that could not build a grammar from one is sent the relaxed form of the other.
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": self.name,
                    "strict": self.strict and caps.strict_schemas,
                    "schema": self.sanitized if caps.strict_schemas else self.relaxed,
                },
            }
        return body


def _relax(endpoint: Endpoint, error: EndpointError, on_event: Callable[[Event], object] | None) -> bool:
    """Latch strict schemas off where a server could not build a grammar; whether that is new."""
    caps = capabilities_for(endpoint)
    if not caps.strict_schemas:
        return False
    caps.strict_schemas = False
    _notify(on_event, f"the endpoint could not build a grammar from the schema; relaxing it: {error}")
    return True
