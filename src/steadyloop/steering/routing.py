"""Tool routing: one step asked as a decision the server holds the model to, for models too small to choose.

A small model given tools calls one when it should answer, describes a tool instead of calling it, or
answers from nothing when a tool would have told it. Routing asks the step differently. The same request
(messages and tool block unchanged, so the server's prompt cache serves it) goes out with a JSON schema
that allows exactly one of: a call of one declared tool, with arguments of that tool's schema; or
``{"name": "answer"}``. Grammar-constrained servers (llama.cpp, vLLM, SGLang) compile the schema, so the
reply is always one of those, and it is asked at temperature 0 (the runtime's own decision, not the
user's sampling). A call is the step's turn as it is, unless it is the very call the step before made (its
result is in the prompt; a small model at temperature 0 would repeat it until the loop guard stops the run),
which reads as the choice to answer. An answer is then asked for as usual, streamed, with
``tool_choice: "none"`` and a grammar that keeps it from opening like a call, and costs the server only the
reply (the prompt is already cached). An answer after tool results is asked at temperature 0 and held to
them before it is shown (``steering/grounding.py``): sent back once where it left out entries of a listing or
named a path no result holds.

The decision body and its reading are sans I/O (:func:`decision_body`, :func:`read_decision`);
:func:`routed_turn` sends. A server that refuses the schema, or answers outside it, latches routing off for
that (endpoint, model) with a notice, and the step is sent as usual.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Required, TypedDict, Unpack

from ..errors import EndpointError
from ..events import Event, Notice, Retry, SideTask
from ..messages import ToolCall, Turn
from ..turn.assembly import TextCallback
from ..turn.body import apply_latches
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from ..turn.fences import ALL_FENCES, Fence
from ..turn.run import BodyBuilder, RetryPolicy, run_turn
from ..turn.side_tasks import read_json
from ..usage import Usage
from ..wire.endpoints import Endpoint, Target
from ..wire.interceptors import Interceptors
from .grounding import AnswerGaps, answer_gaps, correction, request_and_results
from .tool_gate import GateChoice, gate_messages, gate_schema, read_gate, tools_on_named_paths

__all__ = [
    "ANSWER",
    "ANSWER_GRAMMAR",
    "Decision",
    "RoutedTurn",
    "TurnOptions",
    "decision_body",
    "decision_schema",
    "plain_turn",
    "read_decision",
    "routed_turn",
]

#: The name the decision gives the choice to answer rather than call.
ANSWER = "answer"

#: The notice a held answer (see :func:`_grounded_answer`) gives as its first text arrives.
ANSWER_HELD = "the answer is being written; it is checked against the tool results before it is shown"

#: llama.cpp's GBNF for an answer that does not open like a call (``{``, a fence, a list, a tag): a model
#: that chose to answer sometimes writes the call it did not choose. Dropped, and latched off, where refused.
ANSWER_GRAMMAR = "root ::= [ \\t\\n]* [^{`\\[< \\t\\n] [^\\x00]*"


class TurnOptions(TypedDict, total=False):
    """:func:`~steadyloop.turn.run.run_turn`'s keyword arguments, gathered once so that a step passes them
    on to every request it makes (the model is always named)."""

    model: Required[str | None]
    policy: RetryPolicy | None
    context_limit: int | None
    droppable: Collection[str]
    on_output: TextCallback | None
    on_thinking: TextCallback | None
    on_event: Callable[[Event], object] | None
    fences: Sequence[Fence]
    start_in_reasoning: bool
    step: int
    interceptors: Interceptors | None
    on_answered: Callable[[Target], object] | None


@dataclass(frozen=True, slots=True)
class Decision:
    """What a routed step chose: a call of ``name`` with ``arguments``, or to answer (``name == ANSWER``)."""

    name: str
    arguments: dict[str, Any]

    @property
    def answers(self) -> bool:
        return self.name == ANSWER


@dataclass(frozen=True, slots=True)
class RoutedTurn:
    """One step's turn, and whether a decision stood behind it.

    Attributes:
        turn: the step's turn.
        decided: a routing decision made it (a call with arguments held to its schema, or an answer asked
            for after the model chose to answer); text in such a turn is an answer, never a call.
    """

    turn: Turn
    decided: bool = False


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        schema = parameters if isinstance(parameters, Mapping) else {"type": "object", "properties": {}}
        found.append((function["name"], schema))
    return found


def decision_schema(
    tools: Sequence[Mapping[str, Any]], *, answer: bool = True, only: str | None = None
) -> dict[str, Any]:
    """The schema of a step's reply: one declared tool's call, or ``{"name": "answer"}``.

    Args:
        tools: the declared tools, as the request body carries them (OpenAI format, already sanitised).
        answer: allow the answer (``False`` is ``tool_choice: "required"``: a call it must be).
        only: allow only this tool's call (a named ``tool_choice``).
    """
    branches: list[dict[str, Any]] = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": dict(schema)},
            "required": ["name", "arguments"],
        }
        for name, schema in _tool_names(tools)
        if name != ANSWER and (only is None or name == only)
    ]
    if answer:
        branches.append({"type": "object", "properties": {"name": {"const": ANSWER}}, "required": ["name"]})
    return {"anyOf": branches}


def _asked_choice(choice: Any, names: Collection[str]) -> tuple[bool, str | None] | None:
    """``(answer allowed, only tool)`` for a body's ``tool_choice``; ``None`` when there is nothing to route."""
    if choice is None or choice == "auto":
        return True, None
    if choice == "required":
        return False, None
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and name in names:
            return False, name
    return None  # "none", or a choice we cannot read: the step goes as it is


