"""The tool gate: tool or answer, asked as a question of its own before a routed step picks a call.

Asked with the tools in its prompt, a small model calls one for nearly every question; asked to pick
between the tools and an answer under a schema, it still picks a tool. The same model sorts requests well
when the question is a different one: a short prompt of its own that names the tools in a line each, says
what needs a tool and what does not, and shows worked examples as earlier turns (``GateExamples``: the
host's, or ``GENERIC_EXAMPLES``), then the user's request; the reply is held to
``{"about": kind}`` (before any tool ran) or ``{"choice": "tool"|"answer"}`` (after) and sampled at
temperature 0. After tool results the question changes to "does the request still need a tool?", with
the calls made so far (``get_weather(city="Oslo")``) and what they returned, so a two-step task takes its
second step and a one-step task answers.

Some requests need no question: one that names a path a tool's schema lists (``config.ini``,
``docs/faq.md``: a small-model tool set may name the folder's files in its schemas) is about the user's
files, and a small model's gate still answers such a request from its own knowledge.
:func:`names_a_listed_path` sees that before anything is asked. What was measured on which model is in
``docs/steering.md``.

All of it is sans I/O: :func:`gate_messages` builds the question, :func:`read_gate` reads the reply;
``routing.py`` sends it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from ..turn.side_tasks import read_json
from .chat import chat_text, last_request
from .examples import ALREADY_SAID, CHANGES, GENERIC_EXAMPLES, KINDS, GateChoice, GateExamples

__all__ = [
    "FOLLOW_UP_SCHEMA",
    "GATE_SCHEMA",
    "KINDS",
    "KIND_SCHEMA",
    "GateChoice",
    "PathArgument",
    "asks_contents",
    "asks_how",
    "gate_kind",
    "gate_messages",
    "gate_schema",
    "names_a_listed_path",
    "read_gate",
    "tools_on_named_paths",
]

#: The gate's reply: one of two words, which a grammar server holds the model to.
GATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"choice": {"enum": ["tool", "answer"]}},
    "required": ["choice"],
}

_LATER_RULES = (
    "Say tool when the request still needs information or an action only a tool gives (the user's files, "
    "live data, doing something). Say answer for general knowledge, maths, writing, translation and "
    "programming help, even when they mention files or lists, and when what was done so far is enough to "
    "answer."
)

#: The first question's reply: one of :data:`KINDS`, which a grammar server holds the model to.
KIND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"about": {"enum": list(KINDS)}},
    "required": ["about"],
}

#: A follow-up's first question: one of :data:`KINDS`, or :data:`ALREADY_SAID` when the earlier answer holds it.
FOLLOW_UP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"about": {"enum": [*KINDS, ALREADY_SAID]}},
    "required": ["about"],
}

_DESCRIPTION_CHARS = 120  # a tool's line: the first line of its description, cut here
_RESULT_CHARS = 300  # of each tool result the gate sees
_RESULTS_CHARS = 1200  # of all of them
_ARGUMENTS_CHARS = 2000  # a call's arguments longer than this are not shown to the gate
_ARGUMENT_CHARS = 60  # of each argument's JSON
_EARLIER_CHARS = 600  # of the earlier request and of the earlier answer a follow-up's question shows


def tool_lines(tools: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        description = function.get("description")
        first = description.strip().split("\n", 1)[0] if isinstance(description, str) else ""
        first = first[:_DESCRIPTION_CHARS]
        lines.append(f"- {function['name']}: {first}" if first else f"- {function['name']}")
    return "\n".join(lines)


def _call_shown(name: str, arguments: Any) -> str:
    """A call as the gate sees it: ``list_dir(path="docs")``; the name alone when the arguments are not a
    JSON object of a readable size."""
    if not isinstance(arguments, str) or len(arguments) > _ARGUMENTS_CHARS:
        return name
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return name
    if not isinstance(value, dict):
        return name
    shown: list[str] = []
    for key, argument in value.items():
        try:
            text = json.dumps(argument, ensure_ascii=False)
        except (ValueError, RecursionError):  # nesting json.loads took but json.dumps does not
            return name
        cut = text if len(text) <= _ARGUMENT_CHARS else text[: _ARGUMENT_CHARS - 3] + "..."
        shown.append(f"{key}={cut}")
    return f"{name}({', '.join(shown)})"


def request_and_results(messages: Sequence[Any]) -> tuple[str, list[str]] | None:
    """The last user request, and what tools did after it (``name(arguments) returned: text``)."""
    user, after = last_request(messages)
    request = "" if user is None else " ".join(chat_text(user.get("content")).split())
    if not request:
        return None
    calls_by_id: dict[str, str] = {}
    results: list[str] = []
    for message in after:
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and isinstance(call.get("id"), str):
                name = str(function.get("name", "a tool"))
                calls_by_id[call["id"]] = _call_shown(name, function.get("arguments"))
        if message.get("role") == "tool":
            call = calls_by_id.get(str(message.get("tool_call_id")), "a tool")
            shown = " ".join(chat_text(message.get("content")).split())[:_RESULT_CHARS]
            results.append(f"{call} returned: {shown}")
    return request, results


# A path-like word of a request: letters, digits and the characters file names are made of. Read once,
# left to right, so the check is linear in the request whatever the schemas list.
_WORD = re.compile(r"[\w./\\-]+")
_WORD_EDGES = ".,:;!?'\"()"
_LISTED_CAP = 2000  # enum values looked at, over all tools

#: A tool's argument that takes one of the user's paths, and the kind it takes (``ToolRouting.path_arguments``).
PathArgument = tuple[str, Literal["file", "folder"]]


def _path_properties(tool: Any) -> list[tuple[str, list[Any]]]:
    """A tool's arguments whose schema lists values (``(argument, enum values)``), in schema order."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    parameters = function.get("parameters") if isinstance(function, Mapping) else None
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return []
    out: list[tuple[str, list[Any]]] = []
    for name, schema in properties.items():
        values = schema.get("enum") if isinstance(schema, Mapping) else None
        if isinstance(name, str) and isinstance(values, list):
            out.append((name, values[:_LISTED_CAP]))
    return out


