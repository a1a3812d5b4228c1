"""A how-to answer that reads on into the next section of a document a tool returned: stopped there."""

from __future__ import annotations

import asyncio
import random

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, Notice
from steadyloop.loop import run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.next_section import LEAST, SectionWatch, before_next_section, headings
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint

from ..edges._edges import LINEAR_BOUND, growth
from ._routed import text
from .test_routing import ROUTED

README = """# sample

A sample project that shows how a README reads.

On a fresh machine:

```bash
bash scripts/demo "What is in this folder?"
bash scripts/test
```

`scripts/demo` installs the package into `.venv`, then asks. The first run downloads a small model into
the cache and serves it; later runs start in a few seconds.

## Use it

```python
import sample
sample.ask("hello")
```

## Running the tests

`bash scripts/test` runs them all, a real server included.

Design
======

Values at the bottom, shells on top.
"""
RESULTS = [f"read_file returned: {README}"]
HOW = "How do I run the tests of this project?"
OPENING = (
    "To run the tests of this project, use the following commands:\n\n```bash\n"
    'bash scripts/demo "What is in this folder?"\nbash scripts/test\n```\n\n'
    "`scripts/demo` installs the package into `.venv`, then asks. The first run downloads a small model "
    "into\nthe cache and serves it; later runs start in a few seconds."
)
COPIED_ON = '\n\n## Use it\n\n```python\nimport sample\nsample.ask("hello")\n```\n\n## Running the tests\n'


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return README


def test_the_headings_of_a_document_are_its_markdown_and_underlined_titles() -> None:
    assert headings([README]) == {"sample", "use it", "running the tests", "design"}
    assert headings(["a\n---\nb", "--- \n===\n#nospace\n####### seven\n```\n# in code\n```"]) == {"a"}


def test_a_how_to_answer_is_cut_where_it_copies_a_heading_the_request_does_not_name() -> None:
    assert before_next_section(OPENING + COPIED_ON, HOW, RESULTS) == OPENING
    assert before_next_section(OPENING + "\n\n**Use it**\n", HOW, RESULTS) == OPENING


def test_a_heading_the_request_names_or_one_in_the_opening_is_kept() -> None:
    named = OPENING + "\n\n## Running the tests\n\n`bash scripts/test` runs them all."
    assert before_next_section(named, HOW, RESULTS) == named  # "run", "tests": the request's words
    early = "## Use it\n\n" + OPENING
    assert early.index(OPENING) < LEAST and before_next_section(early, HOW, RESULTS) == early
    unknown = OPENING + "\n\n## Something else\n"
    assert before_next_section(unknown, HOW, RESULTS) == unknown  # no tool returned that heading
    coded = OPENING + "\n\n```bash\n# Use it\n```\n"
    assert before_next_section(coded, HOW, RESULTS) == coded  # in a code block: a comment


def test_the_watch_finds_the_heading_however_the_text_is_cut() -> None:
    answer = OPENING + COPIED_ON
    for size in (1, 2, 7, 64, len(answer)):
        watch = SectionWatch(HOW, RESULTS)
        said = None
        for start in range(0, len(answer), size):
            said = watch.feed(answer[start : start + size]) or said
        assert watch.cut == len(OPENING) + 2 and said is not None and "'## Use it'" in said


@given(st.text(max_size=600), st.text(max_size=300), st.lists(st.text(max_size=300), max_size=3))
def test_cutting_any_answer_is_total_and_keeps_a_prefix(
    answer: str, request: str, results: list[str]
) -> None:
    assert answer.startswith(before_next_section(answer, request, results))


@given(st.lists(st.text(alphabet="#= -\nab", max_size=80), max_size=30))
def test_any_pieces_fed_are_read_as_the_whole(pieces: list[str]) -> None:
    results = ["# ab\n\nab\n==\n## a b\n"]
    watch = SectionWatch("How do I x?", results)
    for piece in pieces:
        watch.feed(piece)
    whole = SectionWatch("How do I x?", results)
    whole.feed("".join(pieces))
    assert watch.cut == whole.cut


def test_watching_and_reading_headings_are_linear() -> None:
    rng = random.Random(3)
    unit = "".join(rng.choice("ab #=-\n") for _ in range(1_000))

    def work(n: int) -> None:
        document = unit * n
        SectionWatch(HOW, [document]).feed(document)

    assert growth(work, 100) < LINEAR_BOUND


async def test_a_how_to_answer_copying_on_is_stopped_at_the_next_section_and_shown_without_it() -> None:
    # The server would go on copying for ever (it stalls after the copy and never finishes): only the
    # watch ends the answer, at the heading the request does not ask about.
    pieces = [OPENING[i : i + 40] for i in range(0, len(OPENING), 40)] + [COPIED_ON] * 30
    answer = Reply.stream(text_chunks(pieces), stall_after=len(pieces) + 1, delay=0.005)
    events: list[Event] = []
    async with ScriptedServer(
        text('{"name": "read_file", "arguments": {"path": "README.md"}}'),
        text('{"name": "answer"}'),
        answer,
    ) as server:
        running = run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content=HOW)],
            tools=[read_file],
            policy=ROUTED,
            on_event=events.append,
        )
        result = await asyncio.wait_for(running, timeout=60)
    assert result.turn.content == OPENING and result.turn.finish_reason == "enough"
    shown = "".join(e.delta for e in events if e.type == "message_update" and e.kind == "text")
    assert shown == OPENING
    said = [e for e in events if isinstance(e, Notice) and e.name == "enough"]
    assert len(said) == 1 and "'## Use it'" in said[0].text


async def test_an_answer_to_what_a_document_says_is_read_to_its_end() -> None:
    whole = OPENING + COPIED_ON
    async with ScriptedServer(
        text('{"name": "read_file", "arguments": {"path": "README.md"}}'),
        text('{"name": "answer"}'),
        Reply.stream(text_chunks([whole])),
    ) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content="What does the README say?")],
            tools=[read_file],
            policy=ROUTED,
        )
    assert result.turn.content == whole
