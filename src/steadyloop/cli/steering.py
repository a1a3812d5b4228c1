"""The worked examples the tool gate shows on the command line: its own file tools (``list_dir``,
``read_file``, ``search_text``, ``write_file``), called as the bundled small models call them.

The routing and the gate are ``steadyloop.steering``'s; what a host adds is examples that name its tools.
These were tuned on the bundled Qwen2.5-Coder 1.5B and 0.5B models against ``bench/small_model_tools.py``
and ``bench/main_job.py``: the comments say what each was added for (``docs/steering.md`` has the rest).
"""

from __future__ import annotations

from ..steering import FIRST_EXAMPLES, FOLLOW_UP_EXAMPLES, GateExamples, ToolRouting

__all__ = ["FILE_TOOL_EXAMPLES", "FILE_TOOL_ROUTING"]

#: The gate's examples with the command's file tools: before any tool ran, the generic requests (they
#: name no tool); after tool results, calls of the file tools and what they returned.
FILE_TOOL_EXAMPLES = GateExamples(
    first=FIRST_EXAMPLES,
    # A follow-up ("how many is that?" after a listing) is shown with the exchange before it; the generic
    # examples name no tool, so the command's are the library's.
    follow_ups=FOLLOW_UP_EXAMPLES,
    later=(
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
        (
            "What version does setup.py declare?",
            "read_file(path=\"setup.py\") returned: version='2.1'",
            "answer",
        ),
        (
            "Read name.txt, then greet the person named in it by email.",
            'read_file(path="name.txt") returned: Dana',
            "tool",
        ),
        (
            "Which files are in src?",
            'list_dir(path="src") returned: - main.py (410 bytes, 12 lines) - util.py (96 bytes, 4 lines)',
            "answer",
        ),
        # Told what a step was done on ("list_dir(path=...)"), not only what it returned, the 1.5B model said
        # answer once a folder it was asked to show was listed; without the call's arguments it asked for more
        # tools after "Show me what the docs folder contains." was listed. With them, a listing that is a
        # first step needs its opposite here: without it, "List the recipes folder, then read the file in it"
        # answered after the listing.
        (
            "List the src folder, then read the file in it that starts the program.",
            'list_dir(path="src") returned: - main.py (410 bytes, 12 lines) - util.py (96 bytes, 4 lines)',
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
    ),
)

#: Tool routing as the command asks it of the bundled models: the kinds gate with the examples above and one
#: call a step, as bench/small_model_tools.py and bench/main_job.py measured it (the which-tool gate and
#: several calls a step are the library's default, measured on BFCL: docs/steering.md). Unasked choices stay:
#: the paths the file tools are held to are what the command listed, and the model picking one the request
#: did not name is its reading of the request.
FILE_TOOL_ROUTING = ToolRouting(
    question="kind", examples=FILE_TOOL_EXAMPLES, several=False, drop_unasked=False
)