def _is_path(value: Any) -> bool:
    return isinstance(value, str) and len(value) >= 3 and ("." in value.strip(".") or "/" in value)


def _listed_paths(tools: Sequence[Any]) -> set[str]:
    """String enum values of the tools' arguments that look like paths: a dot or a slash inside a name."""
    found: set[str] = set()
    for tool in tools:
        for _name, values in _path_properties(tool):
            for value in values:
                if _is_path(value):
                    found.add(value)
                if len(found) >= _LISTED_CAP:
                    return found
    return found


def _named_paths(body: Mapping[str, Any], also: Collection[str] = ()) -> set[str]:
    """The listed paths a step's request names as words of their own, and those of ``also`` that any
    tool lists (path-shaped or not), before any tool ran for it."""
    tools = body.get("tools")
    messages = body.get("messages")
    if not isinstance(tools, list) or not isinstance(messages, list):
        return set()
    found = request_and_results(messages)
    if found is None or found[1]:
        return set()
    listed = _listed_paths(tools)
    words = (word.strip(_WORD_EDGES) for word in _WORD.findall(found[0]))
    named = {w for w in words if w in listed}
    if also:
        # A host found these in the request itself ("the tests folder"), so a listed value counts even
        # when it is not path-shaped: a bare word is only taken for a path when the request writes it.
        values = {
            v for tool in tools for _name, vs in _path_properties(tool) for v in vs if isinstance(v, str)
        }
        named |= {p for p in also if isinstance(p, str) and p in values}
        named |= {p for p in _folders_below(also) if not values.isdisjoint(_ancestors(p))}
    return named


def _folders_below(also: Collection[str]) -> set[str]:
    """The folders among a host's paths (written with a trailing slash), without the slash."""
    return {p.rstrip("/") for p in also if isinstance(p, str) and p.endswith("/") and p.strip("/")}


def _ancestors(folder: str) -> list[str]:
    """The folders ``folder`` is in, the working folder (``.``) first."""
    parts = folder.split("/")
    return [".", *("/".join(parts[:i]) for i in range(1, len(parts)))]


