"""The tool gate: tool or answer, asked as a question of its own before a routed step picks a call.

Asked with the tools in its prompt, a 0.5B model calls one for nearly every question ("List three colors."
lists the folder); asked to pick between the tools and an answer under a schema, it still picks a tool.
The same model sorts requests well when the question is a different one: a short prompt of its own that
names the tools in a line each, says what needs a tool and what does not, and shows a few worked
examples as earlier turns, then the user's request; the reply is held to ``{"choice": "tool"|"answer"}``
and sampled at temperature 0. After tool results the question changes to "does the request still need a
tool?", with the calls made so far (``list_dir(path="docs")``) and what they returned, so a two-step task
takes its second step and a one-step task answers.

The examples use requests and tools of their own (none of the benchmark's), in both directions for each
kind: the model copies the balance of its examples, so a new example goes in with its opposite.

Some requests need no question: one that names a path a tool's schema lists (``config.ini``,
``docs/faq.md``: a small-model tool set names the folder's files in its schemas) is about the user's
files, and the gate of the 1.5B model still answered "What port does config.ini set?" from its own
knowledge. :func:`names_a_listed_path` sees that before anything is asked.

All of it is sans I/O: :func:`gate_messages` builds the question, :func:`read_gate` reads the reply;
``steering/routing.py`` sends it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..turn.side_tasks import read_json
from .grounding import chat_text, last_request

__all__ = [
    "GATE_SCHEMA",
    "KINDS",
    "KIND_SCHEMA",
    "GateChoice",
    "gate_messages",
    "gate_schema",
    "names_a_listed_path",
    "read_gate",
    "tools_on_named_paths",
]

GateChoice = Literal["tool", "answer"]

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

#: What a request is about, as the first question asks it, and the choice each kind makes. Asked "tool or
#: answer?", the 1.5B model said tool for "How do I read a text file in Python?", "How do I list the files
#: in a folder with Python?" and "Translate 'good morning' into Spanish." (it wrote the translation into a
#: file), however the rules and examples were worded; asked what the request is about, it sorted all of
#: them as answers and every request of the benchmark's other categories as tools. Live data names its
#: kinds: a currency conversion was otherwise maths.
KINDS: dict[str, GateChoice] = {
    "looking in the user's files": "tool",
    "creating or changing files": "tool",
    "live data (weather, prices, news)": "tool",
    "converting money between currencies": "tool",
    "an action to do": "tool",
    "how to do something in code or a shell": "answer",
    "translating or composing text": "answer",
    "general knowledge": "answer",
    "maths": "answer",
    "chat": "answer",
}

#: The first question's reply: one of :data:`KINDS`, which a grammar server holds the model to.
KIND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"about": {"enum": list(KINDS)}},
    "required": ["about"],
}

_FILES, _CHANGE, _LIVE, _MONEY, _ACTION, _HOW, _WRITING, _KNOWLEDGE, _MATHS, _CHAT = KINDS

# Before any tool ran: the request alone, and what it is about.
_FIRST_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("What does setup.py contain?", _FILES),
    ("Name four fruits.", _KNOWLEDGE),
    ("Show me the files in src.", _FILES),
    ("How do I delete a folder in Linux?", _HOW),
    ("Which file defines the main function?", _FILES),
    ("What is a CSV file?", _KNOWLEDGE),
    ("Add a file todo.md with the text: ship it", _CHANGE),
    ("List four animals.", _KNOWLEDGE),
    ("What's the stock price of ACME right now?", _LIVE),
    ("Explain what a stock is.", _KNOWLEDGE),
    ("How do I count the lines of a file in Bash?", _HOW),
    ("Count the lines of main.py.", _FILES),
    ("How can I open a file and print it in Java?", _HOW),
    ("What does the grep command do?", _KNOWLEDGE),
    ("Translate 'thank you' into German.", _WRITING),
    ("Translate intro.md into German and save it as intro.de.md.", _CHANGE),
    ("Write a short list of tips for packing a suitcase.", _WRITING),
    ("Write a list of packing tips into packing.txt.", _CHANGE),
    ("What is 7 plus 5?", _MATHS),
    ("Thanks!", _CHAT),
    ("Send the report to Dana by email.", _ACTION),
    ("What is 50 Swiss francs in pounds?", _MONEY),
    ("Look for the file that mentions Redis, then open it and tell me its first line.", _FILES),
)

# After tool results: the request and what the tools returned.
_LATER_EXAMPLES: tuple[tuple[str, str | None, GateChoice], ...] = (
    ("What does setup.py contain?", None, "tool"),
    ("Name four fruits.", None, "answer"),
    ("Show me the files in src.", None, "tool"),
    ("How do I delete a folder in Linux?", None, "answer"),
    ("How do I parse JSON in JavaScript?", None, "answer"),
    ("Which file defines the main function?", None, "tool"),
    ("What is a CSV file?", None, "answer"),
    ("Add a file todo.md with the text: ship it", None, "tool"),
    ("What does the grep command do?", None, "answer"),
    ("List four animals.", None, "answer"),
    ("What's the stock price of ACME right now?", None, "tool"),
    ("What version does setup.py declare?", "read_file(path=\"setup.py\") returned: version='2.1'", "answer"),
    (
        "Read name.txt, then greet the person named in it by email.",
        'read_file(path="name.txt") returned: Dana',
        "tool",
    ),
    ("Which files are in src?", 'list_dir(path="src") returned: main.py util.py', "answer"),
    # Told what a step was done on ("list_dir(path=...)"), not only what it returned, the 1.5B model said
    # answer once a folder it was asked to show was listed; without the call's arguments it asked for more
    # tools after "Show me what the docs folder contains." was listed. With them, a listing that is a
    # first step needs its opposite here: without it, "List the recipes folder, then read the file in it"
    # answered after the listing.
    (
        "List the src folder, then read the file in it that starts the program.",
        'list_dir(path="src") returned: - main.py - util.py',
        "tool",
    ),
    (
        "Find the file that mentions Redis, then read it.",
        'search_text(pattern="Redis") returned: cache.md:3: use Redis',
        "tool",
    ),
    (  # and once both steps are done, the answer: the 1.5B model went on listing and reading other files
        "Find the file that mentions Redis, then read it.",
        'search_text(pattern="Redis") returned: cache.md:3: use Redis; '
        'read_file(path="cache.md") returned: # Cache use Redis on port 6379',
        "answer",
    ),
    # A write that was asked for is done once it is written: without these the 0.5B model wrote the same
    # file again and again, and the 1.5B model wrote each line of a list over the one it was asked for.
    (
        "Add a file todo.md with the text: ship it",
        'write_file(path="todo.md", content="ship it") returned: wrote 7 bytes to todo.md',
        "answer",
    ),
    (
        "Create a.txt saying hi, then create b.txt saying bye.",
        'write_file(path="a.txt", content="hi") returned: wrote 2 bytes to a.txt',
        "tool",
    ),
    # What a file names may be what a tool is asked about: the 1.5B model read city.txt, said answer, and
    # made up the weather in Lisbon. Last, where they weigh most: earlier, it still answered.
    ("What does the word in word.txt mean?", 'read_file(path="word.txt") returned: ephemeral', "answer"),
    (
        "What's the stock price of the company named in ticker.txt?",
        'read_file(path="ticker.txt") returned: ACME',
        "tool",
    ),
    (
        "Look up the phone number of the person named in contact.txt.",
        'read_file(path="contact.txt") returned: Dana',
        "tool",
    ),
)

_DESCRIPTION_CHARS = 120  # a tool's line: the first line of its description, cut here
_RESULT_CHARS = 300  # of each tool result the gate sees
_RESULTS_CHARS = 1200  # of all of them
_ARGUMENTS_CHARS = 2000  # a call's arguments longer than this are not shown to the gate
_ARGUMENT_CHARS = 60  # of each argument's JSON


def _tool_lines(tools: Sequence[Mapping[str, Any]]) -> str:
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


def _request_and_results(messages: Sequence[Any]) -> tuple[str, list[str]] | None:
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


def _named_paths(body: Mapping[str, Any]) -> set[str]:
    """The listed paths a step's request names as words of their own, before any tool ran for it."""
    tools = body.get("tools")
    messages = body.get("messages")
    if not isinstance(tools, list) or not isinstance(messages, list):
        return set()
    found = _request_and_results(messages)
    if found is None or found[1]:
        return set()
    listed = _listed_paths(tools)
    if not listed:
        return set()
    return {w for w in (word.strip(_WORD_EDGES) for word in _WORD.findall(found[0])) if w in listed}


