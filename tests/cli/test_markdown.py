"""The chat's streamed markdown: what a terminal shows once every rewrite has landed, under every chunking."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.cli.markdown import MarkdownStream
from steadyloop.cli.render import Style, TextRenderer
from steadyloop.events import AgentEnd, Event, MessageUpdate, ToolExecutionStart

REWRITE = "\r\x1b[2K"
WIDE = 10_000
_SGR = re.compile(r"\x1b\[[0-9;]*m")


def stream(on: bool = True, width: int = WIDE) -> MarkdownStream:
    return MarkdownStream(Style(io.StringIO(), force=on), width)


def render(pieces: Sequence[str], *, on: bool = True, width: int = WIDE) -> str:
    md = stream(on, width)
    return "".join(md.feed(piece) for piece in pieces) + md.finish()


def screen(output: str) -> list[str]:
    """The rows a terminal ends up showing: a rewrite erases the row it is on, colours are dropped."""
    rows = [""]
    for piece in re.split(r"(\r\x1b\[2K|\n)", output):
        if piece == "\n":
            rows.append("")
        elif piece == REWRITE:
            rows[-1] = ""
        else:
            rows[-1] += _SGR.sub("", piece)
    return rows


def shown(text: str) -> list[str]:
    """``text`` streamed one character at a time, as the screen ends up."""
    return screen(render(list(text)))


def chunkings(text: str) -> st.SearchStrategy[list[str]]:
    cuts = st.lists(st.integers(0, len(text)), max_size=12).map(sorted)
    return cuts.map(lambda at: [text[a:b] for a, b in zip([0, *at], [*at, len(text)], strict=True)])


# -- what each construct looks like ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("# Title\n", ["Title", ""]),
        ("## Sub *section* ##\n", ["Sub section", ""]),
        ("### Third\n", ["Third", ""]),
        ("#hashtag\n", ["#hashtag", ""]),
        ("Some **bold**, *italic*, _italic_ and `code`.\n", ["Some bold, italic, italic and code.", ""]),
        ("**bold with *italic* inside**\n", ["bold with italic inside", ""]),
        ("- one\n* two\n+ three\n", ["• one", "• two", "• three", ""]),
        ("  - nested **b**\n", ["  • nested b", ""]),
        ("1. first\n2) second\n10. tenth\n", ["1. first", "2) second", "10. tenth", ""]),
        ("> quoted *words*\n", ["▎ quoted words", ""]),
        ("> > deeper\n", ["▎ ▎ deeper", ""]),
        ("See [the docs](https://x.dev/a_(b)).\n", ["See the docs (https://x.dev/a_(b)).", ""]),
        (
            "```python\ndef f(x):\n    return x * 2\n```\nafter\n",
            ["  def f(x):", "      return x * 2", "after", ""],
        ),
        ("~~~\n```\nstill code\n~~~\n", ["  ```", "  still code", ""]),
        ("````\n```\n````\n", ["  ```", ""]),
        ("```\n**not bold** in code\n```\n", ["  **not bold** in code", ""]),
        ("---\n", ["─" * 40, ""]),
        ("snake_case_name and 2*3*4 and a * b * c\n", ["snake_case_name and 2*3*4 and a * b * c", ""]),
        ("\\*literal\\* and \\_too\\_\n", ["*literal* and _too_", ""]),
        ("``code with ` inside`` and `` ` ``\n", ["code with ` inside and `", ""]),
        ("**unclosed and `unclosed\n", ["**unclosed and `unclosed", ""]),
        ("no newline at the end", ["no newline at the end"]),
        ("crlf **line**\r\n", ["crlf line", ""]),
    ],
)
def test_rendered_rows(text: str, rows: list[str]) -> None:
    assert shown(text) == rows
    assert screen(render([text])) == rows


def test_styles_are_ansi_codes() -> None:
    out = render(["# Head `x`\n", "a **b** *c* `d` [e](f)\n", "> q\n", "```\ncode\n```\n"])
    assert "\x1b[1mHead \x1b[0m\x1b[1;36mx\x1b[0m\n" in out
    assert "a \x1b[1mb\x1b[0m \x1b[3mc\x1b[0m \x1b[36md\x1b[0m e\x1b[2m (f)\x1b[0m\n" in out
    assert "\x1b[2m▎ \x1b[0m\x1b[2mq\x1b[0m\n" in out
    assert "  \x1b[2mcode\x1b[0m\n" in out


# -- streaming: raw now, styled when the line completes ----------------------------------------------


def test_a_partial_line_is_written_raw_then_rewritten_styled() -> None:
    # The rest of a shown line is not written raw first: the rewrite replaces the row anyway.
    md = stream()
    assert md.feed("Hello **wo") == "Hello **wo"
    assert md.line_open
    assert md.feed("rld** and") == "rld** and"
    assert md.feed(" more\nNext") == f"{REWRITE}Hello \x1b[1mworld\x1b[0m and more\nNext"
    assert md.finish() == f"{REWRITE}Next"
    assert md.finish() == ""


def test_a_whole_line_is_written_styled_at_once() -> None:
    md = stream()
    assert md.feed("a **b**\n") == "a \x1b[1mb\x1b[0m\n"
    assert not md.line_open


def test_a_raw_line_that_wrapped_is_left_raw() -> None:
    md = stream(width=10)
    assert md.feed("a long **line") == "a long **line"
    assert md.feed("**\n") == "**\n"
    assert md.feed("short **b") == "short **b"
    assert md.feed("**\n") == f"{REWRITE}short \x1b[1mb\x1b[0m\n"
    # What arrives whole is written fresh, so it may wrap as it likes.
    assert md.feed("a much longer **line** than ten\n") == "a much longer \x1b[1mline\x1b[0m than ten\n"
    assert md.feed("again too long") == "again too long"
    assert md.finish() == ""


def test_a_raw_line_filling_the_row_exactly_counts_as_wrapped() -> None:
    md = stream(width=5)
    md.feed("**abc")
    assert md.feed("\n") == "\n"
    md.feed("**ab")
    assert md.feed("**\n") == f"{REWRITE}\x1b[1mab\x1b[0m\n"


def test_wide_characters_and_escapes_count_against_the_width() -> None:
    md = stream(width=7)
    md.feed("日本語*")  # six cells and one
    assert md.feed("\n") == "\n"
    md.feed("a\x1b[31m")  # where this leaves the cursor is anyone's guess
    assert md.feed("\n") == "\n"
    md.feed("\tx")  # a tab to column 8
    assert md.feed("\n") == "\n"


def test_fence_lines_are_dropped() -> None:
    md = stream()
    assert md.feed("```py") == "```py"
    assert md.feed("thon\n") == REWRITE
    assert not md.line_open  # the erased row is empty
    assert md.feed("x = 1\n```\n") == "  \x1b[2mx = 1\x1b[0m\n"
    assert md.feed("plain\n") == "plain\n"


def test_finish_forgets_an_unclosed_code_block() -> None:
    md = stream()
    md.feed("```\ncode\n")
    md.finish()
    assert md.feed("**bold**\n") == "\x1b[1mbold\x1b[0m\n"


def test_styling_off_writes_the_input_unchanged() -> None:
    md = stream(on=False)
    assert md.feed("# Title\n**b") == "# Title\n**b"
    assert md.line_open
    assert md.feed("**\n```\n") == "**\n```\n"
    assert not md.line_open
    assert md.finish() == ""


def test_style_follows_the_terminal_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert render(["**b**\n"], on=Style(Tty()).enabled) == "\x1b[1mb\x1b[0m\n"
    assert render(["**b**\n"], on=Style(io.StringIO()).enabled) == "**b**\n"
    monkeypatch.setenv("NO_COLOR", "1")
    assert render(["**b**\n"], on=Style(Tty()).enabled) == "**b**\n"


# -- properties ----------------------------------------------------------------------------------------

# Pieces rather than characters, so fences, strong markers and blank lines turn up often.
MARKDOWNISH = st.lists(
    st.sampled_from([*"ab1 _*`~#>-+.)[](\\/:\n\t", "é", "日", "•", "```", "**", "\n\n", "- ", "1. "]),
    max_size=40,
).map("".join)


@given(st.data(), st.text(max_size=200))
def test_styling_off_the_output_is_the_input_under_any_chunking(data: st.DataObject, text: str) -> None:
    pieces = data.draw(chunkings(text))
    assert render(pieces, on=False) == text


@given(st.data(), MARKDOWNISH)
def test_styling_on_the_screen_is_the_same_under_any_chunking(data: st.DataObject, text: str) -> None:
    pieces = data.draw(chunkings(text))
    assert screen(render(pieces)) == screen(render([text]))


@given(st.data(), MARKDOWNISH.filter(lambda text: "`" not in text and "~" not in text))
def test_styling_keeps_every_letter_and_digit(data: st.DataObject, text: str) -> None:
    # Only fence lines (and their info strings) are dropped, so without fences no word is lost.
    pieces = data.draw(chunkings(text))
    letters = [c for c in "".join(screen(render(pieces))) if c.isalnum()]
    assert letters == [c for c in text if c.isalnum()]


@given(st.data(), MARKDOWNISH.filter(lambda text: "日" not in text and "\t" not in text), st.integers(2, 12))
def test_a_rewrite_only_follows_raw_text_that_stayed_on_its_row(
    data: st.DataObject, text: str, width: int
) -> None:
    pieces = data.draw(chunkings(text))
    for row in render(pieces, width=width).split("\n"):
        for before in row.split(REWRITE)[:-1]:
            assert not _SGR.search(before)  # raw text, never a styled line, is what gets rewritten
            assert len(before) < width


# -- in the chat's renderer ----------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_renderer_styles_the_answer_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    events: list[Event] = [
        MessageUpdate(kind="text", delta="\nA **b"),
        MessageUpdate(kind="text", delta="** c\n```\n"),
        ToolExecutionStart(call_id="1", name="t", arguments={}),
        MessageUpdate(kind="text", delta="# Done"),
        AgentEnd(outcome="completed"),
    ]
    chat, plain = _Terminal(), _Terminal()
    chat_renderer = TextRenderer(chat, chat, show_thinking=False, markdown=True)
    plain_renderer = TextRenderer(plain, plain, show_thinking=False)
    for event in events:
        chat_renderer(event)
        plain_renderer(event)
    assert screen(chat.getvalue()) == ["A b c", "⚙ t() …", "Done", ""]
    assert _SGR.sub("", plain.getvalue()) == "A **b** c\n```\n⚙ t() …\n# Done\n"


def test_long_lines_stay_cheap() -> None:
    unclosed = "_a *b " * 5000 + "\n"
    assert screen(render([unclosed])) == [unclosed[:-1], ""]
    md = stream()
    assert "".join(md.feed("x") for _ in range(100_000)) == "x" * 100_000
    assert md.finish() == ""  # long past the width: left raw