def _held_values(values: Sequence[Any], named: Collection[str], below: Collection[str]) -> list[Any]:
    """An argument's listed ``values`` held to the ``named`` paths: those it lists, and the folders of
    ``below`` that sit under a folder it lists (a schema lists subfolders only so deep: asked how many
    Python files src/steadyloop/cli holds, the 1.5B model could list only src/steadyloop, and counted that)."""
    listed = {v for v in values if isinstance(v, str)}
    held: list[Any] = [v for v in values if v in named]
    held += sorted(
        p for p in below if p in named and p not in listed and not listed.isdisjoint(_ancestors(p))
    )
    return held


def names_a_listed_path(body: Mapping[str, Any]) -> bool:
    """Whether a step's request names, as a word of its own, a path one of its tools lists in its schema.

    Only before any tool ran for the request: after results, whether more is needed is the gate's question.
    """
    return bool(_named_paths(body))


def tools_on_named_paths(
    body: Mapping[str, Any],
    also: Collection[str] = (),
    path_arguments: Mapping[str, PathArgument] | None = None,
) -> list[dict[str, Any]] | None:
    """The step's tools that list a path its request names, each held to the named paths; ``None``: none named.

    ``also``: paths the request names in other ways, as a host found them (the files that define a
    function the request mentions); only those the tools list count, and folders written with a trailing
    slash (``src/steadyloop/cli/``) that sit under a folder an argument lists, which that argument then
    takes.

    ``path_arguments``: the host's tools whose argument takes one of the user's paths as free text (no
    ``enum``: a folder too big to list), by tool name, with the kind of path it takes. Such an argument
    takes the paths of ``also`` of its kind (a folder is written with a trailing slash), so a host's
    reading of the request reaches a big folder as it does a small one.

    A request that names one of the user's files depends on what the file holds: "the weather in the city
    named in city.txt" is not answered by a call of ``get_weather`` with a city the model picks, and a small
    model picks one rather than read the file. The first step is then a call on that file: of a tool whose
    schema lists it, with the path held to the files named; of those, the ones that need nothing else where
    there are any (given a search as well, a small model searches the file for a word of the request
    rather than read it). Only before any tool ran for the request, as :func:`names_a_listed_path`.
    """
    named = _named_paths(body, also)
    below = _folders_below(also)
    tools = body.get("tools")
    free = _free_paths(body, also, path_arguments or {})
    if not (named or free) or not isinstance(tools, list):
        return None
    out: list[dict[str, Any]] = []
    whole: list[dict[str, Any]] = []  # the tools that need nothing but the named path
    for tool in tools:
        held = {name: _held_values(values, named, below) for name, values in _path_properties(tool)}
        held = {name: values for name, values in held.items() if values}
        held.update(_free_held(tool, free, path_arguments or {}))
        if not held:
            continue
        function = dict(tool["function"])
        parameters = dict(function["parameters"])
        properties = dict(parameters["properties"])
        for name, values in held.items():
            properties[name] = {**properties[name], "enum": values}
        parameters["properties"] = properties
        function["parameters"] = parameters
        out.append({**tool, "function": function})
        required = parameters.get("required")
        if isinstance(required, list) and all(name in held for name in required):
            whole.append(out[-1])
    return whole or out or None


def _free_paths(
    body: Mapping[str, Any], also: Collection[str], path_arguments: Mapping[str, PathArgument]
) -> dict[str, list[str]]:
    """The host's paths by kind (``file``, ``folder``), for the arguments of ``path_arguments``; none once
    a tool ran for the request."""
    messages = body.get("messages")
    if not also or not path_arguments or not isinstance(messages, list):
        return {}
    found = request_and_results(messages)
    if found is None or found[1]:
        return {}
    paths = [p for p in also if isinstance(p, str) and p.strip()]
    folders = [p.rstrip("/") or "." for p in paths if p.endswith("/")]
    files = [p for p in paths if not p.endswith("/")]
    return {"file": list(dict.fromkeys(files)), "folder": list(dict.fromkeys(folders))}


