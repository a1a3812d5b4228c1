"""Holding back answer text that may be a call: nothing of a call is shown, nothing else is lost."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.tools.holdback import CALL_MARKERS, CallHoldback
from steadyloop.tools.recovery import recover_tool_calls

CALL = {"name": "list_dir", "arguments": {"path": "."}}


def _shown(chunks: list[str]) -> tuple[str, CallHoldback]:
    hold = CallHoldback()
    return "".join(hold.feed(c) for c in chunks), hold


def _chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


CALL_REPLIES = [
    json.dumps(CALL),
    "\n" + json.dumps(CALL),
    f"```json\n{json.dumps(CALL)}\n```",
    f"Action:\n```json\n[{json.dumps(CALL)}]\n```",
    f"I will look for it first.\nAction: ```json\n[{json.dumps(CALL)}]\n```",
    f"<tool_call>{json.dumps(CALL)}</tool_call>",
    f"Let me check. <tool_call>\n{json.dumps(CALL)}\n</tool_call>",
    f"[TOOL_CALLS][{json.dumps(CALL)}]",
    '[list_dir(path=".")]',
    f"[{json.dumps(CALL)}]",
    f"<|python_tag|>{json.dumps(CALL)}",
    f"```\n{json.dumps(CALL)}\n```",
    f"Sure. <json>{json.dumps(CALL)}</json>",
    f"Sure. <|message_sep|>function call<|role_sep|>\n{json.dumps(CALL)}",
    'Sure. <|start|>assistant to=functions.list_dir<|channel|>commentary <|constrain|>json<|message|>{"path": "."}'
    "<|call|>",
]


@pytest.mark.parametrize("reply", CALL_REPLIES)
def test_no_part_of_a_written_call_is_shown_however_it_streams(reply: str) -> None:
    for chunks in ([reply], list(reply), _chunked(reply, [3, 9, 17, 40])):
        shown, hold = _shown(chunks)
        assert "list_dir" not in shown, (chunks, shown)
        found = recover_tool_calls(reply, ["list_dir"])
        assert found.calls, reply
        rest = hold.finish(found.content, called=True)
        assert "list_dir" not in rest
        assert (shown + rest).strip() == found.content.strip()


@pytest.mark.parametrize(
    "reply",
    [
        "The folder holds notes.txt and docs/.",
        "Use `ls` to list files, or ``ls -a`` for hidden ones.",
        "```python\nimport os\nprint(os.listdir('.'))\n```\nThat lists the folder.",
        # A fenced call after words is an example (recovery does not take it), so it streams.
        f"The call would look like this:\n```json\n{json.dumps(CALL)}\n```",
        "[1] The first footnote.",
        "- red\n- blue\n- green",
        "A function call is how a program asks for work; Apples are red.",
        "f(x) = 2x, and for all n, f(n) > n.",
    ],
)
def test_prose_and_code_stream_without_waiting_for_the_end(reply: str) -> None:
    shown, hold = _shown(list(reply))
    assert shown == reply
    assert not hold.holding
    assert hold.finish(reply, called=False) == ""


def test_a_held_reply_that_was_no_call_comes_back_whole() -> None:
    reply = '{"colour": "red"} is the JSON you asked for'
    shown, hold = _shown(list(reply))
    assert shown == "" and hold.holding
    assert hold.finish(reply, called=False) == reply


def test_text_after_the_call_is_shown_once_decided() -> None:
    reply = f"Looking.\n<tool_call>{json.dumps(CALL)}</tool_call>"
    shown, hold = _shown([reply])
    assert shown == "Looking.\n"
    assert hold.finish("Looking.\n\nDone.", called=True) == "\n\nDone."


def test_a_rewritten_content_shows_nothing_more() -> None:
    shown, hold = _shown(["Hello ", "<tool_call>{}"])
    assert shown == "Hello "
    assert hold.finish("something else", called=True) == ""


def test_every_marker_is_held_wherever_it_appears() -> None:
    for marker in CALL_MARKERS:
        reply = f"Sure. {marker}" + json.dumps(CALL)
        for chunks in ([reply], list(reply)):
            shown, hold = _shown(chunks)
            assert shown == "Sure. ", (marker, shown)
            assert hold.holding


@given(st.text(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_nothing_is_lost_and_chunking_changes_nothing(text: str, cuts: list[int]) -> None:
    whole, whole_hold = _shown([text])
    parts, parts_hold = _shown(_chunked(text, cuts))
    assert whole == parts
    assert whole_hold.holding == parts_hold.holding
    assert whole + whole_hold.finish() == text
    assert parts + parts_hold.finish() == text


@given(
    st.lists(
        st.sampled_from(
            ["`", "```", "json\n", "{", "[", "<", "<tool", "_call>", "f", "Action", ":", " ", "\n", "a("]
        ),
        max_size=40,
    ),
    st.lists(st.integers(min_value=0, max_value=60), max_size=8),
)
def test_adversarial_pieces_keep_the_same_guarantees(pieces: list[str], cuts: list[int]) -> None:
    text = "".join(pieces)
    whole, hold = _shown([text])
    parts, _ = _shown(_chunked(text, cuts))
    assert whole == parts
    assert whole + hold.finish() == text
    assert hold.finish() == ""  # a second finish has nothing left


@pytest.mark.parametrize("unit", ["f", "<", "`", "[", "A", "` ", "<|", "```\n", " ["])
def test_huge_repetitive_input_is_read_in_one_pass(unit: str) -> None:
    text = unit * 50_000
    whole, hold = _shown([text])
    assert whole + hold.finish() == text
    step, hold = _shown([unit] * 20_000)
    assert step + hold.finish() == unit * 20_000


_words = st.text(st.characters(blacklist_characters="`<[|", blacklist_categories=["Cs"]), max_size=20)
_SPELLINGS = [
    json.dumps(CALL),
    f"[{json.dumps(CALL)}]",
    f"```json\n{json.dumps(CALL)}\n```",
    f"```\n[{json.dumps(CALL)}]\n```",
    f"Action: ```json\n[{json.dumps(CALL)}]\n```",
    f"<tool_call>{json.dumps(CALL)}</tool_call>",
    f"[TOOL_CALLS][{json.dumps(CALL)}]",
    '[list_dir(path=".")]',
]


@given(
    _words, st.sampled_from(_SPELLINGS), _words, st.lists(st.integers(min_value=0, max_value=120), max_size=6)
)
def test_what_recovery_takes_is_held_and_what_it_leaves_is_shown(
    before: str, spelling: str, after: str, cuts: list[int]
) -> None:
    reply = before + spelling + after
    found = recover_tool_calls(reply, ["list_dir"])
    shown, hold = _shown(_chunked(reply, cuts))
    if not found.calls:
        assert shown + hold.finish(reply, called=False) == reply
        return
    assert "list_dir" not in shown, (reply, shown)
    rest = hold.finish(found.content, called=True)
    assert "list_dir" not in rest
    # Whitespace where the call was may come out doubled; every other character of the content is shown once.
    assert (shown + rest).split() == found.content.split()
