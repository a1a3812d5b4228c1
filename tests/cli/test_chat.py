"""``steadyloop chat`` in a pseudo-terminal: typing, Ctrl-C mid-stream, slash commands, resuming."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from steadyloop.testing import text_chunks

PROMPT = "› "


def test_ctrl_c_mid_stream_cancels_the_turn_and_keeps_the_chat(
    scripted: Callable[[Any], str], terminal: Callable[..., Any]
) -> None:
    stalled = {
        "type": "stream",
        "chunks": text_chunks("Partial answer"),
        "stall_after": 2,
        "stall_seconds": None,
    }
    url = scripted([stalled, {"type": "stream", "text": "Still here."}])
    term = terminal("chat", "--no-tools", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("tell me a long story\n")
    term.expect("Partial")
    term.send("\x03")
    term.expect(r"\(cancelled\)")
    term.expect(PROMPT)
    term.send("are you there?\n")
    term.expect("Still here.")
    term.expect(PROMPT)
    term.send("/exit\n")
    assert term.wait() == 0


def test_slash_commands_and_resume(scripted: Callable[[Any], str], terminal: Callable[..., Any]) -> None:
    url = scripted(
        [{"type": "stream", "text": "First answer."}, {"type": "stream", "text": "Second answer."}]
    )
    term = terminal("chat", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("first question\n")
    term.expect("First answer.")
    term.expect(PROMPT)
    term.send("/context\n")
    term.expect(r"context: ~[\d,]+ tokens")
    term.expect(r"tools\s+[\d,]+")
    term.send("/cost\n")
    term.expect(r"this session: 1 prompts, 1 requests")
    term.send("/sessions\n")
    term.expect(r"\* ses_\w+ .* first question")
    term.send("/model other\n")
    term.expect("model: other")
    term.expect(PROMPT)
    term.send("\x04")  # Ctrl-D at the prompt leaves
    assert term.wait() == 0

    again = terminal("chat", "--continue", "--base-url", url, "-m", "m")
    again.expect(r"resumed session ses_\w+ \(2 messages\)")
    again.send("second question\n")
    again.expect("Second answer.")
    again.expect(PROMPT)
    again.send("half-typed")
    # The echo proves the prompt has taken the typed text; a Ctrl-C sent with it could reach the terminal
    # first, which throws away input not yet read, and the test would be racing the prompt, not testing it.
    again.expect("half-typed")
    again.send("\x03")  # Ctrl-C at the prompt clears the line and stays
    again.expect(r"line cleared")
    again.expect(PROMPT)
    again.send("\x03")  # a second one in a row leaves
    assert again.wait() == 0


def test_chat_shows_thinking_in_a_gutter_and_tool_lines(
    scripted: Callable[[Any], str], terminal: Callable[..., Any]
) -> None:
    url = scripted(
        [
            {
                "type": "stream",
                "reasoning": "Let me look.",
                "tool_calls": [{"name": "list_dir", "arguments": {}}],
            },
            {"type": "stream", "text": "The folder is empty."},
        ]
    )
    term = terminal("chat", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("what is here?\n")
    term.expect("│ Let me look.")
    term.expect(r"⚙ list_dir\(\) … ✓ \(empty folder\)")
    term.expect("The folder is empty.")
    term.expect(PROMPT)
    term.send("/exit\n")
    assert term.wait() == 0


def test_chat_renders_the_answer_as_markdown_on_a_colour_terminal(
    scripted: Callable[[Any], str], terminal: Callable[..., Any], env: dict[str, str]
) -> None:
    del env["NO_COLOR"]
    pieces = ["# Plan\n", "Use **bo", "ld** and `code`.\n", "```sh\n", "ls -l\n", "```\n", "- done"]
    # Apart in time, as a model streams them: text that arrives in one read is told at once, and this
    # test is about a line drawn before it is complete and redrawn when it is.
    url = scripted([{"type": "stream", "chunks": text_chunks(pieces), "delay": 0.05}])
    term = terminal("chat", "--no-tools", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("plan it\n")
    # Colour codes and erases are dropped here: what is left of a rewrite is the raw part a carriage return
    # took back. A line that arrived whole is written styled at once; the fence lines are gone.
    term.expect(r"\nPlan\nUse \*\*bo\rUse bold and code\.\n  ls -l\n- done\r• done\n")
    term.expect(PROMPT)
    term.send("/exit\n")
    assert term.wait() == 0


def test_chat_without_colour_shows_the_answer_as_written(
    scripted: Callable[[Any], str], terminal: Callable[..., Any]
) -> None:
    url = scripted([{"type": "stream", "chunks": text_chunks(["# Plan\n", "Use **bo", "ld**.\n", "- done"])}])
    term = terminal("chat", "--no-tools", "--base-url", url, "-m", "m")
    term.expect(PROMPT)
    term.send("plan it\n")
    term.expect(r"# Plan\nUse \*\*bold\*\*\.\n- done\n")
    term.expect(PROMPT)
    term.send("/exit\n")
    assert term.wait() == 0