def _free_held(
    tool: Any, free: Mapping[str, list[str]], path_arguments: Mapping[str, PathArgument]
) -> dict[str, list[str]]:
    """``tool``'s free-text path argument held to the host's paths of its kind, where it has one."""
    function = tool.get("function") if isinstance(tool, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    taken = path_arguments.get(name) if isinstance(name, str) else None
    parameters = function.get("parameters") if isinstance(function, Mapping) else None
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if taken is None or not isinstance(properties, Mapping):
        return {}
    argument, kind = taken
    schema = properties.get(argument)
    free_text = (
        isinstance(schema, Mapping) and "enum" not in schema and schema.get("type", "string") == "string"
    )
    values = free.get(kind) or []
    return {argument: values} if free_text and values else {}


def _choice(choice: GateChoice) -> str:
    return json.dumps({"choice": choice})


def gate_messages(
    body: Mapping[str, Any], examples: GateExamples = GENERIC_EXAMPLES
) -> list[dict[str, Any]] | None:
    """The gate's question for a step's request ``body``; ``None`` when there is nothing to ask.

    Nothing to ask: no tools declared, ``tool_choice`` other than ``"auto"`` (the caller already said),
    or no user request to read.

    Args:
        body: the step's request, as it would be sent.
        examples: the worked examples shown before the request.
    """
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools or body.get("tool_choice") not in (None, "auto"):
        return None
    messages = body.get("messages")
    found = request_and_results(messages) if isinstance(messages, list) else None
    lines = tool_lines(tools)
    if found is None or not lines:
        return None
    request, results = found
    head = f"You are a router. An assistant can answer from its own knowledge, or use these tools:\n{lines}\n"
    out: list[dict[str, Any]] = []
    if not results:
        return _first_question(lines, request, earlier_exchange(messages), examples)
    out.append({"role": "system", "content": head + _LATER_RULES})
    for text, done, choice in examples.later:
        shown = f"Request: {text}" + (f"\nDone so far: {done}" if done else "")
        out += [{"role": "user", "content": shown}, {"role": "assistant", "content": _choice(choice)}]
    done = "; ".join(results)[:_RESULTS_CHARS]
    out.append({"role": "user", "content": f"Request: {request}\nDone so far: {done}"})
    return out


def _first_question(
    lines: str, request: str, earlier: tuple[str, str] | None, examples: GateExamples
) -> list[dict[str, Any]]:
    """The question before any tool ran for ``request``: what it is about. A follow-up (``earlier`` is the
    exchange before it) is shown with that exchange, and may be filed as what the earlier answer says."""
    follow_ups = examples.follow_ups if earlier is not None else ()
    kinds = ", ".join([*KINDS, ALREADY_SAID] if follow_ups else KINDS)
    sort = f"You sort requests to an assistant that can answer from its own knowledge, or use these tools:\n{lines}\n"
    out: list[dict[str, Any]] = [
        {"role": "system", "content": f"{sort}Say what the request is about: {kinds}."}
    ]
    shown = [(text, kind) for text, kind in examples.first]
    shown += [(_follow_up(before, answer, text), kind) for before, answer, text, kind in follow_ups]
    for text, kind in shown:
        out += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": json.dumps({"about": kind})},
        ]
    out.append(
        {"role": "user", "content": _follow_up(*earlier, request) if follow_ups and earlier else request}
    )
    return out


def _follow_up(before: str, answer: str, request: str) -> str:
    return f"Earlier request: {before}\nEarlier answer: {answer}\nRequest: {request}"


def earlier_exchange(messages: Any) -> tuple[str, str] | None:
    """The exchange before a chat body's last request: the user message before it and the last answer text
    the assistant gave after that one, each cut short; ``None`` when there is no earlier answer in text."""
    if not isinstance(messages, list):
        return None
    users = [i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "user"]
    if len(users) < 2:
        return None
    before, last = users[-2], users[-1]
    answers = [
        chat_text(m.get("content")).strip()
        for m in messages[before + 1 : last]
        if isinstance(m, Mapping) and m.get("role") == "assistant"
    ]
    answer = next((text for text in reversed(answers) if text), "")
    request = chat_text(messages[before].get("content")).strip()
    if not answer or not request:
        return None
    return request[:_EARLIER_CHARS], answer[:_EARLIER_CHARS]


