"""Tool routing: one step asked as a decision the server holds the model to, for models too small to choose.

A small model given tools calls one when it should answer, describes a tool instead of calling it, or
answers from nothing when a tool would have told it. Routing asks the step differently
(``LoopPolicy.tool_routing``). The tool gate may ask first, as a question of its own, whether the request
needs a tool (``tool_gate.py``). Then the same request goes out held to a decision (``decision.py``): a
call of one declared tool, or the choice to answer. A call is the step's turn as it is, unless it is the
very call the step before made (its result is in the prompt; a small model at temperature 0 would repeat
it until the loop guard stops the run), which reads as the choice to answer. An answer is then asked for
(``answers.py``), held to the tool results when there are any.

A server that refuses the schema, or answers outside it, latches routing off for that (endpoint, model)
with a notice, and the step is sent as usual; a gate whose reply holds no choice latches the gate off.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..events import Notice
from ..messages import ToolCall, Turn
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities, capabilities_for
from ..turn.request import BodyBuilder, TurnRequest, TurnSink
from ..turn.send import send_turn
from .answers import ask_answer
from .chat import before_request
from .currency_codes import in_currency_codes
from .date_formats import in_declared_formats
from .decision import (
    Decision,
    already_made,
    calls_for_request,
    decision_body,
    declared_default,
    gate_body,
    not_made,
    one_read,
    ran_tools,
    read_decision,
    tool_names,
    which_tool_body,
)
from .examples import ANSWER_NOTES, GENERIC_EXAMPLES, GateChoice, GateExamples
from .file_asked import asks_for_file
from .gate_request import ask_gate
from .grounding import all_failed, counted_earlier
from .language_names import in_language_names
from .listed_items import listed_calls
from .named_choices import with_named_choices
from .numbered_calls import without_numbered_calls
from .percentages import in_declared_percentages
from .tool_gate import (
    PathArgument,
    asks_contents,
    asks_how,
    gate_kind,
    read_gate,
    request_and_results,
    tools_on_named_paths,
)
from .unasked import without_unasked
from .which_tool import (
    GENERIC_WHICH_TOOL_EXAMPLES,
    WhichToolExample,
    described_tool,
    named_tool,
    opened_with_tool,
    read_which_tool,
)

__all__ = ["RoutedTurn", "ToolRouting", "plain_turn", "routed_turn"]


@dataclass(frozen=True, slots=True)
class ToolRouting:
    """How routed steps are asked (``LoopPolicy.tool_routing``).

    Attributes:
        gate: ask a gate first, where the model has not latched it off: an answer it chooses is asked for
            without a decision.
        question: the gate's question. ``"which_tool"`` (the default) reads the request against the
            declared tools and names the one that does what it asks, or none (``which_tool.py``); the
            decision after it may still answer. ``"kind"`` files the request under kinds a host tunes
            with its own ``examples`` (``tool_gate.py``), and a "tool" makes the decision a call.
        examples: the kinds gate's worked examples: a host's own, naming its tools, or the generic set.
        which_tool_examples: the which-tool gate's worked examples (each with tools of its own).
        several: a decision may hold several calls (a request that names several items gets a call
            each in one step), up to ``MAX_CALLS``; and a first request's list of items, one of which a
            call holds, gets a call for each of the others (``listed_items.py``), while calls that only
            a series of numbers the request never wrote tells apart ("Mission 1" to "Mission 5") are
            one (``numbered_calls.py``), and a one-call decision's list of listed values gets every one
            the request names (``named_choices.py``).
        drop_unasked: before any tool ran, an optional argument held to listed values (``enum``) that a
            decided call chose and the request never spoke of is dropped, so the tool's default stands,
            and so is an optional argument set to the default its schema or description names, or
            optional free text no word of the conversation holds (a location nobody gave), not counting
            prose the model writes or a path, and a year or date for an argument whose default is the
            present, where the conversation speaks of no time (``unasked.py``). A host whose listed
            values are its own findings (the files it listed) turns it off: there, a value the request
            did not name is the model's reading of it.
        decision_max_tokens: the most tokens a decision may take (``None``: the step's own ceiling). A
            decision is a call or two; held to a schema, a small model can write a string argument on
            and on until the window is full. One cut here is not read: the step is sent as usual.
        named_in_files: a host's reading of a request against the user's files: the paths (as its tools
            list them in their schemas) of the files that define a name the request mentions (a function,
            a setting). A request naming one is about those files: the step is a call on them, as for a
            request naming a listed file, without the gate's question. It does I/O of the host's; keep
            it quick and bounded.
        about_files: a host's reading that a first request is about the user's files though it names
            none of them ("What does this project do?"): the step is a call, without the gate's question.
            A small model's kinds gate files such a request under general knowledge, and the answer is
            made up.
        path_arguments: the host's tools that take one of the user's paths as free text, by name, with
            the argument and the kind of path (``{"read_file": ("path", "file")}``). Where a tool's schema
            lists no paths (a folder too big to list), the paths ``named_in_files`` finds still hold that
            argument (a folder written with a trailing slash), as listed ones do.
    """

    gate: bool = True
    question: Literal["which_tool", "kind"] = "which_tool"
    examples: GateExamples = GENERIC_EXAMPLES
    which_tool_examples: tuple[WhichToolExample, ...] = GENERIC_WHICH_TOOL_EXAMPLES
    several: bool = True
    drop_unasked: bool = True
    decision_max_tokens: int | None = 1024
    named_in_files: Callable[[str], Collection[str]] | None = None
    about_files: Callable[[str], bool] | None = None
    path_arguments: Mapping[str, PathArgument] | None = None


_ROUTING = ToolRouting()


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


async def plain_turn(request: TurnRequest, sink: TurnSink) -> RoutedTurn:
    """One step sent as usual (``send_turn``), in the shape :func:`routed_turn` answers with."""
    return RoutedTurn(await send_turn(request, sink))


async def routed_turn(request: TurnRequest, sink: TurnSink, routing: ToolRouting = _ROUTING) -> RoutedTurn:
    """One step, routed where the endpoint and model allow it, else sent as usual (see the module docstring).

    ``request.body`` is the step's body builder.
    """
    return await _Routed(request, sink, routing).step()


def _asks_for_a_tool(planned: Mapping[str, Any]) -> bool:
    """The first request names a declared tool, says what one does in its description's words, or opens
    by calling one by its name. The which-tool gate, the tools before it, answered none for "Find a recipe
    for pasta carbonara which contains only less than 500 calories." with ``find_recipe`` declared, and the
    model wrote a recipe (BFCL's simple_python_360)."""
    return any(read(planned) is not None for read in (named_tool, described_tool, opened_with_tool))


def _routable(_c: EndpointCapabilities, m: ModelCapabilities) -> bool:
    return m.tool_routing and m.structured_output


class _Routed:
    """One routed step: its request, its plan, and what the gate and the decision said."""

    __slots__ = ("build", "choice", "found", "kind", "latches", "planned", "request", "routing", "sink")

    def __init__(self, request: TurnRequest, sink: TurnSink, routing: ToolRouting) -> None:
        assert callable(request.body), "a routed step's body is a builder"
        self.request = request
        self.sink = sink
        self.routing = routing
        self.build: BodyBuilder = request.body
        caps = capabilities_for(request.endpoint)
        self.latches = caps.model(request.model)
        self.planned = self.build(caps, self.latches)
        self.choice: GateChoice | None = None
        self.kind: str | None = None  # what the kinds gate filed the request under, when it was asked
        # The step's request, and what tools did for it so far: read once, by the gate and the decision.
        messages = self.planned.get("messages")
        self.found = request_and_results(messages) if isinstance(messages, list) else None

    async def step(self) -> RoutedTurn:
        request, sink, planned = self.request, self.sink, self.planned
        if not _routable(capabilities_for(request.endpoint), self.latches) or (
            decision_body(planned, self.latches) is None
        ):
            return RoutedTurn(await send_turn(request, sink))
        on_named = await self._gate()
        if self.choice == "answer":
            # Before any tool ran, the tools are left out of the answer's prompt: they only invite a small
            # model to write about them. After results they stay: the prompt then matches the steps before
            # it, which the server has cached, and an answer from the results needs no second read of them.
            answer = await ask_answer(
                request,
                sink,
                ran_tools(planned),
                not ran_tools(planned),
                self._earlier(),
                ANSWER_NOTES.get(self.kind or ""),
            )
            return RoutedTurn(answer, decided=True)
        tools: list[Mapping[str, Any]] = list(planned["tools"])
        decided = await self._decide(on_named)
        if decided.tool_calls:  # a server that answered with a native call: that is a decision too
            return RoutedTurn(decided, decided=True)
        # Read whole, a decision cut at its ceiling or where it fell into a loop could pass for one (repaired).
        if decided.finish_reason in ("length", "repetition"):
            self._ran_on(decided.finish_reason)
            return RoutedTurn(await send_turn(request, sink))
        decision = read_decision(decided.content, tools) if self.latches.structured_output else None
        if decision is None:
            self._latch_off(decided)
            return RoutedTurn(await send_turn(request, sink))
        decided, decision = await self._not_again(decided, decision, tools)
        decision = self._against_request(decision, tools)
        # A call made already, its result in the prompt: a small model at temperature 0 repeats it (or two
        # in turn) until the loop guard stops the run. What it has is what it answers from.
        fresh = not_made(planned, decision)
        if fresh:
            calls = [
                ToolCall(f"call_routed_{request.step}" + (f"_{i}" if i else ""), name, arguments)
                for i, (name, arguments) in enumerate(fresh)
            ]
            return RoutedTurn(Turn("", decided.reasoning, calls, decided.usage, "tool_calls"), decided=True)
        return _after(decided, await ask_answer(request, sink, ran_tools(planned), False, self._earlier()))

    def _gate_body(self) -> dict[str, Any] | None:
        """The gate's request, where the gate is on and there is something to ask."""
        routing, latches = self.routing, self.latches
        if not routing.gate or not latches.tool_gate:
            return None
        if routing.question == "kind":
            return gate_body(self.planned, latches, routing.examples)
        return which_tool_body(self.planned, latches, routing.which_tool_examples)

    def _read_gate(self, text: str) -> GateChoice | None:
        if self.routing.question == "kind":
            return read_gate(text, asked_how=self._asks_how())
        said = read_which_tool(text, self.planned.get("tools") or [])
        return None if said is None else ("tool" if said.needs_tool else "answer")

    async def _gate(self) -> list[dict[str, Any]] | None:
        """Ask the tool gate where it is on (setting ``choice``); the tools on paths the request names."""
        latches, request = self.latches, self.request
        asked = self._gate_body()
        on_named = (
            tools_on_named_paths(self.planned, self._defined_in(), self.routing.path_arguments)
            if asked is not None
            else None
        )
        if on_named is not None:
            self.choice = (
                "tool"  # the request names one of the user's files: nothing to ask, and a call on it
            )
            return on_named
        if asked is None:
            return None
        if self._told_how():
            self.choice = "answer"  # asked only how, and the tools have returned something to tell it from
            return None
        if self._listed_as_asked():
            self.choice = "answer"  # asked only what a folder holds, and it was listed
            return None
        if self._read_as_asked():
            self.choice = "answer"  # asked which file, and the one the host named for it was read
            return None
        if self._about_files():
            self.choice = "tool"  # the host reads the request as one about the user's files
            return None
        if self.routing.question == "which_tool" and _asks_for_a_tool(self.planned):
            self.choice = "tool"  # the request names or describes a declared tool: nothing to ask
            return None
        if self.routing.question == "kind" and opened_with_tool(self.planned) is not None:
            # The request opens by calling a declared tool by its name; the kinds, blind to the tools,
            # filed "Set a timer for 10 minutes for my tea." as one to answer.
            self.choice = "tool"
            return None
        self.choice, said = await ask_gate(request, self.sink, asked, self._read_gate)
        if self.routing.question == "kind":
            self.kind = gate_kind(said)
        if self.choice is None and said is not None:
            latches.tool_gate = False
            shown = " ".join(said.split())[:120]
            self.sink.emit(
                Notice(
                    text=f"the tool gate is off for {request.model or 'this model'}: its reply held no choice "
                    f"({shown!r}); steps are routed without it",
                    name="tool_gate",
                    step=request.step,
                )
            )
        return None

    def _asks_how(self) -> bool:
        """The request only asks how to do something, and nothing was done for it yet."""
        found = self.found
        return found is not None and not found[1] and asks_how(found[0])

    def _told_how(self) -> bool:
        """The request only asks how to do something, and a tool ran for it that did not fail.

        Told how, the user chooses what to do; once a result is there to tell it from, another step does
        something nobody asked for. Asked "How do I run the tests of this project?", the 1.5B model read
        the README that says so, and its gate (shown the README's first lines) asked for a listing next, an
        answer about which spoke of the tool."""
        found = self.found
        return found is not None and bool(found[1]) and asks_how(found[0]) and not self._all_failed()

    def _all_failed(self) -> bool:
        """Every tool that ran for the request failed (none ran: not failed)."""
        results = self.found[1] if self.found is not None else []
        return all_failed([result.partition(" returned: ")[2] for result in results])

    def _listed_as_asked(self) -> bool:
        """The request only asks what a folder the host reads it as naming holds, and the one call made
        for it listed that folder.

        Asked "What is in this folder?" in flask's source, the 1.5B model's gate, shown the listing of
        ".", said a tool was still needed in three asks of three, and the search for "python" that followed
        left the answer short of the listing (in httpx's, jinja2's and click's it said answer)."""
        routing, found = self.routing, self.found
        named_in_files, taken = routing.named_in_files, routing.path_arguments
        if (
            named_in_files is None
            or not taken
            or found is None
            or not found[1]
            or not asks_contents(found[0])
        ):
            return False
        made = calls_for_request(self.planned)
        if len(made) != 1 or self._all_failed():
            return False
        name, arguments = made[0]
        argument, kind = taken.get(name, ("", "file")) if isinstance(name, str) else ("", "file")
        folders = {p.rstrip("/") or "." for p in named_in_files(found[0]) if p.endswith("/")}
        listed = arguments.get(argument) if isinstance(arguments, Mapping) else None
        if listed is None and isinstance(name, str):
            # Called without it: the default its schema declares, else the working folder (a folder tool's
            # usual reading of none; the command's schemas leave the default out, since a small model
            # shown 'Default: "."' copied the quotes into its paths).
            listed = declared_default(self.planned.get("tools"), name, argument) or "."
        return kind == "folder" and isinstance(listed, str) and (listed.rstrip("/") or ".") in folders

    def _read_as_asked(self) -> bool:
        """The request only asks which file says or defines something (``asks_for_file``), and the one
        call made for it read a file the host names for it.

        Asked "Where is the attrs function defined?" in attrs' source, the 1.5B model read
        src/attr/_make.py, the one module that defines it, and its gate asked for a listing of src/attr
        next; the answer was held to that listing."""
        routing, found = self.routing, self.found
        if routing.named_in_files is None or found is None or not found[1] or not asks_for_file(found[0]):
            return False
        made = calls_for_request(self.planned)
        if len(made) != 1 or self._all_failed():
            return False
        name, arguments = made[0]
        taken = routing.path_arguments or {}
        argument, kind = taken.get(name, ("", "file")) if isinstance(name, str) else ("", "file")
        read = arguments.get(argument) if isinstance(arguments, Mapping) else None
        if kind != "file" or not isinstance(read, str):
            return False
        return read.strip().removeprefix("./") in routing.named_in_files(found[0])

    def _about_files(self) -> bool:
        """The host reads the request as one about the user's files, and nothing was done for it yet."""
        about_files, found = self.routing.about_files, self.found
        return about_files is not None and found is not None and not found[1] and about_files(found[0])

    def _earlier(self) -> tuple[str, str] | None:
        """A count question about an earlier request's one result, and that result: its answer is held to
        the result's count (``grounding.counted_earlier``)."""
        messages = self.planned.get("messages")
        return counted_earlier(messages) if isinstance(messages, list) else None

    def _defined_in(self) -> Collection[str]:
        """The files the host says define a name the request mentions, before any tool ran for it."""
        named_in_files, found = self.routing.named_in_files, self.found
        if named_in_files is None or found is None or found[1] or not found[0]:
            return ()
        return named_in_files(found[0])

    def _deciding(self, among: Sequence[Mapping[str, Any]] | None) -> BodyBuilder:
        """The step's builder held to a decision among ``among`` (default: every declared tool)."""
        # After the kinds gate said "tool", a call it must be; the which-tool gate's decision may decline.
        build, several, ceiling = self.build, self.routing.several, self.routing.decision_max_tokens
        call = self.choice == "tool" and self.routing.question == "kind"

        def deciding(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
            body = build(c, m)
            asked = (
                decision_body(body, m, call=call, among=among, several=several, ceiling=ceiling)
                if _routable(c, m)
                else None
            )
            return asked if asked is not None else body

        return deciding

    async def _decide(self, among: Sequence[Mapping[str, Any]] | None) -> Turn:
        """The decision asked: JSON, not the answer, so it is not streamed to the caller as output."""
        request = self.request
        deciding = replace(
            request, body=self._deciding(among), droppable=(*request.droppable, "response_format")
        )
        return await send_turn(deciding, replace(self.sink, on_output=None, output_held=True))

    async def _not_again(
        self, decided: Turn, decision: Decision, tools: list[Mapping[str, Any]]
    ) -> tuple[Turn, Decision]:
        """After the gate said a tool is still needed, the first call made again is asked once more
        without that tool (the prompt is cached: only the reply costs); once only, since where the gate
        is wrong a small model then calls tool after tool (docs/steering.md)."""
        planned = self.planned
        if decision.answers or self.choice != "tool" or len(calls_for_request(planned)) != 1:
            return decided, decision
        if not already_made(planned, decision):
            return decided, decision
        others = [t for t in tools if tool_names([t]) and tool_names([t])[0][0] != decision.name]
        if not others:
            return decided, decision
        again = await self._decide(others)
        second = read_decision(again.content, others) if not again.tool_calls else None
        if second is None:
            return decided, decision
        return Turn(again.content, again.reasoning, [], one_read(decided.usage, again.usage)), second

    def _against_request(self, decision: Decision, tools: Sequence[Mapping[str, Any]]) -> Decision:
        """The decision read against the first request: without the optional choices it never spoke of,
        without calls only numbers it never wrote tell apart, with every listed choice it names in a list
        of them the model started, and with a call for each item of a list it names one of the calls'
        values in; its dates and percentages in the forms the tools' descriptions declare, its currencies
        as codes, its languages as names where no codes are declared."""
        found = self.found
        request = found[0] if found is not None else ""
        decision = in_currency_codes(in_declared_formats(decision, tools, request), tools)
        decision = in_language_names(decision, tools, request)
        decision = in_declared_percentages(decision, tools, request)
        if found is None or found[1]:
            return decision
        if self.routing.drop_unasked:
            messages = self.planned.get("messages")
            earlier = before_request(messages) if isinstance(messages, list) else ""
            decision = without_unasked(decision, found[0], tools, earlier)
        if not self.routing.several:
            return decision
        decision = with_named_choices(without_numbered_calls(decision, found[0], tools), found[0], tools)
        return listed_calls(decision, found[0], tools)

    def _ran_on(self, reason: str) -> None:
        """A decision cut at its ceiling, or stopped in a loop, says nothing of the server: this step only
        is sent as usual."""
        if reason == "repetition":
            self._say("the routed decision fell into a loop; this step is sent as usual")
            return
        ceiling = self.routing.decision_max_tokens
        said = f"its {ceiling}-token ceiling" if ceiling else "the step's token ceiling"
        self._say(f"the routed decision ran past {said}; this step is sent as usual")

    def _latch_off(self, decided: Turn) -> None:
        self.latches.tool_routing = False
        shown = " ".join(decided.content.split())[:120]
        self._say(
            f"tool routing is off for {self.request.model or 'this model'}: the endpoint did not "
            f"hold the step to its schema ({shown!r}); steps are sent as usual"
        )

    def _say(self, text: str) -> None:
        self.sink.emit(Notice(text=text, name="tool_routing", step=self.request.step))


def _after(decided: Turn, answer: Turn) -> RoutedTurn:
    """The answer asked after a decision to answer, read as the step's one turn."""
    usage = one_read(decided.usage, answer.usage)
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
