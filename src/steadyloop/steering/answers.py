"""The answer of a routed step, asked once the model chose to answer, and held to its tool results.

An answer is asked for as usual, streamed, with ``tool_choice: "none"`` and a grammar that keeps it from
opening like a call; it costs the server only the reply (the prompt is already cached). Before any tool
ran, the tools are left out of its prompt (:func:`answering_bare`): they only invite a small model to write
about them, or to write a call's JSON as its answer. An answer written from tool results is asked at
temperature 0 and not streamed while it is written (:func:`grounded_answer`): one that leaves out entries
a listing returned, miscounts a result it was asked to count, or names paths none returned
(``grounding.py``), is sent back once with a correction,
and the one with fewer gaps is passed on whole; one still short of a listing gives way to the listing.
A count question that refers back to an earlier request's one result ("How many files are in that
list?") is held to that result's count in the same way (``grounding.counted_earlier``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from ..events import Notice
from ..messages import Turn
from ..turn.capabilities import EndpointCapabilities, ModelCapabilities
from ..turn.repetition import without_loop
from ..turn.request import BodyBuilder, TurnRequest, TurnSink
from ..turn.send import send_turn
from .chat import chat_text, request_and_result_texts
from .decision import ANSWER_GRAMMAR, calls_for_request, one_read, tool_names
from .grounding import (
    AnswerGaps,
    all_failed,
    answer_gaps,
    calls_written,
    correction,
    count_gaps,
    without_tool_talk,
)
from .languages import declines, language_of, names_a_language, without_preface
from .next_section import SectionWatch, before_next_section
from .result_counts import listed_entries
from .tool_gate import asks_how

__all__ = ["ANSWER_HELD", "answering", "answering_bare", "ask_answer", "grounded_answer"]

#: The notice a held answer (see :func:`grounded_answer`) gives as its first text arrives.
ANSWER_HELD = "the answer is being written; it is checked against the tool results before it is shown"


def answering(build: BodyBuilder) -> BodyBuilder:
    """``build``'s body asked for an answer: no call, and a grammar against opening like one."""

    def answer(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = dict(build(c, m))
        body["tool_choice"] = "none"
        if "grammar" not in m.refused_fields:
            body["grammar"] = ANSWER_GRAMMAR
        return body

    return answer


def answering_bare(build: BodyBuilder, note: str | None = None) -> BodyBuilder:
    """:func:`answering`, with the tools left out of the prompt, and ``note`` (what the gate read of the
    request: ``examples.ANSWER_NOTES``) added to its system prompt."""
    answer = answering(build)

    def bare(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = dict(answer(c, m))
        body.pop("tools", None)
        body.pop("tool_choice", None)
        body.pop("parallel_tool_calls", None)
        if note:
            body["messages"] = _noted(body.get("messages"), note)
        return body

    return bare


def _noted(messages: object, note: str) -> list[Any]:
    """``messages`` with ``note`` at the end of their system prompt (a system prompt of its own if none)."""
    listed = list(messages) if isinstance(messages, list) else []
    first = listed[0] if listed else None
    if isinstance(first, Mapping) and first.get("role") == "system" and isinstance(first.get("content"), str):
        return [{**first, "content": f"{first['content']}\n\n{note}"}, *listed[1:]]
    return [{"role": "system", "content": note}, *listed]


async def ask_answer(
    request: TurnRequest,
    sink: TurnSink,
    grounded: bool,
    bare: bool,
    earlier: tuple[str, str] | None = None,
    note: str | None = None,
) -> Turn:
    """The answer to ``request`` (whose body is a builder): held to its tool results when ``grounded``,
    held to the count of an earlier result when ``earlier`` (the request, and the result it counts:
    ``grounding.counted_earlier``), else streamed; without the tools, and told ``note``, when ``bare``."""
    assert callable(request.body), "a routed step's body is a builder"
    asked = replace(request, droppable=(*request.droppable, "grammar"))
    if grounded:  # after tool results the tools stay: the prompt is then the one the server has cached
        return await grounded_answer(replace(asked, body=answering(request.body)), sink)
    build = answering_bare(request.body, note) if bare else answering(request.body)
    if earlier is not None:
        return await grounded_answer(replace(asked, body=build), sink, earlier)
    return await send_turn(replace(asked, body=build), sink)


async def grounded_answer(
    request: TurnRequest, sink: TurnSink, earlier: tuple[str, str] | None = None
) -> Turn:
    """An answer written from tool results, held to them (``grounding.py``) before it is shown.

    It is asked at temperature 0 and not streamed while it is written: an answer that leaves out entries a
    listing returned, or names paths none returned, is sent back once with a correction, and the one with
    fewer gaps is passed on to ``on_output`` whole; one still short of a listing gives way to the listing.
    With ``earlier`` (a count question, and the one result of an earlier request it refers back to), only
    the count is held to that result.
    """
    held = _Held(request, sink)
    quiet = held.quiet(told_how=earlier is None)
    answer = _loop_written_once(await send_turn(replace(request, body=held.first), quiet))
    if earlier is not None:
        asked, results = earlier[0], [earlier[1]]
        held.gaps = _count_only
    else:
        asked, results = held.read
        tools = held.sent.get("tools")
        held.tools = [name for name, _ in tool_names(tools)] if isinstance(tools, list) else []
        languages = not names_a_language(_system_text(held.sent.get("messages", [])))
        held.gaps = partial(answer_gaps, called=_called_on(held.sent), tools=held.tools, languages=languages)
        if asks_how(asked):
            answer = replace(answer, content=before_next_section(answer.content, asked, results))
    gaps = held.gaps(answer.content, results, asked) if not answer.tool_calls else AnswerGaps()
    if gaps:
        answer = await held.corrected(answer, gaps, (asked, results))
    answer = replace(answer, content=without_tool_talk(answer.content))
    if sink.on_output is not None and answer.content:
        sink.on_output(answer.content)
    return answer


class _Held:
    """One held answer: the body it was last sent with, and the notice given as its text starts."""

    __slots__ = ("build", "gaps", "read", "request", "sent", "sink", "started", "tools")

    def __init__(self, request: TurnRequest, sink: TurnSink) -> None:
        assert callable(request.body), "a routed step's body is a builder"
        # What an answer misses of the results it is held to: set once the first answer's body is known.
        self.gaps: Callable[[str, Sequence[str], str], AnswerGaps] = answer_gaps
        self.request = request
        self.sink = sink
        self.build: BodyBuilder = request.body
        self.sent: dict[str, Any] = {}
        # The request and the result texts of the body last sent, read once as it is built.
        self.read: tuple[str, list[str]] = ("", [])
        self.started = False
        self.tools: list[str] = []  # the declared tools' names, once the first answer's body is known

    def first(self, c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
        body = dict(self.build(c, m))
        if m.chosen_temperature:  # the runtime's own reading of results, as with its decisions
            body["temperature"] = 0
        self.sent.clear()
        self.sent.update(body)
        messages = body.get("messages")
        listed: list[Any] = messages if isinstance(messages, list) else []
        self.read = request_and_result_texts(listed)
        told = _language_note(self.read[0], listed)
        if told is not None and listed:
            last = listed[-1]
            if isinstance(last, Mapping) and isinstance(last.get("content"), str):
                # At the end of the last result, so that the prompt the server has cached stays its prefix.
                body["messages"] = [*listed[:-1], {**last, "content": f"{last['content']}\n\n{told}"}]
        return body

    def quiet(self, told_how: bool) -> TurnSink:
        """The sink a held answer is written to: nothing shown; when ``told_how``, a how-to answer is
        stopped where it goes on into another section of a document it read (``next_section.py``)."""
        return replace(
            self.sink, on_output=self.writing, output_held=True, enough=self._section if told_how else None
        )

    def _section(self) -> Callable[[str], str | None]:
        # Made as each request is sent: its body, and so the request and results, are known by then.
        asked, results = self.read
        if not asks_how(asked):
            return _never
        return SectionWatch(asked, results).feed

    def writing(self, _text: str) -> None:
        # Once, as the held answer's first text arrives: a watcher would otherwise see nothing while it is
        # written (on a CPU, seconds), and the terminal would go on saying the model reads the prompt.
        if self.started or self.sink.on_event is None or self.sink.on_output is None:
            return
        self.started = True
        self.sink.emit(Notice(text=ANSWER_HELD, name="answer_held", step=self.request.step))

    async def corrected(self, answer: Turn, gaps: AnswerGaps, read: tuple[str, list[str]]) -> Turn:
        """The answer sent back once with what it missed; the better of the two, or the listing itself."""
        asked, results = read
        self.sink.emit(
            Notice(
                text=f"the answer missed its tool results ({_said(gaps)}); asked again",
                name="grounding",
                step=self.request.step,
            )
        )
        told = correction(gaps)

        def again(c: EndpointCapabilities, m: ModelCapabilities) -> Mapping[str, Any]:
            body = dict(self.first(c, m))
            body["messages"] = [
                *body.get("messages", []),
                {"role": "assistant", "content": answer.content},
                {"role": "user", "content": told},
            ]
            return body

        quiet = self.quiet(told_how=self.gaps is not _count_only)
        second = _loop_written_once(await send_turn(replace(self.request, body=again), quiet))
        if asks_how(asked):
            second = replace(second, content=before_next_section(second.content, asked, results))
        usage = one_read(answer.usage, second.usage)
        better = self.gaps(second.content, results, asked)
        # Sent back for its language, an answer came back as a refusal in that language: no better.
        told_language = gaps.language is not None
        declined = told_language and declines(second.content) and not declines(answer.content)
        if not second.tool_calls and better.size < gaps.size and not declined:
            answer, gaps = second, better
            if told_language:  # rewritten in another language, it opens with a line about itself
                answer = replace(answer, content=without_preface(answer.content))
        content = answer.content
        if (
            gaps.missing
            or gaps.stated
            or (gaps.invented and all_failed(results))
            or calls_written(content, self.tools)
        ):
            # Still short of the listing, or miscounting it, after the correction: the listing itself is
            # the answer, as the tool gave it (docs/steering.md). Still naming what no tool returned when
            # every tool failed: the failures are the answer, not a figure from nowhere. Still a call
            # written out as JSON, told to say it in words: what the tools returned is what it had to say.
            content = "\n".join(r.strip() for r in results)
        elif gaps.count:
            content = _counted(gaps.count, results)
        return Turn(content, answer.reasoning, answer.tool_calls, usage, answer.finish_reason)


def _counted(count: str, results: Sequence[str]) -> str:
    """The answer to a count question the model miscounted twice: the count, as the runtime read it off
    the one result, and the listing it counted when that is one. Told "11 files and 1 folder (12 entries
    in all)", the 1.5B model answered "There are 12 entries in the docs folder." again."""
    said = f"{count[:1].upper()}{count[1:]}."
    listing = results[0].strip() if len(results) == 1 else ""
    return f"{said}\n\n{listing}" if listed_entries(listing) is not None else said


def _loop_written_once(answer: Turn) -> Turn:
    """A held answer stopped in a loop, with the loop written once: held, none of it was shown yet, and it
    is then checked against the results like any other (``repetition.without_loop``)."""
    if answer.finish_reason != "repetition":
        return answer
    return replace(answer, content=without_loop(answer.content))


def _called_on(body: Mapping[str, Any]) -> list[str]:
    """The string arguments of the calls made for the request ``body`` ends with."""
    return [
        value
        for _name, arguments in calls_for_request(body)
        if isinstance(arguments, Mapping)
        for value in arguments.values()
        if isinstance(value, str)
    ]


def _language_note(asked: str, messages: list[Any]) -> str | None:
    """What the answer is told of its language: the request's, where that is clearly one of the languages
    read (``languages.py``) other than English, and neither the request nor the system prompt names one.

    After tool results in English (a listing, a README), the 1.5B model answered a Spanish request in
    English; sent back to rewrite a short answer in Spanish, it declined. Told before it writes, it need
    not be sent back."""
    language = language_of(asked)
    if language in (None, "English") or names_a_language(asked) or names_a_language(_system_text(messages)):
        return None
    return f"(The user wrote in {language}: answer in {language}.)"


def _system_text(messages: object) -> str:
    """The system prompt's text: where it names a language ("Always answer in English"), the host chose
    the answer's language, not the request."""
    listed = messages if isinstance(messages, list) else []
    return "\n".join(
        chat_text(m.get("content")) for m in listed if isinstance(m, Mapping) and m.get("role") == "system"
    )


def _never(_text: str) -> str | None:
    return None


def _count_only(answer: str, results: Sequence[str], asked: str) -> AnswerGaps:
    return count_gaps(answer, results[0], asked)


def _said(gaps: AnswerGaps) -> str:
    said = []
    if gaps.missing:
        said.append(f"{len(gaps.missing)} entries left out")
    if gaps.invented:
        said.append(f"{len(gaps.invented)} names or figures no tool returned")
    if gaps.count or gaps.stated:
        said.append("a wrong count")
    if gaps.pick:
        said.append("a wrong pick")
    if gaps.tools:
        said.append("tools spoken of")
    if gaps.unnamed:
        said.append("the file asked for not named")
    if gaps.language:
        said.append(f"not in {gaps.language}, the request's language")
    return ", ".join(said)