def names_a_listed_path(body: Mapping[str, Any]) -> bool:
    """Whether a step's request names, as a word of its own, a path one of its tools lists in its schema.

    Only before any tool ran for the request: after results, whether more is needed is the gate's question.
    """
    return bool(_named_paths(body))


def tools_on_named_paths(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The step's tools that list a path its request names, each held to the named paths; ``None``: none named.

    A request that names one of the user's files depends on what the file holds: "the weather in the city
    named in city.txt" is not answered by a call of ``get_weather`` with a city the model picks, and the
    1.5B model picked one (New York) rather than read the file. The first step is then a call on that
    file: of a tool whose schema lists it, with the path held to the files named; of those, the ones that
    need nothing else where there are any (reading it: given a search too, the model searched todo.txt for
    "todo" when asked for its second item). Only before any tool ran for the request, as
    :func:`names_a_listed_path`.
    """
    named = _named_paths(body)
    tools = body.get("tools")
    if not named or not isinstance(tools, list):
        return None
    out: list[dict[str, Any]] = []
    whole: list[dict[str, Any]] = []  # the tools that need nothing but the named path
    for tool in tools:
        held = {
            name: [v for v in values if v in named]
            for name, values in _path_properties(tool)
            if any(v in named for v in values)
        }
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


def _choice(choice: GateChoice) -> str:
    return json.dumps({"choice": choice})


def gate_messages(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The gate's question for a step's request ``body``; ``None`` when there is nothing to ask.

    Nothing to ask: no tools declared, ``tool_choice`` other than ``"auto"`` (the caller already said),
    or no user request to read.
    """
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools or body.get("tool_choice") not in (None, "auto"):
        return None
    messages = body.get("messages")
    found = _request_and_results(messages) if isinstance(messages, list) else None
    lines = _tool_lines(tools)
    if found is None or not lines:
        return None
    request, results = found
    head = f"You are a router. An assistant can answer from its own knowledge, or use these tools:\n{lines}\n"
    out: list[dict[str, Any]] = []
    if not results:
        kinds = ", ".join(KINDS)
        sort = f"You sort requests to an assistant that can answer from its own knowledge, or use these tools:\n{lines}\n"
        out.append({"role": "system", "content": f"{sort}Say what the request is about: {kinds}."})
        for text, kind in _FIRST_EXAMPLES:
            reply = json.dumps({"about": kind})
            out += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        out.append({"role": "user", "content": request})
        return out
    out.append({"role": "system", "content": head + _LATER_RULES})
    for text, done, choice in _LATER_EXAMPLES:
        shown = f"Request: {text}" + (f"\nDone so far: {done}" if done else "")
        out += [{"role": "user", "content": shown}, {"role": "assistant", "content": _choice(choice)}]
    done = "; ".join(results)[:_RESULTS_CHARS]
    out.append({"role": "user", "content": f"Request: {request}\nDone so far: {done}"})
    return out


def gate_schema(body: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of the gate's reply to :func:`gate_messages` of ``body``: a kind first, a choice later."""
    messages = body.get("messages")
    found = _request_and_results(messages) if isinstance(messages, list) else None
    return GATE_SCHEMA if found is not None and found[1] else KIND_SCHEMA


def read_gate(text: str) -> GateChoice | None:
    """The gate's choice in a reply (a choice, or a kind of :data:`KINDS`); ``None`` when it holds neither."""
    value = read_json(text)
    if not isinstance(value, dict):
        return None
    kind = value.get("about")
    if isinstance(kind, str) and kind in KINDS:
        return KINDS[kind]
    choice = value.get("choice")
    if choice == "tool":
        return "tool"
    if choice == "answer":
        return "answer"
    return None
