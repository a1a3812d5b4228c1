"""A request that asks which file says something: the answer is held to naming one its search found."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.file_asked import MOST_FOUND, asks_for_file, files_found, unnamed_files
from steadyloop.steering.grounding import AnswerGaps, answer_gaps, correction

from ..edges._edges import LINEAR_BOUND, growth

SEARCHED = "todo.txt:2: Call Alice about the lease"
READ = "1. Buy milk\n2. Call Alice about the lease\n3. Fix the bike"
LEASE = "Find the file that says something about a lease."


def test_the_files_a_search_found_are_the_paths_its_lines_open_with() -> None:
    assert files_found([SEARCHED, READ]) == ["todo.txt"]
    assert files_found(["docs/a.md:1: x\ndocs/a.md:9: y\nsrc/b.py:3: z"]) == ["docs/a.md", "src/b.py"]
    assert files_found(["no matches: no line of the 3 files in . matches 'x'", "key: value"]) == []


@pytest.mark.parametrize(
    ("request_text", "answer", "unnamed"),
    [
        (LEASE, "The file contains the following lines:\n1. Buy milk\n2. Call Alice", ("todo.txt",)),
        (LEASE, "todo.txt says: Call Alice about the lease.", ()),
        ("Which file mentions Alice?", "It is in TODO.TXT, line 2.", ()),  # any case
        ("Which file mentions Alice?", "Line 2 says to call Alice.", ("todo.txt",)),
        ("What does the lease line say?", "Call Alice about the lease.", ()),  # no file asked for
        ("Find the file that mentions Alice, then read it: what is its third item?", "Fix the bike.", ()),
        ("Which file mentions Alice and tell me what it says.", "Call Alice about the lease.", ()),
        ("Which file mentions Alice? Is it long?", "Call Alice.", ()),  # two questions
    ],
)
def test_an_answer_to_which_file_names_one_the_search_found(
    request_text: str, answer: str, unnamed: tuple[str, ...]
) -> None:
    assert unnamed_files(answer, [SEARCHED, READ], request_text) == unnamed


def test_a_search_that_found_many_files_or_one_named_by_its_file_name_asks_nothing() -> None:
    many = "\n".join(f"f{i}.txt:1: lease" for i in range(MOST_FOUND + 1))
    assert unnamed_files("Several files do.", [many], LEASE) == ()
    assert unnamed_files("It is notes.md.", ["docs/notes.md:4: lease"], LEASE) == ()


def test_the_gap_sends_the_answer_back_to_name_the_file() -> None:
    gaps = answer_gaps("The file contains the following lines: 1. Buy milk", [SEARCHED, READ], LEASE)
    assert gaps == AnswerGaps(unnamed=("todo.txt",)) and gaps.size == 1 and gaps
    told = correction(gaps)
    assert "does not name the file" in told and "todo.txt" in told and "name the file" in told


@given(st.text(max_size=300), st.lists(st.text(max_size=300), max_size=4), st.text(max_size=200))
def test_reading_any_answer_is_total(answer: str, results: list[str], request: str) -> None:
    unnamed = unnamed_files(answer, results, request)
    assert len(unnamed) <= MOST_FOUND and all(isinstance(p, str) for p in unnamed)


def test_reading_is_linear() -> None:
    def work(n: int) -> None:
        unnamed_files("x " * n, ["a:1: b\n" * n, ":" * n], "which file " * n)
        unnamed_files("x", ["a:1: b"], "which file ?" + "a" * n)

    assert growth(work, 2_000) < LINEAR_BOUND


@pytest.mark.parametrize(
    ("request_text", "asks"),
    [
        ("Which file mentions Alice?", True),
        ("Where is the echo function defined?", True),
        ("Where in src is parse_args implemented?", True),
        ("Where is the Context class defined, and what does it hold?", True),  # one question
        ("Find the file that mentions nginx, then read it: which port does it give?", False),
        ("Where is the README?", False),
        ("Where is it defined? And why?", False),  # two questions
    ],
)
def test_a_request_asks_for_a_file_alone(request_text: str, asks: bool) -> None:
    assert asks_for_file(request_text) is asks


def test_asked_where_a_name_is_defined_an_answer_naming_no_file_found_is_sent_back() -> None:
    found = "src/click/utils.py:219: def echo(\nsrc/click/termui.py:251: def echo_via_pager("
    request = "Where is the echo function defined?"
    assert unnamed_files("It is defined in the click module.", [found], request) == (
        "src/click/utils.py",
        "src/click/termui.py",
    )
    assert unnamed_files("In utils.py.", [found], request) == ()


def test_asked_where_a_name_is_defined_after_a_read_the_answer_names_the_file_read() -> None:
    request = "Where is the request function defined?"
    code = "def request(method, url):\n    ..."
    read = ["httpx/_api.py"]
    assert unnamed_files("The request function is defined in the `httpx` module.", [code], request, read) == (
        "httpx/_api.py",
    )
    assert unnamed_files("In httpx/_api.py.", [code], request, read) == ()
    assert unnamed_files("In _api.py.", [code], request, read) == ()
    # a search's pattern, the working folder and a folder are no files
    assert unnamed_files("In the httpx module.", [code], request, ["request", ".", "httpx/"]) == ()
    # not asked for a file: not held to one
    assert unnamed_files("It sends a request.", [code], "What does the request function do?", read) == ()


def test_reading_the_files_read_is_linear() -> None:
    request = "Where is it defined?"
    assert growth(lambda n: unnamed_files("no", ["x"], request, ["a/" * n + "b"]), 400) < LINEAR_BOUND
