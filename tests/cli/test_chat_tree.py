"""``/tree`` and ``/branch N`` in the chat, typed in a pseudo-terminal against the scripted server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from steadyloop.cli.tree import HERE, tree_lines
from steadyloop.context.branches import BRANCH_SUMMARY_LEAD, BranchFiles, Entry
from steadyloop.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from steadyloop.testing import text_chunks

PROMPT = "› "


def test_branching_back_summarises_the_branch_left_and_the_tree_shows_both(
    scripted: Callable[[Any], str], terminal: Callable[..., Any]
) -> None:
    url = scripted(
        [
            {"type": "stream", "text": "First answer."},
            {"type": "stream", "text": "Second answer."},
            {"type": "stream", "text": "They asked a second question."},
            {"type": "stream", "text": "Third answer."},
        ]
    )
    term = terminal("chat", "--no-tools", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("/tree\n")
    term.expect("no entries yet")
    term.send("first question\n")
    term.expect("First answer.")
    term.expect(PROMPT)
    term.send("second question\n")
    term.expect("Second answer.")
    term.expect(PROMPT)
    term.send("/tree\n")
    term.expect(r"1 user: first question\r?\n2 assistant: First answer\.\r?\n3 user: second question\r?\n")
    term.expect(r"4 assistant: Second answer\." + HERE)
    term.send("/branch 2 keep it short\n")
    term.expect(r"continuing from entry 2; the 2 entries left behind are summarised in entry 5")
    term.expect(PROMPT)
    term.send("third question\n")
    term.expect("Third answer.")
    term.expect(PROMPT)
    term.send("/tree\n")
    term.expect(
        r"2 assistant: First answer\.\r?\n├─ 3 user: second question\r?\n│  4 assistant: Second answer\."
    )
    term.expect(r"└─ 5 summary: They asked a second question\.\r?\n   6 user: third question\r?\n")
    term.expect(r"   7 assistant: Third answer\." + HERE)
    term.send("/branch x\n")
    term.expect("usage: /branch N")
    term.send("/branch 99\n")
    term.expect("error: .*no entry 99")
    term.send("/exit\n")
    assert term.wait() == 0


def test_ctrl_c_cancels_the_branch_summary_and_stays(
    scripted: Callable[[Any], str], terminal: Callable[..., Any]
) -> None:
    stalled = {"type": "stream", "chunks": text_chunks("never"), "stall_after": 0, "stall_seconds": None}
    url = scripted(
        [
            {"type": "stream", "text": "First answer."},
            {"type": "stream", "text": "Second answer."},
            stalled,
            {"type": "stream", "text": "Still on the second branch."},
        ]
    )
    term = terminal("chat", "--no-tools", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("first question\n")
    term.expect("First answer.")
    term.expect(PROMPT)
    term.send("second question\n")
    term.expect("Second answer.")
    term.expect(PROMPT)
    term.send("/branch 1\n")
    term.expect("summarising what is left behind")
    term.send("\x03")
    term.expect(r"\(branch summary cancelled; still at entry 4\)")
    term.expect(PROMPT)
    term.send("/branch 2 --no-summary\n")
    term.expect("continuing from entry 2")
    term.send("/tree\n")
    term.expect(r"2 assistant: First answer\." + HERE)
    term.send("/exit\n")
    assert term.wait() == 0


def test_tree_lines_keep_chains_flat_and_fork_where_an_entry_has_children() -> None:
    call = ToolCall("c1", "read_file", {"path": "a.txt"})
    entries = [
        Entry("1", None, UserMessage(content="Read   a.txt\nplease")),
        Entry("2", "1", AssistantMessage(content="", tool_calls=(call,))),
        Entry("3", "2", ToolResultMessage(call_id="c1", content="alpha " * 30, name="read_file")),
        Entry("4", "3", AssistantMessage(content="It says alpha.")),
        Entry(
            "5", "1", UserMessage(content=f"{BRANCH_SUMMARY_LEAD}\n\nRead a.txt."), BranchFiles(("a.txt",))
        ),
        Entry("6", "5", UserMessage(content="Other question")),
        Entry("7", "9", AssistantMessage(content="parent trimmed")),
    ]
    assert tree_lines(entries, "6", width=20) == [
        "1 user: Read a.txt please",
        "├─ 2 assistant: → read_file()",
        "│  3 tool read_file: alpha alpha alpha a…",
        "│  4 assistant: It says alpha.",
        "└─ 5 summary: Read a.txt.",
        "   6 user: Other question" + HERE,
        "7 assistant: parent trimmed",
    ]
