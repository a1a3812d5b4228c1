"""Holding an answer to the tool results it was written from: the entries of a listing, and no made-up paths."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.grounding import (
    AnswerGaps,
    all_failed,
    answer_gaps,
    calls_written,
    correction,
    elsewhere,
    path_words,
    tools_spoken_of,
    without_tool_talk,
)
from steadyloop.steering.picks import wrong_pick
from steadyloop.steering.result_counts import (
    counts_held,
    folder_counts,
    line_counts,
    listed_entries,
    stated_numbers,
)

from ..edges._edges import LINEAR_BOUND, growth

LISTING = "- docs/ (folder)\n- src/ (folder)\n- README.md\n- pyproject.toml\n(hidden entries are not shown)"


def test_a_bulleted_list_of_names_is_a_listing_and_its_notes_are_not_entries() -> None:
    assert listed_entries(LISTING) == ["docs/", "src/", "README.md", "pyproject.toml"]
    assert listed_entries("* `a.py`\n\n• b/\n(and 3 more)") == ["a.py", "b/"]


def test_a_listing_with_sizes_and_lines_is_read_as_its_names() -> None:
    # the command's list_dir: a file's size and lines after its name, and a note on a list cut short
    sized = (
        "- src/ (folder)\n- README.md (21,786 bytes, 327 lines)\n- logo.png (5,120 bytes)\n"
        "(the first 3 of 40 entries; glob finds the others by name)"
    )
    assert listed_entries(sized) == ["src/", "README.md", "logo.png"]
    answer = "The largest file is README.md (21,786 bytes); there is also logo.png and the src/ folder."
    assert not answer_gaps(answer, [sized], "Which files are the largest?")


@pytest.mark.parametrize(
    "result",
    ["", "(empty folder)", "notes.txt\ndocs/", "- Buy milk\n- Call Alice", "- a.py\nsome prose", "1. a.py"],
)
def test_what_is_not_a_listing(result: str) -> None:
    assert listed_entries(result) is None


def test_an_answer_that_leaves_out_an_entry() -> None:
    answer = "There are several folders here, including docs/, src/, and README.md."
    assert answer_gaps(answer, [LISTING], "What is in this folder?") == AnswerGaps(
        missing=("pyproject.toml",)
    )


def test_an_answer_naming_every_entry_has_no_gaps_whatever_its_shape() -> None:
    for answer in (
        "- docs/\n- src/\n- README.md\n- pyproject.toml",
        "Folders docs and src; files `README.md` and PYPROJECT.TOML.",
    ):
        gaps = answer_gaps(answer, [LISTING])
        assert not gaps and gaps == AnswerGaps()


def test_a_count_instead_of_the_entries_leaves_them_all_out() -> None:
    assert answer_gaps("There are 2 folders and 2 files.", [LISTING]).missing == (
        "docs/",
        "src/",
        "README.md",
        "pyproject.toml",
    )


@pytest.mark.parametrize(
    "request_text",
    ["How many files are in the docs folder?", "What is the number of entries here?", "Count the files."],
)
def test_a_count_asked_for_is_not_held_to_the_names(request_text: str) -> None:
    assert not answer_gaps("There are 2 folders and 2 files.", [LISTING], request_text)
    # Still held to what the results say: a path none of them named is made up.
    assert answer_gaps("2 files: README.md and setup.py", [LISTING], request_text).invented == ("setup.py",)


@pytest.mark.parametrize(
    "request_text",
    [
        "Which of them is the largest?",
        "Which one was changed last?",
        "Which file is the biggest?",
        "Show me the newest file in docs.",
        "What is the most recent entry?",
        "Which tests folder has the most files?",
        "Which of the folders holds the fewest files?",
    ],
)
def test_a_pick_among_the_entries_is_not_held_to_all_of_them(request_text: str) -> None:
    assert not answer_gaps("The largest is pyproject.toml.", [LISTING], request_text)
    # a pick is still one of the entries: a path none of the results named is made up
    assert answer_gaps("setup.py is the largest.", [LISTING], request_text).invented == ("setup.py",)


@pytest.mark.parametrize("request_text", ["Which files are in src?", "What is in this folder?", ""])
def test_a_listing_asked_for_is_still_held_to_every_entry(request_text: str) -> None:
    assert answer_gaps("The largest is pyproject.toml.", [LISTING], request_text).missing == (
        "docs/",
        "src/",
        "README.md",
    )


HOW_MANY = "How many files are in the docs folder?"
SEVEN = "\n".join(f"- line{i}.txt (2 lines)" for i in range(7))


def test_what_a_result_says_it_holds() -> None:
    # every entry, the files, the folders, and the files of each kind (one .md, one .toml)
    assert counts_held(LISTING) == (frozenset({4, 2, 1}), "4 entries: 2 files and 2 folders")
    python = "- a.py\n- b.py\n- c.py\n- notes.md\n- src/"
    assert counts_held(python) == (frozenset({5, 4, 1, 3}), "5 entries: 4 files and 1 folder")
    assert counts_held(SEVEN) == (frozenset({7}), "7 entries")
    assert counts_held("- a/\n- b/") == (frozenset({2}), "2 entries")
    assert counts_held('[{"id": 1}, {"id": 2}, {"id": 3}]') == (frozenset({3}), "3 items")
    assert counts_held("[]") == (frozenset({0}), "0 items")
    # a list cut short, prose, a JSON object or broken JSON: no count to hold an answer to
    for result in ("- a\n- b\n(the first 2 of 40 entries)", "Blend one banana.", '{"n": 3}', "[1, 2"):
        assert counts_held(result) is None


SRC = "\n".join(
    [
        *(f"- {d}/ (folder)" for d in ("cli", "turn", "wire")),
        *(f"- m{i}.py (10 bytes, 1 line)" for i in range(5)),
        "- py.typed (0 bytes)",
        "- notes.md (5 bytes, 1 line)",
    ]
)


@pytest.mark.parametrize(
    ("request_text", "counts", "said"),
    [
        ("How many Python files are in src?", {5}, "5 files ending in .py"),
        ("how many .md files are there", {1}, "1 file ending in .md"),
        ("Count the *.py files.", {5}, "5 files ending in .py"),
        ("How many py files?", {5}, "5 files ending in .py"),
        ("How many Rust files are here?", {0}, "0 files ending in .rs"),
        ("How many folders does src have?", {3}, "3 folders"),
        ("How many subdirectories?", {3}, "3 folders"),
        # files of no kind: the files, or every entry taken loosely; never the folders alone
        ("How many files are in src?", {7, 10}, "7 files and 3 folders (10 entries in all)"),
        # two kinds, or no kind, named: every count stands
        ("How many files and folders are in src?", {10, 7, 3, 5, 1}, "10 entries: 7 files and 3 folders"),
        ("How many Python and Markdown files?", {10, 7, 3, 5, 1}, "10 entries: 7 files and 3 folders"),
        ("How many Python scripts are in src?", {5}, "5 files ending in .py"),
        ("How many modules are in src?", {10, 7, 3, 5, 1}, "10 entries: 7 files and 3 folders"),
        ("How many tests files are there?", {7, 10}, "7 files and 3 folders (10 entries in all)"),
        # in the other languages count questions are read in; a folder named in the singular is a place
        ("¿Cuántos archivos hay en la carpeta src?", {7, 10}, "7 files and 3 folders (10 entries in all)"),
        ("Combien de fichiers dans src ?", {7, 10}, "7 files and 3 folders (10 entries in all)"),
        ("Wie viele Dateien sind im Ordner src?", {7, 10}, "7 files and 3 folders (10 entries in all)"),
        ("Quantos arquivos há na pasta src?", {7, 10}, "7 files and 3 folders (10 entries in all)"),
        ("¿Cuántas carpetas hay en src?", {3}, "3 folders"),
        ("Combien de répertoires dans src ?", {3}, "3 folders"),
    ],
)
def test_a_count_of_one_kind_is_held_to_that_kinds_count(
    request_text: str, counts: set[int], said: str
) -> None:
    assert counts_held(SRC, request_text) == (frozenset(counts), said)


def test_a_count_of_one_kind_stated_as_another_kinds_count_is_sent_back() -> None:
    # Asked how many Python files src/ holds, the 1.5B model answered with its count of folders.
    asked = "How many Python files are in src/steadyloop?"
    assert answer_gaps("There are 3 Python files in src.", [SRC], asked).count == "5 files ending in .py"
    assert not answer_gaps("There are 5 Python files in src.", [SRC], asked)
    assert answer_gaps("src holds 3 files.", [SRC], "How many files are in src?").count
    assert not answer_gaps("There are 3 folders.", [SRC], "How many folders are in src?")


def test_a_count_of_files_that_counted_the_folders_too_says_so_or_is_sent_back() -> None:
    # Asked how many files docs/ held (11 files and a folder), the 1.5B model answered "There are 12
    # entries in the docs folder.": the listing's size, not its files.
    asked = "How many files are in src?"
    assert answer_gaps("There are 10 entries in src.", [SRC], asked).count == (
        "7 files and 3 folders (10 entries in all)"
    )
    assert answer_gaps("src holds ten files.", [SRC], asked).count
    # the files, or every entry where the answer says folders are among them
    assert not answer_gaps("There are 7 files in src.", [SRC], asked)
    assert not answer_gaps("src holds 10 files and folders.", [SRC], asked)
    assert not answer_gaps("There are 10 entries: 7 files and 3 folders.", [SRC], asked)
    assert not answer_gaps("src has 10 files, including 3 directories.", [SRC], asked)
    spanish = "¿Cuántos archivos hay en la carpeta src?"
    assert answer_gaps("Hay 10 entradas.", [SRC], spanish, languages=False).count
    assert not answer_gaps("Hay 10 archivos y carpetas.", [SRC], spanish, languages=False)
    assert not answer_gaps("Hay 7 archivos.", [SRC], spanish, languages=False)
    # with no folder listed, every entry is a file
    flat = "- a.md\n- b.md\n- c.md"
    assert not answer_gaps("There are 3 entries.", [flat], "How many files are in docs?")


SIZED = "\n".join(
    [
        "- sub/ (folder)",
        "- core.py (90,000 bytes, 3,042 lines)",
        "- _textwrap.py (1,400 bytes, 41 lines)",
        "- io.py (95,000 bytes, 1,000 lines)",
        "- logo.png (120,000 bytes)",
        "- py.typed (0 bytes)",
    ]
)


@pytest.mark.parametrize(
    ("request_text", "answer", "pick"),
    [
        # Asked this in click's source, the 1.5B model named _textwrap.py (41 lines); core.py has 3,042.
        (
            "Which file in src/click has the most lines?",
            "_textwrap.py has the most, 41.",
            "core.py, with 3,042 lines",
        ),
        ("Which file in src/click has the most lines?", "core.py, with 3,042 lines.", None),
        ("Which file is the longest?", "io.py", "core.py, with 3,042 lines"),
        ("Which file has the fewest lines?", "core.py", "_textwrap.py, with 41 lines"),
        ("Which file in the tests folder is the largest?", "io.py is.", "logo.png, with 120,000 bytes"),
        ("Which file in the tests folder is the largest?", "logo.png (120,000 bytes).", None),
        ("What is the smallest file here?", "py.typed, which is empty.", None),
        # folders have no size in a listing; a pick that is not a file's is not held
        ("Which folder is the largest?", "sub/", None),
        ("Which of them is the newest?", "io.py", None),
    ],
)
def test_a_pick_by_size_or_lines_is_held_to_the_listings_own_figures(
    request_text: str, answer: str, pick: str | None
) -> None:
    gaps = answer_gaps(answer, [SIZED], request_text)
    assert gaps.pick == pick and not gaps.missing
    if pick is not None:
        told = correction(gaps)
        assert pick in told and "pick" in told


def test_a_pick_is_held_only_to_one_whole_listing_of_sized_files() -> None:
    asked = "Which file has the most lines?"
    assert not answer_gaps("io.py", [SIZED, SIZED], asked).pick  # two listings: which one is unknown
    # one listing and a search after it (the 1.5B model searched for "lines"): the listing picks
    found = "src/click/_textwrap.py:12: lines = []"
    assert answer_gaps("_textwrap.py", [SIZED, found], asked).pick == "core.py, with 3,042 lines"
    assert not answer_gaps("io.py", [SIZED + "\n(the first 6 of 90 entries)"], asked).pick  # cut short
    assert not answer_gaps("io.py", ["- a.py (3 bytes, 1 line)"], asked).pick  # nothing to pick among
    assert not answer_gaps("io.py", ["- a.py\n- b.py"], asked).pick  # no figures


# A listing of tests/ as list_dir gives it: each folder with what it holds directly.
FOLDERS = "\n".join(
    [
        "- cli/ (folder: 22 files)",
        "- data/ (folder: 3 files, 5 folders)",
        "- server/ (folder: 45 files)",
        "- sizing/ (folder: 3 files)",
        "- empty/ (folder: empty)",
        "- conftest.py (6,195 bytes, 146 lines)",
    ]
)


@pytest.mark.parametrize(
    ("request_text", "answer", "pick"),
    [
        # Asked this in the repo's own tests/, the 1.5B model answered "tests".
        ("Which tests folder has the most files?", "The tests folder.", "server/, with 45 files"),
        ("Which tests folder has the most files?", "server/ has the most, 45 files.", None),
        ("Which folder has the fewest files?", "sizing/", "empty/, with 0 files"),
        ("Which folder holds the most entries?", "cli/", "server/, with 45 entries"),
        ("Which subfolder has the most folders?", "data/ holds 5 folders.", None),
        ("Which subfolder has the most folders?", "cli/", "data/, with 5 folders"),
        ("Which folder is the largest?", "cli/", None),  # a folder's size is not in the listing
        ("Which file has the most lines?", "cli/", None),  # one file: nothing to pick among
    ],
)
def test_a_pick_of_folders_is_held_to_what_the_listing_says_each_holds(
    request_text: str, answer: str, pick: str | None
) -> None:
    gaps = answer_gaps(answer, [FOLDERS], request_text)
    assert gaps.pick == pick and not gaps.missing
    if pick is not None:
        told = correction(gaps)
        assert f"of the folders the tool returned, it is {pick}" in told and "name that folder" in told


def test_a_count_of_a_named_folder_read_off_its_parents_listing_passes() -> None:
    asked = "How many files are in the cli folder?"
    assert answer_gaps("The cli folder holds 22 files.", [FOLDERS], asked).count is None
    assert answer_gaps("It holds 21 files.", [FOLDERS], asked).count  # no listed folder holds 21
    # a number only another folder holds is no answer about cli/
    assert answer_gaps("The cli folder holds 45 files.", [FOLDERS], asked).count
    # of the kind asked: data/ holds 3 files and 5 folders
    assert answer_gaps("It holds 5 folders.", [FOLDERS], "How many folders does data hold?").count is None
    assert answer_gaps("It holds 3 folders.", [FOLDERS], "How many folders does data hold?").count
    assert answer_gaps("8 entries.", [FOLDERS], "How many entries are in data?").count is None
    # a count of one kind of file is no folder's count: cli/'s 22 files are of every kind
    assert answer_gaps("22 Python files.", [FOLDERS], "How many Python files are in cli?").count


NESTED = "- atlas/ (folder: 1 file, 2 folders)\n- docs/ (folder: 1 file, 1 folder)\n- setup.cfg (24 bytes, 2 lines)"


@pytest.mark.parametrize(
    ("answer", "wrong"),
    [
        # Written so by the 1.5B model once the listing gave each folder's counts: 3 counts the listing.
        (
            "There are 3 folders in the current directory: atlas, docs, and setup.cfg. The atlas folder "
            "contains 1 file and 2 folders. The docs folder contains 1 file and 1 folder.",
            True,
        ),
        ("It holds atlas/ (1 file, 2 folders), docs/ (1 file, 1 folder) and setup.cfg.", False),
        ("There is 1 file in the atlas folder, 1 file in the docs folder, and setup.cfg.", False),
        ("atlas holds 3 entries; docs and setup.cfg are the others.", False),
        (
            "There are 2 files in the atlas folder, 1 file in docs, and setup.cfg.",
            True,
        ),  # 2 folders, not files
        ("atlas/ and docs/. setup.cfg holds 3 folders.", True),  # said of no folder, and no count of it
        (NESTED, False),  # the listing itself
    ],
)
def test_what_a_listed_folder_holds_said_of_it_is_no_count_of_the_listing(answer: str, wrong: bool) -> None:
    gaps = answer_gaps(answer, [NESTED], "What is in this folder?")
    assert gaps.stated == ("3 entries: 1 file and 2 folders" if wrong else None)


def test_a_folders_count_read_off_the_tests_listing_passes() -> None:
    answer = "It holds cli/ (22 files), data/, server/ (45 files), sizing/, empty/ and conftest.py."
    assert answer_gaps(answer, [FOLDERS], "What is in the tests folder?") == AnswerGaps()
    wrong = "There are 9 folders: cli/, data/, server/, sizing/, empty/ and conftest.py."
    assert answer_gaps(wrong, [FOLDERS], "What is in the tests folder?").stated


@given(st.text())
def test_reading_what_any_listing_says_its_folders_hold_is_total(text: str) -> None:
    for listing in (text, "- a/ (folder: " + text + ")", FOLDERS + "\n" + text):
        found = folder_counts(listing)
        assert all(
            name.endswith("/") and files >= 0 and folders >= 0 for name, (files, folders) in found.items()
        )


def test_reading_folder_counts_is_linear() -> None:
    many = "".join(f"- f{i}/ (folder: {i} files)\n" for i in range(20_000))
    said = "".join(f"f{i} holds {i + 1} files. " for i in range(20_000))
    for text in ("- a/ (folder: " + "1 file, " * 50_000 + ")", "- a/ (folder: 1 file)\n" * 50_000, many):
        started = time.perf_counter()
        folder_counts(text)
        wrong_pick("a/", [text], "Which folder has the most files?")
        answer_gaps(said, [text], "What is in this folder?")
        assert time.perf_counter() - started < 5


FAILED = "FileNotFoundError: requirements.txt: no such file; the working folder holds setup.cfg, setup.py"


@pytest.mark.parametrize(
    ("answer", "results", "invented"),
    [
        ("The project requires Python 3.8 or higher.", [FAILED], ("3.8",)),
        ("It listens on port 8043, version 2.1.0.", [FAILED, "PermissionError: x"], ("8043", "2.1.0")),
        ("There is no requirements.txt; setup.cfg may say.", [FAILED], ()),
        ("Python 3.8 it says.", [FAILED], ()),  # the request wrote it
        # a result that did not fail holds the answer's figures or not: only paths are held there
        ("The project requires Python 3.8 or higher.", ["[metadata]\nname = click"], ()),
        ("The project requires Python 3.8 or higher.", [FAILED, "python_requires = >=3.7"], ()),
    ],
)
def test_a_figure_from_nowhere_after_every_tool_failed_is_invented(
    answer: str, results: list[str], invented: tuple[str, ...]
) -> None:
    request = "Does it need Python 3.8?" if answer.startswith("Python 3.8 it") else "Which Python version?"
    assert answer_gaps(answer, results, request).invented == invented


def test_numbers_as_an_answer_states_them() -> None:
    assert stated_numbers("There are 5 lines, 1,024 bytes and Seven files.") == {5, 1024, 7}
    assert stated_numbers("v3 of file2 is 2.5 MB; see 3.") == {3}
    assert stated_numbers("No number here.") == set()


@pytest.mark.parametrize(
    ("answer", "result", "wrong"),
    [
        ("There are 5 files.", SEVEN, "7 entries"),
        ("There are 100 files in the folder.", LISTING, "2 files and 2 folders (4 entries in all)"),
        ("It returned three items.", "[1, 2]", "2 items"),
    ],
)
def test_a_count_asked_for_and_stated_wrong_is_sent_back(answer: str, result: str, wrong: str) -> None:
    gaps = answer_gaps(answer, [result], HOW_MANY)
    assert gaps == AnswerGaps(count=wrong) and gaps.size == 1
    told = correction(gaps)
    assert wrong in told and "give the count" in told


@pytest.mark.parametrize(
    "answer",
    [
        "There are seven files.",
        "7",
        "The folder holds 7 text files of 2 lines each.",
        "Only line0.txt and the others.",  # no number at all: let pass
    ],
)
def test_a_right_count_or_none_stated_passes(answer: str) -> None:
    assert not answer_gaps(answer, [SEVEN], HOW_MANY)


def test_a_count_is_held_only_where_it_was_asked_of_one_countable_result() -> None:
    assert not answer_gaps("There are 5 files.", [SEVEN], "What is in this folder?").count
    assert not answer_gaps("There are 5 files.", [SEVEN, SEVEN], HOW_MANY).count
    assert not answer_gaps("There are 5 lines.", ["one\ntwo\nthree"], HOW_MANY)
    cut = SEVEN + "\n(the first 7 of 90 entries)"
    assert not answer_gaps("There are 90 files.", [cut], HOW_MANY)


def test_a_path_no_result_named_is_invented() -> None:
    answer = "docs/, src/, tests/cli/, README.md, pyproject.toml and setup.py"
    assert answer_gaps(answer, [LISTING]).invented == ("tests/cli/", "setup.py")


def test_paths_from_the_results_or_the_request_are_not_invented() -> None:
    results = [LISTING, "- steadyloop/ (folder)"]
    answer = "src/steadyloop/ holds the code; see ./README.md and notes/today.md."
    assert answer_gaps(answer, results, "Is notes/today.md there?").invented == ()


def test_a_listing_is_not_held_against_an_answer_that_also_read_a_file() -> None:
    gaps = answer_gaps("It uses a banana.", [LISTING, "Blend one banana."])
    assert gaps == AnswerGaps()


def test_no_results_or_no_answer_no_gaps() -> None:
    assert answer_gaps("It has setup.py.", []) == AnswerGaps()
    assert answer_gaps("  ", [LISTING]) == AnswerGaps()


def test_path_words_leave_out_abbreviations_urls_and_sentence_stops() -> None:
    text = "See e.g. docs/guide.md. Or https://example.com/x.html, i.e. `a.py`; v1.2 and 3.5 are numbers."
    assert path_words(text) == ["docs/guide.md", "a.py"]


def test_the_correction_names_the_gaps_and_what_to_do() -> None:
    told = correction(AnswerGaps(missing=("pyproject.toml",), invented=("tests/cli/",)))
    assert "pyproject.toml" in told and "tests/cli/" in told and "every entry" in told
    only_invented = correction(AnswerGaps(invented=("setup.py",)))
    assert "setup.py" in only_invented and "only what the tools returned" in only_invented
    many = correction(AnswerGaps(missing=tuple(f"f{i}.txt" for i in range(30))))
    assert "f11.txt" in many and "f12.txt" not in many and "18 more" in many


@pytest.mark.parametrize(
    "request_text",
    [
        "How do I run the tests of this project?",
        "Is there a Dockerfile here?",
        "Are there any images in docs?",
        "Does this folder hold a README?",
        "Where is the config?",
        "Can you tell me why the build fails?",
    ],
)
def test_a_request_a_listing_only_helps_answer_is_not_held_to_every_entry(request_text: str) -> None:
    assert answer_gaps("Run pytest.", [LISTING], request_text) == AnswerGaps()
    assert answer_gaps("Run it with tox.ini.", [LISTING], request_text).invented == ("tox.ini",)
    # asking for the contents, the same answer leaves every entry out
    assert len(answer_gaps("Run pytest.", [LISTING], "What is in this folder?").missing) == 4


def test_a_declared_tools_call_written_out_in_an_answer_is_no_answer() -> None:
    answer = 'deploy.md says:\n```json\n{"name": "read_file", "arguments": {"path": "docs/faq.md"}}\n```'
    assert calls_written(answer, ["read_file", "list_dir"]) == ("read_file",)
    assert calls_written(answer, ["list_dir"]) == ()  # no tool of that name: JSON of the user's
    assert calls_written('{ "name" : "list_dir" , "parameters": {}} and {"name": "read_file",', ["read_file", "list_dir"]) == ("list_dir",)  # fmt: skip
    assert calls_written('Set {"name": "Ada", "age": 3} in it.', ["Ada"]) == ()
    docs = ["- deploy.md\n- faq.md", "# Deploying"]
    gaps = answer_gaps(answer, docs, "Show me the docs.", tools=["read_file"])
    assert gaps == AnswerGaps(tools=("read_file",)) and gaps.size == 1
    assert "say in words" in correction(gaps)
    assert not answer_gaps(answer, docs, "Show me the docs.")  # tools not given


@pytest.mark.parametrize(
    ("answer", "spoken"),
    [
        ("To run the tests, use the list_dir function with the path tests.", ("list_dir",)),
        ("Call `getWeather` for it.", ("getWeather",)),
        ("Run them with pytest; list_dir-like helpers are in tests/.", ()),  # no tool of that word
        ("I will add it and search again.", ()),  # tools named as plain words
        ("Its read_file helper reads the file.", ()),  # a result holds the name
        ("Use read_files.", ()),
        ("The tool's result shows list_dir output.", ("the tool", "list_dir")),
        ("The tool returned 3 entries: atlas, docs and setup.cfg.", ("the tool",)),
        ("The tool returned: atlas/, docs/ and setup.cfg", ()),  # handed on: its opening is dropped
        ("This function returns the port.", ()),  # code explained
        ("The tool sorts photos by date.", ()),  # the project's own tool
    ],
)
def test_a_tool_an_answer_names_where_nothing_did_is_spoken_of(answer: str, spoken: tuple[str, ...]) -> None:
    sources = ["def read_file(path): ...", "how do i run the tests?"]
    assert (
        tools_spoken_of(answer, ["list_dir", "read_file", "getWeather", "add", "search"], sources) == spoken
    )


@pytest.mark.parametrize(
    ("answer", "wrong"),
    [
        ("There are 11 files and folders: docs/, src/, README.md and pyproject.toml.", True),
        ("It holds 3 Python files: docs/, src/, README.md and pyproject.toml.", True),
        ("It holds two .md files: docs/, src/, README.md and pyproject.toml.", True),
        ("It holds 2 files and two folders: docs/, src/, README.md and pyproject.toml.", False),
        ("Four entries: docs/, src/, README.md and pyproject.toml.", False),
        ("It holds one .md file: docs/, src/, README.md and pyproject.toml.", False),
        ("docs/, src/, README.md and pyproject.toml, and 2 other files hidden.", False),  # a part
        ("docs/, src/, README.md and pyproject.toml; the 3 largest files are...", False),  # a part
    ],
)
def test_a_count_stated_unasked_is_held_to_the_listing(answer: str, wrong: bool) -> None:
    gaps = answer_gaps(answer, [LISTING], "What is in this folder?")
    assert gaps == (AnswerGaps(stated="4 entries: 2 files and 2 folders") if wrong else AnswerGaps())
    if wrong:
        told = correction(gaps)
        assert "the tool returned 4 entries: 2 files and 2 folders" in told and "name every entry" in told


def test_a_count_stated_unasked_is_held_only_to_one_whole_listing() -> None:
    wrong = "There are 11 files: docs/, src/, README.md and pyproject.toml."
    assert not answer_gaps(wrong, [LISTING, LISTING], "What is in these folders?").stated
    assert not answer_gaps(wrong, [LISTING + "\n(the first 4 of 11 entries)"], "What is in it?").stated
    assert not answer_gaps(wrong, ["docs, src, README.md"], "What is in it?").stated  # no listing
    # asked for, it is the count check's: held to that
    assert answer_gaps(wrong, [LISTING], "How many files are here?") == AnswerGaps(
        count="2 files and 2 folders (4 entries in all)"
    )


@pytest.mark.parametrize(
    ("request_text", "called", "away"),
    [
        ("How many Python files are in src/steadyloop/cli?", ["src/steadyloop"], True),
        ("How many Python files are in src/steadyloop/cli?", ["./src/steadyloop/cli/", "name"], False),
        ("How many Python files are in SRC/app?", ["src/app"], False),
        ("How many files are in docs/api and src/app?", ["docs/api"], False),  # one of the places asked
        ("How many files are in this folder?", ["src"], False),  # no path written out
        ("How many files does docs/ hold?", [], False),  # "docs/" is one folder, not a nested path
        ("What is in docs/faq.md?", ["docs"], True),
    ],
)
def test_a_request_naming_a_path_no_call_was_made_on_asks_elsewhere(
    request_text: str, called: list[str], away: bool
) -> None:
    assert elsewhere(request_text, called) is away


def test_results_from_elsewhere_hold_no_count_pick_or_listing_only_what_is_invented() -> None:
    asked = "How many entries are in src/app/cli?"
    assert answer_gaps("There are 9 entries.", [LISTING], asked).count  # not told where the calls went
    assert answer_gaps("There are 9 entries.", [LISTING], asked, called=["src/app/cli"]).count
    assert not answer_gaps("There are 9 entries.", [LISTING], asked, called=["src"])
    listed = "What is in src/app/cli?"
    assert answer_gaps("docs/ only", [LISTING], listed, called=["src/app/cli"]).missing
    gaps = answer_gaps("docs/ and setup.py", [LISTING], listed, called=["src"])
    assert gaps == AnswerGaps(invented=("setup.py",))


@given(st.text(), st.lists(st.text(), max_size=4), st.text(), st.none() | st.lists(st.text(), max_size=3))
def test_reading_any_answer_and_results_is_total(
    answer: str, results: list[str], request: str, called: list[str] | None
) -> None:
    gaps = answer_gaps(answer, results, request, called, tools=called or ())
    assert isinstance(gaps, AnswerGaps)
    assert isinstance(correction(gaps), str)


def test_huge_adversarial_text_is_read_in_one_pass() -> None:
    for text in ("a/" * 50_000, "a." * 50_000, "a" * 100_000 + ".py", "- x\n" * 20_000, "1," * 50_000):
        answer_gaps(text, [text[:2_000]], "how many " + text[:100])
        answer_gaps(text, [text[:2_000]], text, called=[text[:1_000]], tools=["a", "x"])
        calls_written('{"name": "a", "arguments":' * 5_000 + text, ["a"])
        stated_numbers(text)
        counts_held("[" * 100_000)
        path_words(text)
        listed_entries(text)


POEM = "Roses are red\nViolets are blue\nSugar is sweet\n\nAnd so are you\n"
LINES = "How many lines are in poem.txt?"


def test_what_a_result_holds_in_lines() -> None:
    assert line_counts(POEM) == (frozenset({5, 4}), "5 lines, 4 of them not blank")
    assert line_counts("red\nblue") == (frozenset({2}), "2 lines")
    # a tool that counted, or a note saying how many lines of how many were shown: its numbers stand
    assert line_counts("12 poem.txt")[0] == frozenset({1, 12})
    assert line_counts("a\nb\n[lines 1-2 of 3,412; search_text finds lines in the rest]")[0] >= {3412}
    assert line_counts("") == (frozenset({0}), "0 lines")


@pytest.mark.parametrize(
    ("answer", "wrong"),
    [
        ("There are 10 lines in poem.txt.", True),  # the 1.5B model's count for this poem
        ("Roses are red, violets are blue, sugar is sweet and so are you.", True),  # restated, no count
        ("There are 5 lines in poem.txt.", False),
        ("Four lines of verse, and one blank line.", False),
        ("5", False),
    ],
)
def test_a_count_of_lines_is_held_to_the_lines_the_result_holds(answer: str, wrong: bool) -> None:
    gaps = answer_gaps(answer, [POEM], LINES)
    assert (gaps.count == "5 lines, 4 of them not blank") is wrong
    assert not gaps.missing and not gaps.invented


@pytest.mark.parametrize(
    ("request_text", "held"),
    [
        ("How many files have more than 100 lines?", False),
        ("How many Python files are larger than 1 KB?", False),
        ("How many lines start with a hash?", False),
        ("What is the number of files that mention nginx?", False),
        ("How many files are in the docs folder?", True),
        ("How many lines does poem.txt have?", True),
        ("How many Python files are in src?", True),
    ],
)
def test_a_count_of_a_part_the_check_cannot_weigh_is_not_held(request_text: str, held: bool) -> None:
    listing = "- a.py (4,000 bytes, 120 lines)\n- b.py (90 bytes, 4 lines)\n- c.py (9,000 bytes, 300 lines)"
    assert bool(answer_gaps("There are 17 of them.", [listing], request_text).count) is held


def test_a_count_of_lines_stated_by_the_tool_itself_passes() -> None:
    # wc -l through a shell tool, and a listing's own line notes: the number is the result's
    assert not answer_gaps("poem.txt has 5 lines.", ["5 poem.txt"], LINES)
    listing = "- README.md (35,613 bytes, 326 lines)\n- pyproject.toml (5,672 bytes, 120 lines)"
    assert not answer_gaps("README.md has 326 lines.", [listing], "How many lines does README.md have?")


def test_lines_not_counted_are_not_held() -> None:
    # no count asked, or a count of something else than lines, or more than one result: left as it was
    assert not answer_gaps("The poem has ten lines about roses.", [POEM], "What does poem.txt say?")
    assert not answer_gaps("There are 3 lines.", [POEM, POEM], LINES)
    listing = "- a.py (4,000 bytes, 120 lines)\n- b.py (90 bytes, 4 lines)\n- c.py (9,000 bytes, 300 lines)"
    assert not answer_gaps("2 files do.", [listing], "How many files have more than 100 lines?")


@pytest.mark.parametrize(
    "request_text",
    [
        "How many lines does poem.txt have?",
        "What is the number of non-empty lines?",
        "Count the lines of it.",
    ],
)
def test_the_ways_a_count_of_lines_is_asked(request_text: str) -> None:
    assert answer_gaps("There are 10 lines.", [POEM], request_text).count == "5 lines, 4 of them not blank"


@given(st.text(max_size=300), st.text(max_size=300))
def test_holding_any_answer_to_any_result_in_lines_is_total(answer: str, result: str) -> None:
    gaps = answer_gaps(answer, [result], LINES)
    assert gaps.count is None or gaps.count.endswith(("line", "lines", "not blank"))


def test_counting_a_huge_result_in_lines_is_linear() -> None:
    huge = "Roses are red 12\n" * 200_000
    assert answer_gaps("There are 200,000 lines.", [huge], LINES).count is None
    asked = "how many of the files that are " * 50_000 + "lines?"
    assert answer_gaps("There are 3.", [huge], asked).count is None

    # CPU time growing with the text, measured as a ratio: loaded cores slow both sizes alike
    def counted(n: int) -> object:
        return answer_gaps(
            "There are 3.", ["Roses are red 12\n" * n], "how many of the files " * n + "lines?"
        )

    assert growth(counted, 5_000) < LINEAR_BOUND


def test_a_failure_is_read_as_the_loop_writes_it_for_the_model() -> None:
    from steadyloop.tools._call import describe

    failures = [describe(FileNotFoundError("no file 'requirements.txt'")), describe(ValueError())]
    assert all_failed(failures) and all_failed(["  " + failures[0]])
    assert not all_failed([*failures, "- README.md"])  # one tool answered
    assert not all_failed([]) and not all_failed(["No such file here."])


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("The tool returned: # Deploying\nRun it on port 9090.", "# Deploying\nRun it on port 9090."),
        ("The tool returned:\n- a.txt\n- b/", "- a.txt\n- b/"),
        ("the tool's output: 42", "42"),
        ("The tool returned:   ", "The tool returned:   "),  # nothing after it: left as it is
        ("The tool returned a list of files.", "The tool returned a list of files."),
        ("The port is 9090. The tool returned: that.", "The port is 9090. The tool returned: that."),
        ("This function returns: the port.", "This function returns: the port."),
    ],
)
def test_an_opening_that_hands_on_the_tools_output_is_dropped(answer: str, shown: str) -> None:
    assert without_tool_talk(answer) == shown


def test_a_listing_of_more_entries_than_are_held_is_not_held_to_each() -> None:
    held = "\n".join(f"- f{i}.txt" for i in range(500))
    assert answer_gaps("f1.txt", [held], "What is in this folder?").missing  # 499 left out
    more = held + "\n- last.txt"
    assert not answer_gaps("f1.txt", [more], "What is in this folder?").missing


def test_a_pick_that_many_entries_tie_for_is_not_held() -> None:
    tied = "\n".join(f"- d{i}/ (folder: 3 files)" for i in range(21)) + "\n- small/ (folder: 1 file)"
    assert not answer_gaps("small/", [tied], "Which folder has the most files?").pick
    few = "\n".join(f"- d{i}/ (folder: 3 files)" for i in range(20)) + "\n- small/ (folder: 1 file)"
    assert answer_gaps("small/", [few], "Which folder has the most files?").pick == "d0/, with 3 files"
