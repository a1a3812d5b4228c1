"""A branch written as an account a summariser can read: calls and results as lines, cut-off answers
marked, images named, and the request to summarise last."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.context.branch_text import RESULT_CHARS, branch_request, message_lines
from steadyloop.messages import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

LAST = "Write the account of this branch now: what was attempted, and what was found or decided."


def test_a_tool_exchange_reads_as_what_was_called_and_what_came_back() -> None:
    call = ToolCall("c1", "list_dir", {"path": "docs", "hidden": False})
    lines = [
        *message_lines(AssistantMessage(content="Let me look.", tool_calls=(call,))),
        *message_lines(ToolResultMessage(call_id="c1", name="list_dir", content="- a.md\n- b.md\n")),
    ]
    assert lines == [
        "Assistant: Let me look.",
        'Assistant called list_dir(path="docs", hidden=false).',
        "list_dir returned: - a.md - b.md",
    ]


def test_results_that_failed_or_never_ran_say_so() -> None:
    def line(**fields: object) -> str:
        return message_lines(ToolResultMessage(call_id="c9", **fields))[0]  # type: ignore[arg-type]

    assert line(name="read_file", content="no such file", is_error=True) == "read_file failed: no such file"
    assert line(name="rm", content="refused", is_error=True, disposition="blocked") == (
        "rm was not run (it was refused): refused"
    )
    assert line(name="sleep", content="", disposition="aborted") == "sleep was stopped before it finished."
    assert line(content="ok") == "the call c9 returned: ok"
    assert line(name="touch", content="") == "touch returned nothing."


def test_an_answer_cut_off_is_marked_and_one_cut_before_any_text_too() -> None:
    assert message_lines(AssistantMessage(content="The sea is"), cut_off=True) == [
        "Assistant (cut off before it finished): The sea is"
    ]
    assert message_lines(AssistantMessage(), cut_off=True) == [
        "Assistant (cut off before it wrote anything)."
    ]
    assert message_lines(AssistantMessage(content="Done.")) == ["Assistant: Done."]


def test_images_are_named_where_they_were() -> None:
    shot = ImagePart.from_bytes(b"\x89PNG", "image/png")
    linked = ImagePart(url="https://example.com/cat.jpg")
    message = UserMessage(content=(TextPart(text="What is this?"), shot, linked))
    assert message_lines(message) == [
        "User: What is this? [an image (image/png)] [an image: https://example.com/cat.jpg]"
    ]
    result = ToolResultMessage(call_id="c1", name="screenshot", content=(shot,))
    assert message_lines(result) == ["screenshot returned: [an image (image/png)]"]


def test_a_long_result_is_cut_and_says_how_much_is_left() -> None:
    line = message_lines(ToolResultMessage(call_id="c1", name="cat", content="word " * 200))[
        0
    ]  # 999 once trimmed
    assert line.startswith("cat returned: word word")
    assert line.endswith("(699 more characters)")


def test_the_request_ends_with_what_to_write_after_the_branch() -> None:
    messages = [
        UserMessage(content="What is in this folder?"),
        AssistantMessage(tool_calls=(ToolCall("c1", "list_dir", {"path": "."}),)),
        ToolResultMessage(call_id="c1", name="list_dir", content="- notes.txt"),
        AssistantMessage(content="It holds notes.txt."),
        UserMessage(content="Write a poem\nabout the sea."),
        AssistantMessage(content="The sea"),
    ]
    text = branch_request(messages, cut_off={5}, instructions="  Keep the file names. ")
    assert text.splitlines() == [
        "Here is a branch of a conversation that is being left for another, oldest first.",
        "",
        "<branch>",
        "User: What is in this folder?",
        'Assistant called list_dir(path=".").',
        "list_dir returned: - notes.txt",
        "Assistant: It holds notes.txt.",
        "User: Write a poem",
        "  about the sea.",
        "Assistant (cut off before it finished): The sea",
        "</branch>",
        "",
        "The user asks the account to focus on this: Keep the file names.",
        LAST,
    ]
    assert "focus" not in branch_request(messages, instructions="  ")


@given(
    st.lists(
        st.one_of(
            st.builds(UserMessage, content=st.text(max_size=200)),
            st.builds(AssistantMessage, content=st.text(max_size=200)),
            st.builds(
                ToolResultMessage,
                call_id=st.just("c1"),
                name=st.sampled_from(["list_dir", None]),
                content=st.text(max_size=2_000),
                is_error=st.booleans(),
            ),
        ),
        max_size=8,
    ),
    st.sets(st.integers(min_value=0, max_value=8)),
)
def test_every_message_is_an_entry_of_the_account_and_the_request_comes_last(
    messages: list[UserMessage | AssistantMessage | ToolResultMessage], cut_off: set[int]
) -> None:
    text = branch_request(messages, cut_off=cut_off)
    assert text.endswith(f"</branch>\n\n{LAST}")
    lines = text.splitlines()
    body = lines[3 : lines.index("</branch>")]
    labels = ("User: ", "Assistant", "list_dir ", "the call c1 ", "  ")
    assert all(line.startswith(labels) for line in body)
    entries = [line for line in body if not line.startswith("  ")]
    assert len(entries) == len(messages)  # one entry each: none has calls, so none needs more
    for line in entries:
        if line.startswith(("list_dir ", "the call c1 ")):  # a result is one line, however long it was
            assert len(line) <= len("the call c1 returned: ") + RESULT_CHARS + len(
                " … (2,000 more characters)"
            )