def gate_schema(body: Mapping[str, Any], examples: GateExamples = GENERIC_EXAMPLES) -> dict[str, Any]:
    """The schema of the gate's reply to :func:`gate_messages` of ``body`` with ``examples``: a kind first
    (a follow-up's kinds when it is shown as one), a choice later."""
    messages = body.get("messages")
    found = request_and_results(messages) if isinstance(messages, list) else None
    if found is not None and found[1]:
        return GATE_SCHEMA
    if examples.follow_ups and earlier_exchange(messages) is not None:
        return FOLLOW_UP_SCHEMA
    return KIND_SCHEMA


# "How do I ...", "How can we ...", "How to ...", "Can you show me how to ...", "Explain how I ...".
_HOW_TO = re.compile(
    r"(?:(?:can|could|would|will) you )?(?:please )?(?:(?:show|tell|teach) me |explain )?"
    r"how (?:to\b|(?:do|does|can|could|would|should|might|must) (?:i|we|you|one)\b)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.?!;:](?:\s|$)")
_HOW_CHARS = 400  # a longer request is more than one question about how


def asks_how(request: str) -> bool:
    """Whether ``request`` only asks how to do something: one question that opens "How do I ...", "How to
    ...", "Can you show me how to ..." and says nothing else ("... in Bash? Then do it." says more). Told
    how, the user chooses whether to do it; a change made for them is one they did not ask for, so the
    gate's "creating or changing files" for such a request is read as "how to" (:func:`read_gate`). Linear
    in the request."""
    text = " ".join(request.split())
    if len(text) > _HOW_CHARS or not _HOW_TO.match(text):
        return False
    return _SENTENCE_END.search(text.rstrip("?!. ")) is None


# "What is in this folder?", "What's inside the recipes directory?", "List the files in docs.", "Show me
# everything here.", "Which files are in src?": asked only what a place holds.
_CONTENTS_ASKED = re.compile(
    r"(?:(?:can|could|would|will) you )?(?:please )?"
    r"(?:what(?:'s|\s+is|\s+are)\s+(?:in|inside|stored|there)\b|list\b|show\s+me\b|tell\s+me\s+what\b"
    r"|which\s+files\s+are\b)",
    re.IGNORECASE,
)


def asks_contents(request: str) -> bool:
    """Whether ``request`` only asks what a place holds: one question that opens "What is in ...", "List
    ...", "Show me ...", with no step after it ("List the src folder, then read ..." says more). Linear in
    the request."""
    text = " ".join(request.split())
    if len(text) > _HOW_CHARS or not _CONTENTS_ASKED.match(text) or re.search(r"\bthen\b", text, re.I):
        return False
    return _SENTENCE_END.search(text.rstrip("?!. ")) is None


def gate_kind(text: str | None) -> str | None:
    """The kind of :data:`KINDS` (or :data:`ALREADY_SAID`) a gate reply files its request under; ``None``
    when it names none."""
    value = read_json(text) if text else None
    kind = value.get("about") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) and (kind in KINDS or kind == ALREADY_SAID) else None


def read_gate(text: str, *, asked_how: bool = False) -> GateChoice | None:
    """The gate's choice in a reply (a choice, or a kind of :data:`KINDS`); ``None`` when it holds neither.

    ``asked_how``: the request only asks how to do something (:func:`asks_how`), so a kind that changes
    something (:data:`~.examples.CHANGES`) is an answer that says how."""
    value = read_json(text)
    if not isinstance(value, dict):
        return None
    kind = value.get("about")
    if not isinstance(kind, str):
        kind = None
    if kind == ALREADY_SAID or (asked_how and kind in CHANGES):
        return "answer"
    if kind in KINDS:
        return KINDS[kind]
    choice = value.get("choice")
    if choice == "tool":
        return "tool"
    if choice == "answer":
        return "answer"
    return None
