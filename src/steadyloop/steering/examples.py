"""The tool gate's worked examples, as data: ``GateExamples``, and a generic set that names no host's tools.

A small model copies the balance of its examples, so each kind of request is shown in both directions: a
new example goes in with its opposite. The examples are a host's to give (``ToolRouting.examples``): a
host whose tools read and write files shows calls of its own file tools, a host of other tools its own.
The generic set below uses requests and tools of its own (weather, prices, contacts, notes), none of any
host's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ALREADY_SAID",
    "ANSWER_NOTES",
    "CHANGES",
    "FIRST_EXAMPLES",
    "FOLLOW_UP_EXAMPLES",
    "GENERIC_EXAMPLES",
    "KINDS",
    "GateChoice",
    "GateExamples",
]

GateChoice = Literal["tool", "answer"]

#: What a request is about, as the gate's first question asks it, and the choice each kind makes. Asked
#: "tool or answer?" directly, a small model says tool for questions about how to do something in code or
#: how to write something (see docs/steering.md); asked what the request is about, it sorts them. Live
#: data names its kinds: a currency conversion is otherwise maths.
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

_FILES, _CHANGE, _LIVE, _MONEY, _ACTION, _HOW, _WRITING, _KNOWLEDGE, _MATHS, _CHAT = KINDS

#: What an answer asked before any tool ran is told of the kind the gate read its request as, by kind: a
#: line added to its system prompt. Asked "Translate 'good morning' into Spanish.", the 1.5B model answered
#: "Good morning!" at temperature 0 and in 2 of 5 samples at 0.2, reading the quoted words as said to it;
#: told that a text is asked for, it translated in 5 of 5 (and "thank you", "hello" as before).
ANSWER_NOTES: dict[str, str] = {_WRITING: "The user asks you to translate or write a text: write it."}

#: The kinds that change something for the user. A request that only asks how to do such a thing ("How do I
#: create an empty file in Bash?") is told how, not done for them: the 1.5B model filed that request under
#: "creating or changing files" and wrote empty.txt before it explained `touch` (``tool_gate.asks_how``).
CHANGES: frozenset[str] = frozenset((_CHANGE, _ACTION))

#: The kind of a follow-up the conversation's earlier answer already holds ("how many is that?" after a
#: listing): an answer. Offered only when there is an earlier answer to read, so a first request is sorted
#: among :data:`KINDS` alone, as before.
ALREADY_SAID = "what the earlier answer already says"


@dataclass(frozen=True, slots=True)
class GateExamples:
    """Worked examples the tool gate shows before the request, as earlier turns of its own conversation.

    Attributes:
        first: before any tool ran: ``(request, kind)``, ``kind`` one of ``KINDS``. Every kind should be
            shown, so both choices are.
        follow_ups: a request that follows an earlier exchange, before any tool ran for it:
            ``(earlier request, earlier answer, request, kind)``, ``kind`` one of ``KINDS`` or
            :data:`ALREADY_SAID`. Shown only when the request has an earlier answer before it; show both a
            follow-up the answer holds and one that needs a tool.
        later: after tool results: ``(request, done so far, choice)``, where done so far is the calls made
            and what they returned, written as the gate is shown them (``name(arg="value") returned:
            text``), or ``None`` for a request nothing was done for yet.
    """

    first: tuple[tuple[str, str], ...]
    later: tuple[tuple[str, str | None, GateChoice], ...]
    follow_ups: tuple[tuple[str, str, str, str], ...] = ()


#: Before any tool ran: the request alone, and what it is about. They name no tool.
FIRST_EXAMPLES: tuple[tuple[str, str], ...] = (
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

_RECIPES = "There are three recipes: pancakes.md, soup.md and bread.md."
_PORT = "config.ini sets port 8042."

#: Follow-ups, before any tool ran for them: some the earlier answer holds (a count of what it listed, a
#: summary, a comparison with what it said), some that need a tool again (another file, another city).
#: They name no tool.
FOLLOW_UP_EXAMPLES: tuple[tuple[str, str, str, str], ...] = (
    ("List the recipes.", _RECIPES, "So how many recipes do I have?", ALREADY_SAID),
    ("List the recipes.", _RECIPES, "What does soup.md say?", _FILES),
    ("What port does config.ini set?", _PORT, "Is that port above 8000?", ALREADY_SAID),
    ("What port does config.ini set?", _PORT, "Which host does it set?", _FILES),
    ("What's the weather in Oslo?", "It is 4°C and cloudy in Oslo.", "And in Bergen?", _LIVE),
    (
        "What's the weather in Oslo?",
        "It is 4°C and cloudy in Oslo.",
        "Say that in one short line.",
        ALREADY_SAID,
    ),
)

#: Examples for any host, with tools of their own: a first step that needs a second, a second that
#: completes the request, an action done once, and a value a result names that another tool is asked about.
GENERIC_EXAMPLES = GateExamples(
    first=FIRST_EXAMPLES,
    follow_ups=FOLLOW_UP_EXAMPLES,
    later=(
        ("What's the weather in Oslo?", None, "tool"),
        ("Name four fruits.", None, "answer"),
        ("What's the stock price of ACME right now?", None, "tool"),
        ("How do I delete a folder in Linux?", None, "answer"),
        ("How do I parse JSON in JavaScript?", None, "answer"),
        ("Send the report to Dana by email.", None, "tool"),
        ("What is a CSV file?", None, "answer"),
        ("What does the grep command do?", None, "answer"),
        ("List four animals.", None, "answer"),
        (
            "What's the weather in Oslo?",
            'get_weather(city="Oslo") returned: 4°C, light rain',
            "answer",
        ),
        (
            "Look up Dana's email address, then send her the report.",
            'find_contact(name="Dana") returned: dana@example.com',
            "tool",
        ),
        (
            "Look up Dana's email address, then send her the report.",
            'find_contact(name="Dana") returned: dana@example.com; '
            'send_email(to="dana@example.com", subject="Report") returned: sent',
            "answer",
        ),
        (
            "Find my note about the dentist, then tell me the time in it.",
            'search_notes(query="dentist") returned: note 12: Dentist',
            "tool",
        ),
        (
            "Find my note about the dentist, then tell me the time in it.",
            'search_notes(query="dentist") returned: note 12: Dentist; '
            "read_note(id=12) returned: Dentist on Friday at 9:30",
            "answer",
        ),
        (
            "Add a note saying: call the bank.",
            'add_note(text="call the bank") returned: added note 13',
            "answer",
        ),
        (
            "Add a note saying: call the bank, then one saying: pay rent.",
            'add_note(text="call the bank") returned: added note 13',
            "tool",
        ),
        ("What does the word in note 4 mean?", "read_note(id=4) returned: ephemeral", "answer"),
        (
            "What's the stock price of the company in note 7?",
            "read_note(id=7) returned: ACME",
            "tool",
        ),
        (
            "What's the weather where the meeting in note 9 is?",
            "read_note(id=9) returned: Meeting in Lisbon on Monday",
            "tool",
        ),
    ),
)
