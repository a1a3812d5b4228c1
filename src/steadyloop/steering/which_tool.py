"""The which-tool gate: the request read against the tools declared, and answered with one of their names.

The kinds gate (``tool_gate.py``) files a request under kinds a host tunes (files, maths, chat, ...) and
each kind means "tool" or "answer" whatever tools are declared: with a ``solve_quadratic`` tool, maths is
still "answer". This gate asks the question the tools make: does one of *these* tools do what the request
asks? Its prompt names each declared tool with the first line of its description, shows a few worked
examples as earlier turns (each with tools of its own, none of any host's), then the request; the reply is
held to ``{"tool": name}`` where ``name`` is one of the declared tools or ``"none"``. After tool results
the question is whether the request still needs one of them, with the calls made so far and what they
returned.

The reply says more than tool or answer: the tool it names is the one the decision is asked about first
(``routing.py``), and ``"none"`` is the right to decline that a request no tool serves needs. Sans I/O:
:func:`which_tool_messages` builds the question, :func:`which_tool_schema` its reply's schema and
:func:`read_which_tool` reads the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..turn.side_tasks import read_json
from .tool_gate import request_and_results, tool_lines

__all__ = [
    "GENERIC_WHICH_TOOL_EXAMPLES",
    "NONE",
    "WhichTool",
    "WhichToolExample",
    "described_tool",
    "named_tool",
    "opened_with_tool",
    "read_which_tool",
    "which_tool_messages",
    "which_tool_schema",
]

#: The reply that no declared tool does what the request asks: the assistant answers.
NONE = "none"

_RESULTS_CHARS = 1200  # of all the results the gate is shown

_FIRST_RULES = (
    "You decide whether one of the tools below does what the user asks. Reply with the name of the tool "
    "that does it, or finds what the answer needs. Reply none when no tool does what is asked: the "
    "assistant then answers from its own knowledge. A tool that is only about a similar subject does not "
    "do it."
)
_LATER_RULES = (
    "You decide whether the user's request still needs one of the tools below, given what was done so far. "
    "Reply with the name of the tool the request still needs, or none when what was done is enough to "
    "answer or no tool does what is left."
)


@dataclass(frozen=True, slots=True)
class WhichToolExample:
    """One worked example: the tools it declares (``name: what it does`` lines), the request, what was done
    so far (``None`` before any call) and the right reply (a tool's name or ``"none"``)."""

    tools: tuple[str, ...]
    request: str
    done: str | None
    reply: str


@dataclass(frozen=True, slots=True)
class WhichTool:
    """What the gate said: ``tool`` is a declared tool's name, or ``None`` for none."""

    tool: str | None

    @property
    def needs_tool(self) -> bool:
        return self.tool is not None


_WEATHER = "get_weather: the current weather in a city"
_EMAIL = "send_email: send an email to an address"
_CONTACT = "find_contact: look up a person's email address by name"
_BMI = "body_mass_index: compute the body mass index from a height and a weight"
_SONG = "play_song: play a song by its title on the speaker"
_FLIGHTS = "search_flights: find flights between two airports on a date"
_NOTES = "search_notes: find the user's notes that mention some words"
_RATE = "exchange_rate: today's rate between two currencies"

#: Examples for any host: each kind of request shown both ways, with tools of their own.
GENERIC_WHICH_TOOL_EXAMPLES: tuple[WhichToolExample, ...] = (
    WhichToolExample((_WEATHER, _EMAIL), "What's the weather like in Oslo today?", None, "get_weather"),
    WhichToolExample((_WEATHER, _EMAIL), "Name four fruits.", None, NONE),
    WhichToolExample(
        (_BMI,), "What is the BMI of someone 1.80 m tall who weighs 81 kg?", None, "body_mass_index"
    ),
    WhichToolExample((_BMI,), "What is 17 times 3?", None, NONE),
    WhichToolExample((_SONG, _WEATHER), "Play Clair de Lune.", None, "play_song"),
    WhichToolExample((_SONG, _WEATHER), "Find an Italian restaurant near the station.", None, NONE),
    WhichToolExample((_FLIGHTS, _RATE), "How many dollars is 200 euros?", None, "exchange_rate"),
    WhichToolExample((_FLIGHTS, _RATE), "Write a haiku about airports.", None, NONE),
    WhichToolExample((_NOTES, _EMAIL), "Which of my notes mention the dentist?", None, "search_notes"),
    WhichToolExample(
        (_WEATHER, _EMAIL),
        "What's the weather like in Oslo today?",
        'get_weather(city="Oslo") returned: 4°C, light rain',
        NONE,
    ),
    WhichToolExample(
        (_CONTACT, _EMAIL),
        "Look up Dana's email address, then send her the report.",
        'find_contact(name="Dana") returned: dana@example.com',
        "send_email",
    ),
    WhichToolExample(
        (_CONTACT, _EMAIL),
        "Look up Dana's email address, then send her the report.",
        'find_contact(name="Dana") returned: dana@example.com; '
        'send_email(to="dana@example.com", subject="Report") returned: sent',
        NONE,
    ),
)


def _names(tools: Sequence[Any]) -> list[str]:
    names: dict[str, None] = {}  # in order, each once: a list's "in" would make many tools quadratic
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and name != NONE:
            names[name] = None
    return list(names)


def _shown(tools: str, request: str, done: str | None) -> str:
    text = f"Tools:\n{tools}\nRequest: {request}"
    return text if done is None else f"{text}\nDone so far: {done}"


def _reply(name: str) -> str:
    return json.dumps({"tool": name})


def which_tool_messages(
    body: Mapping[str, Any], examples: Sequence[WhichToolExample] = GENERIC_WHICH_TOOL_EXAMPLES
) -> list[dict[str, Any]] | None:
    """The gate's question for a step's request ``body``; ``None`` when there is nothing to ask.

    Nothing to ask: no tools declared, a ``tool_choice`` other than ``"auto"`` (the caller already said),
    or no user request to read. Examples of the other phase (before or after tool results) are left out.
    """
    tools = body.get("tools")
    messages = body.get("messages")
    if not isinstance(tools, list) or not tools or body.get("tool_choice") not in (None, "auto"):
        return None
    found = request_and_results(messages) if isinstance(messages, list) else None
    lines = tool_lines(tools)
    if found is None or not lines:
        return None
    request, results = found
    later = bool(results)
    out: list[dict[str, Any]] = [{"role": "system", "content": _LATER_RULES if later else _FIRST_RULES}]
    for example in examples:
        if (example.done is not None) != later:
            continue
        tools_shown = "\n".join(f"- {line}" for line in example.tools)
        out.append({"role": "user", "content": _shown(tools_shown, example.request, example.done)})
        out.append({"role": "assistant", "content": _reply(example.reply)})
    done = "; ".join(results)[:_RESULTS_CHARS] if later else None
    out.append({"role": "user", "content": _shown(lines, request, done)})
    return out


# A tool's name is read as words: snake_case, camelCase and dotted parts apart, lower case. Words of fewer
# than four letters, and the verbs and nouns that name what half of all tools do, tell no tool apart.
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_REQUEST_WORD = re.compile(r"[A-Za-z]{4,}")
_COMMON = frozenset(
    (
        "calculate", "compute", "create", "delete", "details", "fetch", "find", "info", "data", "list",
        "retrieve", "search", "update",
    )
)  # fmt: skip
_STEM = 5  # "frequency" and "frequencies" are one word; so, rarely wrongly, are "playlist" and "player"
_NAMED_WORDS = 2  # one shared word ("weather", "order") is a subject; two name the tool


def _stems(words: Sequence[str]) -> set[str]:
    return {w.lower()[:_STEM] for w in words if len(w) >= 4 and w.lower() not in _COMMON}


def _first_request(body: Mapping[str, Any]) -> tuple[list[Any], str] | None:
    """The declared tools and the request, when no tool has run for it yet; else ``None``."""
    tools = body.get("tools")
    messages = body.get("messages")
    found = request_and_results(messages) if isinstance(messages, list) else None
    if not isinstance(tools, list) or found is None or found[1]:
        return None
    return tools, found[0]


def named_tool(body: Mapping[str, Any]) -> str | None:
    """The declared tool a first request names, by two or more words of the tool's name; else ``None``.

    "The genotype frequency of AA when the allele frequency is 0.3", with ``calculate_genotype_frequency``
    declared, asks for that tool in its own words: the gate's question is not asked (a small model files
    such a request as sums it can do itself), and the decision may still decline. One shared word names a
    subject, not a tool ("the weather" with ``get_weather_alerts``). Only before any tool ran: after
    results, what is left to do is not in the tools' names. Linear in the request and the names.
    """
    first = _first_request(body)
    if first is None:
        return None
    tools, request = first
    said = _stems(_REQUEST_WORD.findall(request))
    for name in _names(tools):
        if len(_stems(_NAME_WORD.findall(name)) & said) >= _NAMED_WORDS:
            return name
    return None


# Words a command may put between the words of a tool's name it calls by name ("Set a 10 minute timer"):
# articles and the like, and numbers with the unit after them.
_BETWEEN = frozenset(("a", "an", "the", "my", "our", "this", "that", "these", "those", "some", "new"))
_OPENING_WORD = re.compile(r"[A-Za-z]+|[0-9]+(?:[.,][0-9]+)?")
_POLITE = frozenset(("please", "can", "could", "would", "will", "you", "kindly"))
_OPENING_WORDS = 12  # a command names its tool in its first words


def opened_with_tool(body: Mapping[str, Any]) -> str | None:
    """The declared tool a first request opens by calling by its name: the name's words in order as the
    request's first words ("Set a timer for 10 minutes for my tea." with ``set_timer``; "Add 2 and 3" with
    ``add``), with only articles, numbers and a number's unit, and names (a capital inside the sentence:
    "Find a Yamaha flute" with ``find_flute``) between them; else ``None``.

    The gate that sorts requests by kind filed that timer request under an answer, and the 1.5B model wrote
    steps for setting a kitchen timer. A request that reads as the tool's own name, said as a command, asks
    for the tool whatever the kind. Words of the same name elsewhere do not ("Write a short list of tips
    for naming files" with ``write_file``). Only before any tool ran. Linear in the request and the names.
    """
    first = _first_request(body)
    if first is None:
        return None
    tools, request = first
    written = _OPENING_WORD.findall(request[:400])[:_OPENING_WORDS]
    while written and written[0].lower() in _POLITE:
        written.pop(0)
    # A capital past the first word is a name: the maker of what a tool finds ("a Yamaha flute").
    names = {i for i, w in enumerate(written) if i and w[0].isupper()}
    words = [w.lower() for w in written]
    for name in _names(tools):
        wanted = [w.lower() for w in _NAME_WORD.findall(name)]
        if wanted and _calls_by_name(words, wanted, names):
            return name
    return None


def _calls_by_name(words: Sequence[str], wanted: Sequence[str], names: Collection[int] = ()) -> bool:
    """``words`` open with ``wanted`` in order, with only :data:`_BETWEEN` words, numbers, the one word
    after a number (its unit) and the words at ``names`` between them; a plural ("files") reads as its
    singular."""
    at = 0
    for i, want in enumerate(wanted):
        after_number = False
        while i and at < len(words) and not _same_word(words[at], want):
            word = words[at]
            if not (word in _BETWEEN or word[0].isdigit() or after_number or at in names):
                return False
            after_number = word[0].isdigit()
            at += 1
        if at >= len(words) or not _same_word(words[at], want):
            return False
        at += 1
    return True


def _same_word(said: str, named: str) -> bool:
    return said == named or (said.endswith("s") and said[:-1] == named)


# A phrase of a description: two words in a row once the words that join them are set aside ("the area
# under a curve" holds "area under" and "under curve"). The verbs half of all tools start with tell none apart.
_PHRASE_WORD = re.compile(r"[A-Za-z]+")
_JOINING = frozenset(
    (
        "a", "about", "after", "an", "and", "any", "are", "as", "at", "be", "been", "by", "can", "could", "do",
        "does", "for", "from", "given", "has", "have", "how", "i", "in", "into", "is", "it", "its", "me", "my",
        "of", "on", "or", "please", "s", "some", "that", "the", "their", "them", "then", "this", "to", "using",
        "was", "what", "when", "which", "will", "with", "would", "you", "your",
        "calculate", "compute", "find", "get", "gets", "retrieve", "retrieves", "return", "returns",
    )
)  # fmt: skip
_DESCRIPTION_CHARS = 400  # of each description: its opening says what the tool does


def _phrases(text: str) -> set[tuple[str, str]]:
    words = [w[:_STEM] for w in (m.lower() for m in _PHRASE_WORD.findall(text)) if w not in _JOINING]
    return set(pairwise(words))


def described_tool(body: Mapping[str, Any]) -> str | None:
    """The declared tool a first request describes in its description's words; else ``None``.

    "The compatibility score of Aries with Gemini", with ``get_zodiac_compatibility`` "Retrieve the
    compatibility score between two Zodiac signs", shares a phrase of two words with what the tool says it
    does. Such a request asks for that tool as :func:`named_tool`'s do, and the decision may still decline.
    A single shared word is a subject ("area" with a triangle's area tool, asked a circle's). The first
    tool in order whose description shares a phrase; only before any tool ran. Linear in the request and
    the descriptions.
    """
    first = _first_request(body)
    if first is None:
        return None
    tools, request = first
    said = _phrases(request)
    if not said:
        return None
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        description = function.get("description") if isinstance(function, Mapping) else None
        if not isinstance(name, str) or name == NONE or not isinstance(description, str):
            continue
        if _phrases(description[:_DESCRIPTION_CHARS]) & said:
            return name
    return None


def which_tool_schema(body: Mapping[str, Any]) -> dict[str, Any]:
    """The reply's schema: ``{"tool": one of the declared tools' names, or "none"}``."""
    tools = body.get("tools")
    names = _names(tools) if isinstance(tools, list) else []
    return {
        "type": "object",
        "properties": {"tool": {"enum": [*names, NONE]}},
        "required": ["tool"],
    }


def read_which_tool(text: str, tools: Sequence[Any]) -> WhichTool | None:
    """What a reply says: a declared tool, or none; ``None`` when it says neither (the gate is then off)."""
    value = read_json(text)
    said = value.get("tool") if isinstance(value, dict) else None
    if not isinstance(said, str):
        return None
    if said.strip().lower() == NONE:
        return WhichTool(None)
    return WhichTool(said) if said in _names(tools) else None