def decision_body(
    body: Mapping[str, Any],
    model: ModelCapabilities,
    *,
    call: bool = False,
    among: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """``body`` asked as a decision; ``None`` when there is nothing to decide.

    Nothing to decide: no tools declared, or ``tool_choice`` is ``"none"``. ``"required"`` leaves out the
    answer; a named function leaves only that tool. The messages and tools stay as they are, so the
    server's prompt cache serves the request; the reply is held to :func:`decision_schema` and sampled at
    temperature 0 where the model lets us pick it.

    Args:
        call: a call it must be (the tool gate said so): the answer is left out.
        among: the calls the schema allows, when fewer than the body's tools (those tools, or narrower
            schemas of them); the body's own tools are sent unchanged, for the prompt cache.
    """
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return None
    asked = _asked_choice(body.get("tool_choice"), [n for n, _ in _tool_names(tools)])
    if asked is None:
        return None
    answer, only = asked
    answer = answer and not call
    if among is not None and only is not None:
        among = [t for t in among if t.get("function", {}).get("name") == only] or None
    out = dict(body)
    out["tool_choice"] = "none"
    out["response_format"] = {
        "type": "json_schema",
        "json_schema": {
            "name": "step",
            "schema": decision_schema(tools if among is None else among, answer=answer, only=only),
        },
    }
    if model.chosen_temperature:
        out["temperature"] = 0
    return out


def read_decision(text: str, tools: Sequence[Mapping[str, Any]]) -> Decision | None:
    """The decision a reply holds; ``None`` when it holds none (the server did not keep to the schema)."""
    value = read_json(text)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    name = value["name"]
    if name == ANSWER:
        return Decision(ANSWER, {})
    if name not in {n for n, _ in _tool_names(tools)}:
        return None
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return Decision(name, arguments)


def _calls_for_request(body: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """``(name, arguments)`` of every call the assistant made since the last user message of ``body``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    made: list[tuple[Any, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "user":
            break
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            made.append((function.get("name"), arguments))
    return made


def _already_made(body: Mapping[str, Any], decision: Decision) -> bool:
    """Whether ``decision`` is a call made already for the request ``body`` ends with."""
    return (decision.name, decision.arguments) in _calls_for_request(body)


def _one_read(first: Usage, then: Usage) -> Usage:
    """Two requests of one step as one: the first read the prompt, the second found it cached.

    The step's usage then reads like any step's (one prompt, both replies), so the cache watch compares
    prompt with prompt.
    """
    both = first + then
    return both.with_(
        prompt_tokens=first.prompt_tokens,
        cached_tokens=first.cached_tokens,
        uncached_tokens=first.uncached_tokens,
        total_tokens=first.prompt_tokens + both.completion_tokens,
    )


def _ran_tools(body: Mapping[str, Any]) -> bool:
    """Whether tool results follow the last user message of ``body``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    for message in reversed(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "tool":
            return True
        if role == "user":
            return False
    return False


def gate_body(body: Mapping[str, Any], model: ModelCapabilities) -> dict[str, Any] | None:
    """The tool gate's request for a step's ``body`` (see ``steering/tool_gate.py``); ``None``: nothing to ask."""
    messages = gate_messages(body)
    if messages is None:
        return None
    out: dict[str, Any] = {"messages": messages, "max_tokens": 32}
    if "model" in body:
        out["model"] = body["model"]
    out["response_format"] = {
        "type": "json_schema",
        "json_schema": {"name": "gate", "schema": gate_schema(body)},
    }
    if model.chosen_temperature:
        out["temperature"] = 0
    return out


async def _ask_gate(
    endpoint: Endpoint,
    asked: Mapping[str, Any],
    *,
    model: str | None,
    policy: RetryPolicy | None,
    on_event: Callable[[Event], object] | None,
    step: int,
    interceptors: Interceptors | None = None,
) -> tuple[GateChoice | None, str | None]:
    """The gate's choice and its reply text; ``(None, None)`` when the request failed (the step goes on)."""
    started = time.perf_counter()
    retries = 0

    def relay(event: Event) -> None:
        nonlocal retries
        if isinstance(event, Retry):
            retries += 1
        if on_event is not None:
            on_event(event)

    def build(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        return apply_latches(asked, c, m)

    try:
        turn = await run_turn(
            endpoint,
            build,
            model=model,
            policy=policy,
            on_event=relay,
            fences=ALL_FENCES,
            interceptors=interceptors,
        )
    except EndpointError as error:
        if on_event is not None:
            wall = (time.perf_counter() - started) * 1000
            on_event(
                SideTask(
                    kind="tool_gate",
                    model=model or "",
                    usage=Usage(wall_ms=wall, retries=retries),
                    error=str(error),
                    step=step,
                )
            )
        return None, None
    if on_event is not None:
        on_event(
            SideTask(
                kind="tool_gate",
                model=model or "",
                usage=turn.usage,
                finish_reason=turn.finish_reason,
                step=step,
            )
        )
    return read_gate(turn.content), turn.content


async def _grounded_answer(endpoint: Endpoint, answering: BodyBuilder, asked: TurnOptions) -> Turn:
    """An answer written from tool results, held to them (``steering/grounding.py``) before it is shown.

    It is asked at temperature 0 and not streamed while it is written: an answer that leaves out entries a
    listing returned, or names paths none returned, is sent back once with a correction, and the one with
    fewer gaps is passed on to ``on_output`` whole; one still short of a listing gives way to the listing.
    """
    on_output, on_event, step = asked.get("on_output"), asked.get("on_event"), asked.get("step", 0)
    started: list[bool] = []

    def writing(_text: str) -> None:
        # Once, as the held answer's first text arrives: a watcher would otherwise see nothing while it is
        # written (on a CPU, seconds), and the terminal would go on saying the model reads the prompt.
        if started or on_event is None or on_output is None:
            return
        started.append(True)
        on_event(Notice(text=ANSWER_HELD, name="answer_held", step=step))

    quiet: TurnOptions = {**asked, "on_output": writing}
    sent: dict[str, Any] = {}

    def first(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = dict(answering(c, m))
        if m.chosen_temperature:  # the runtime's own reading of results, as with its decisions
            body["temperature"] = 0
        sent.clear()
        sent.update(body)
        return body

    answer = await run_turn(endpoint, first, **quiet)
    request, results = request_and_results(sent.get("messages", []))
    gaps = answer_gaps(answer.content, results, request) if not answer.tool_calls else AnswerGaps()
    if gaps:
        if on_event is not None:
            on_event(
                Notice(
                    text=f"the answer missed its tool results ({_said(gaps)}); asked again",
                    name="grounding",
                    step=step,
                )
            )
        told = correction(gaps)

        def again(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
            body = dict(first(c, m))
            body["messages"] = [
                *body.get("messages", []),
                {"role": "assistant", "content": answer.content},
                {"role": "user", "content": told},
            ]
            return body

        second = await run_turn(endpoint, again, **quiet)
        usage = _one_read(answer.usage, second.usage)
        better = answer_gaps(second.content, results, request)
        if not second.tool_calls and len(better.missing) + len(better.invented) < len(gaps.missing) + len(
            gaps.invented
        ):
            answer, gaps = second, better
        content = answer.content
        if gaps.missing:
            # Still short of the listing after the correction (the 1.5B model, 6 times in 8 on one
            # folder): the listing itself is the answer, as the tool gave it.
            content = "\n".join(r.strip() for r in results)
        answer = Turn(content, answer.reasoning, answer.tool_calls, usage, answer.finish_reason)
    if on_output is not None and answer.content:
        on_output(answer.content)
    return answer


def _said(gaps: AnswerGaps) -> str:
    said = []
    if gaps.missing:
        said.append(f"{len(gaps.missing)} entries left out")
    if gaps.invented:
        said.append(f"{len(gaps.invented)} paths no tool returned")
    return ", ".join(said)


async def plain_turn(endpoint: Endpoint, build: BodyBuilder, **options: Unpack[TurnOptions]) -> RoutedTurn:
    """One step sent as usual (``run_turn``), in the shape :func:`routed_turn` answers with."""
    return RoutedTurn(await run_turn(endpoint, build, **options))


async def routed_turn(
    endpoint: Endpoint, build: BodyBuilder, *, gate: bool = True, **options: Unpack[TurnOptions]
) -> RoutedTurn:
    """One step, routed where the endpoint and model allow it, else sent as usual (see the module docstring).

    Arguments are :func:`~steadyloop.turn.run.run_turn`'s, and:

    Args:
        gate: ask the tool gate first (``steering/tool_gate.py``) where the model has not latched it off: an
            answer it chooses is asked for without a decision, a tool makes the decision a call.
    """
    model, on_event, step = options["model"], options.get("on_event"), options.get("step", 0)
    droppable = options.get("droppable", ())
    caps = capabilities_for(endpoint)
    latches = caps.model(model)

    async def as_usual() -> Turn:
        return await run_turn(endpoint, build, **options)

    def routable(c: EndpointCapabilities, m: ModelCapabilities) -> bool:
        return m.tool_routing and m.structured_output

    def answering(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = dict(build(c, m))
        body["tool_choice"] = "none"
        if "grammar" not in m.refused_fields:
            body["grammar"] = ANSWER_GRAMMAR
        return body

    def answering_bare(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        # The gate chose to answer: tools left in the prompt only invite a small model to write about them
        # ("use the list_dir function ...") or to write a call's JSON as its answer.
        body = dict(answering(c, m))
        body.pop("tools", None)
        body.pop("tool_choice", None)
        body.pop("parallel_tool_calls", None)
        return body

    async def answer_after(decided: Turn | None, *, bare: bool = False) -> RoutedTurn:
        """The answer, asked for once the model chose it (by the gate, or by a decision ``decided``)."""
        asked: TurnOptions = {**options, "droppable": (*droppable, "grammar")}
        if _ran_tools(planned):
            answer = await _grounded_answer(endpoint, answering, asked)
        else:
            answer = await run_turn(endpoint, answering_bare if bare else answering, **asked)
        if decided is None:
            return RoutedTurn(answer, decided=True)
        usage = _one_read(decided.usage, answer.usage)
        return RoutedTurn(
            Turn(
                answer.content,
                answer.reasoning or decided.reasoning,
                answer.tool_calls,
                usage,
                answer.finish_reason,
            ),
            decided=True,
        )

    planned = build(caps, latches)
    if not routable(caps, latches) or decision_body(planned, latches) is None:
        return RoutedTurn(await as_usual())
    tools: list[Mapping[str, Any]] = list(planned["tools"])

    choice: GateChoice | None = None
    asked_gate = gate_body(planned, latches) if gate and latches.tool_gate else None
    on_named = tools_on_named_paths(planned) if asked_gate is not None else None
    if on_named is not None:
        choice = "tool"  # the request names one of the user's files: nothing to ask, and a call on it first
    elif asked_gate is not None:
        choice, said = await _ask_gate(
            endpoint,
            asked_gate,
            model=model,
            policy=options.get("policy"),
            on_event=on_event,
            step=step,
            interceptors=options.get("interceptors"),
        )
        if choice is None and said is not None:
            latches.tool_gate = False
            if on_event is not None:
                on_event(
                    Notice(
                        text=f"the tool gate is off for {model or 'this model'}: its reply held no choice "
                        f"({' '.join(said.split())[:120]!r}); steps are routed without it",
                        name="tool_gate",
                        step=step,
                    )
                )
    if choice == "answer":
        # Before any tool ran, the tools are left out of the answer's prompt: they only invite a small model
        # to write about them. After results they stay: the prompt then matches the steps before it, which
        # the server has cached, and an answer from the results needs no second read of them.
        return await answer_after(None, bare=not _ran_tools(planned))

    def deciding_among(among: Sequence[Mapping[str, Any]] | None) -> BodyBuilder:
        def deciding(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
            body = build(c, m)
            asked = decision_body(body, m, call=choice == "tool", among=among) if routable(c, m) else None
            return asked if asked is not None else body

        return deciding

    # The decision is JSON, not the answer: it is not streamed to the caller as output.
    deciding_options: TurnOptions = {
        **options,
        "droppable": (*droppable, "response_format"),
        "on_output": None,
    }
    decided = await run_turn(endpoint, deciding_among(on_named), **deciding_options)
    if decided.tool_calls:  # a server that answered with a native call: that is a decision too
        return RoutedTurn(decided, decided=True)
    decision = read_decision(decided.content, tools) if latches.structured_output else None
    if decision is None:
        latches.tool_routing = False
        if on_event is not None:
            shown = " ".join(decided.content.split())[:120]
            on_event(
                Notice(
                    text=f"tool routing is off for {model or 'this model'}: the endpoint did not hold the "
                    f"step to its schema ({shown!r}); steps are sent as usual",
                    name="tool_routing",
                    step=step,
                )
            )
        return RoutedTurn(await as_usual())
    if (
        not decision.answers
        and choice == "tool"
        and len(_calls_for_request(planned)) == 1
        and _already_made(planned, decision)
    ):
        # The gate said the request needs more after its first call, and the model made that call again:
        # the 1.5B model, asked for the weather in the city named in city.txt, read city.txt again rather
        # than ask for Lisbon's. Asked once more without that tool (the prompt is cached: only the reply
        # costs). Once only: where the gate is wrong, the 0.5B model then calls tool after tool.
        others = [t for t in tools if _tool_names([t]) and _tool_names([t])[0][0] != decision.name]
        again = await run_turn(endpoint, deciding_among(others), **deciding_options) if others else None
        second = read_decision(again.content, others) if again is not None and not again.tool_calls else None
        if again is not None and second is not None:
            decided = Turn(again.content, again.reasoning, [], _one_read(decided.usage, again.usage))
            decision = second
    if not decision.answers and _already_made(planned, decision):
        # A call made already, its result in the prompt: a small model at temperature 0 repeats it (or two
        # in turn) until the loop guard stops the run. What it has is what it answers from.
        decision = Decision(ANSWER, {})
    if not decision.answers:
        call = ToolCall(f"call_routed_{step}", decision.name, decision.arguments)
        return RoutedTurn(
            Turn("", decided.reasoning, [call], decided.usage, "tool_calls"),
            decided=True,
        )

    return await answer_after(decided)
