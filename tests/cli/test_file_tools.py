"""What the command's file tools answer to what people ask: a long file within the window's room, sizes and
lines in listings, a search that finds nothing saying what it searched, counts that are never a cap."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steadyloop.cli.render import result_summary
from steadyloop.cli.tools import default_tools, file_tools, shell_tool
from steadyloop.steering.result_counts import counts_held, folder_counts, listed_entries
from steadyloop.tools.definition import Tool, ToolContext

README = "".join(f"Line {n} of the readme says something about the project.\n" for n in range(1, 328))


def _tools(root: Path, *, compact: bool = False) -> dict[str, Tool]:
    return {t.name: t for t in default_tools(root, compact=compact)}


def _context(name: str, budget: int | None = None) -> ToolContext:
    if budget is None:
        return ToolContext("c1", name)
    return ToolContext("c1", name, budget_tokens=budget, chars_per_token=4.0)


async def _call(tool: Tool, budget: int | None = None, **arguments: Any) -> str:
    result = await tool.execute(arguments, _context(tool.name, budget))
    assert isinstance(result, str), result
    return result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "README.md").write_text(README)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "big.py").write_text("x = 1\n" * 500)
    (tmp_path / "src" / "small.py").write_text("y = 2\n")
    (tmp_path / "src" / "middle.py").write_text("z = 3\n" * 40)
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\x00\x00" + bytes(100))
    (tmp_path / ".git").mkdir()
    return tmp_path


# -- reading within the room ----------------------------------------------------------------------------


async def test_a_long_file_is_read_within_the_room_and_says_where_to_read_on(project: Path) -> None:
    read = _tools(project)["read_file"]
    got = await _call(read, budget=500, path="README.md")  # 2,000 characters of room
    assert len(got) <= 2000
    last = int(re.findall(r"^\s*(\d+)  ", got, re.MULTILINE)[-1])
    assert 10 < last < 327
    assert got.endswith(f"\n[lines 1-{last} of 327; read again with offset={last + 1} for more]")
    following = await _call(read, budget=500, path="README.md", offset=last + 1)
    assert following.startswith(f"{last + 1:6}  Line {last + 1} of the readme")


async def test_a_small_models_read_says_how_much_of_the_file_it_holds(project: Path) -> None:
    got = await _call(_tools(project, compact=True)["read_file"], budget=400, path="README.md")
    assert got.startswith("Line 1 of the readme") and len(got) <= 1600
    assert re.search(r"\n\[lines 1-\d+ of 327; search_text finds lines in the rest\]$", got)


async def test_without_a_budget_a_read_keeps_its_own_caps(project: Path) -> None:
    got = await _call(_tools(project)["read_file"], path="README.md")
    assert got.splitlines()[-1].startswith("   327  Line 327")  # all of it, and no note


async def test_the_room_never_falls_below_a_floor(project: Path) -> None:
    from steadyloop.cli import file_reads

    got = await _call(_tools(project)["read_file"], budget=0, path="README.md")
    assert 0 < len(got) <= file_reads.FLOOR_CHARS and "offset=" in got


async def test_a_line_past_the_end_is_said_to_be(project: Path) -> None:
    got = await _call(_tools(project)["read_file"], path="README.md", offset=400)
    assert got == "(README.md has 327 lines; line 400 is past its end)"


# -- listings ---------------------------------------------------------------------------------------------


async def test_a_listing_gives_sizes_and_lines_and_grounding_still_reads_it(project: Path) -> None:
    got = await _call(_tools(project)["list_dir"], path=".")
    assert got.splitlines() == [
        "- src/ (folder: 3 files)",
        f"- README.md ({len(README):,} bytes, 327 lines)",
        "- logo.png (106 bytes)",  # binary: no lines
        "(hidden entries, named with a leading dot, are not shown)",
    ]
    assert listed_entries(got) == ["src/", "README.md", "logo.png"]
    assert (
        result_summary(got)
        == "src/, README.md, logo.png (hidden entries, named with a leading dot, are not shown)"
    )


async def test_a_listed_folder_says_what_it_holds_directly_as_ls_would_list_it(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "a.txt").write_text("a\n")
    (tmp_path / "one" / ".hidden").write_text("h\n")  # left out, as the listing of one/ leaves it out
    (tmp_path / "one" / "inner").mkdir()
    (tmp_path / "one" / "inner" / "deep.txt").write_text("d\n")  # not one/'s own
    (tmp_path / "empty").mkdir()
    (tmp_path / "folders").mkdir()
    (tmp_path / "folders" / "x").mkdir()
    (tmp_path / "folders" / "y").mkdir()
    got = await _call(_tools(tmp_path)["list_dir"], path=".")
    assert got.splitlines() == [
        "- empty/ (folder: empty)",
        "- folders/ (folder: 2 folders)",
        "- one/ (folder: 1 file, 1 folder)",
    ]
    assert folder_counts(got) == {"empty/": (0, 0), "folders/": (0, 2), "one/": (1, 1)}
    assert counts_held(got, "How many folders are here?") == (frozenset({3}), "3 folders")


def test_a_folder_of_more_entries_than_are_counted_says_at_least(tmp_path: Path, monkeypatch: Any) -> None:
    from steadyloop.cli import file_reads

    monkeypatch.setattr(file_reads, "_COUNTED_CHILDREN", 5)
    (tmp_path / "many").mkdir()
    for i in range(7):
        (tmp_path / "many" / f"{i}.txt").write_text("")
    got = file_reads.list_folder(tmp_path, sort="name", room=4000, finder=None)
    assert got == "- many/ (folder: at least 5 entries)"
    assert folder_counts(got) == {}  # counted in part: no count to hold an answer to


async def test_a_listing_sorted_by_size_puts_the_largest_file_first(project: Path) -> None:
    got = await _call(_tools(project)["list_dir"], path="src", sort="size")
    assert got.splitlines() == [
        "- big.py (3,000 bytes, 500 lines)",
        "- middle.py (240 bytes, 40 lines)",
        "- small.py (6 bytes, 1 line)",
    ]
    assert listed_entries(got) == ["big.py", "middle.py", "small.py"]
    assert _tools(project, compact=True)["list_dir"].parameters["properties"]["sort"]["enum"] == [
        "name",
        "size",
    ]


async def test_a_file_asked_to_be_listed_is_listed_as_ls_lists_one(project: Path) -> None:
    # "How many lines does it have?" was sent to list_dir with the file's path; "not a folder" alone was
    # answered with "I cannot list its contents"; given the entry alone, "How many items are in todo.txt?"
    # was answered "1 entry". The entry, then the text as read_file reads it.
    got = await _call(_tools(project)["list_dir"], path="src/middle.py")
    head = "- middle.py (240 bytes, 40 lines)\n(src/middle.py is a file, not a folder; what it holds:)\n"
    read = await _call(_tools(project)["read_file"], path="src/middle.py")
    assert got == head + read and read.startswith("     1  z = 3")
    compact = await _call(_tools(project, compact=True)["list_dir"], path="src/middle.py")
    assert compact == head + "z = 3\n" * 39 + "z = 3"
    assert listed_entries(got) is None  # the file's text is no listing to hold an answer to
    # a long file within the room, a binary one by its entry alone
    assert len(await _call(_tools(project)["list_dir"], budget=500, path="README.md")) <= 2000
    assert await _call(_tools(project)["list_dir"], path="logo.png") == "- logo.png (106 bytes)"
    with pytest.raises(NotADirectoryError):
        await _call(_tools(project)["list_dir"], path="nowhere")


async def test_a_name_without_its_extension_reads_the_one_file_it_means(project: Path) -> None:
    # Asked "What does the README say?" beside README.md, the 1.5B model read "README", was told there
    # was no such file, and answered from a search's scattered lines.
    for compact in (False, True):
        read = _tools(project, compact=compact)["read_file"]
        whole = await _call(read, path="README.md")
        note = "\n[this is README.md: no file is named README]"
        assert await _call(read, path="README") == whole + note
        assert (
            await _call(read, path="readme.MD") == whole + "\n[this is README.md: no file is named readme.MD]"
        )
    assert (await _call(_tools(project)["read_file"], path="src/small")).startswith(
        "     1  y = 2\n[this is src/small.py"
    )
    # a long file is still read within the room, the note kept
    got = await _call(_tools(project)["read_file"], budget=500, path="README")
    assert len(got) <= 2000 and got.endswith("for more]\n[this is README.md: no file is named README]")


async def test_a_name_that_means_several_files_or_none_is_not_read(project: Path) -> None:
    (project / "README.rst").write_text("Another readme.\n")
    (project / "notes").mkdir()
    read = _tools(project)["read_file"]
    with pytest.raises(FileNotFoundError, match=r"^README: no such file; there are README.md, README.rst$"):
        await _call(read, path="README")
    # a folder is not a file a name means, nor is a longer name, nor a file of another folder
    with pytest.raises(FileNotFoundError, match=r"^notes: no such file \(it is a directory\)$"):
        await _call(read, path="notes")
    for path in ("note", "READ", "small"):
        with pytest.raises(FileNotFoundError, match=rf"^{path}: no such file; the working folder holds"):
            await _call(read, path=path)
    # what the folder holds is named, for the model to pick from: asked which Python version a project
    # needs, the 1.5B model read requirements.txt, which the project does not have, and made one up
    with pytest.raises(FileNotFoundError) as missing:
        await _call(read, path="src/nothing")
    assert str(missing.value) == "src/nothing: no such file; src/ holds big.py, middle.py, small.py"
    with pytest.raises(FileNotFoundError) as missing:
        await _call(read, path="requirements.txt")
    assert str(missing.value) == (
        "requirements.txt: no such file; the working folder holds README.md, README.rst, logo.png, notes/, src/"
    )
    with pytest.raises(FileNotFoundError, match=r"^nowhere/x: no such file$"):  # no folder there either
        await _call(read, path="nowhere/x")
    (project / "many").mkdir()
    for n in range(60):
        (project / "many" / f"f{n:02}.txt").write_text("")
    with pytest.raises(FileNotFoundError) as missing:
        await _call(read, path="many/x")
    assert str(missing.value).endswith(", f39.txt and more") and "f40" not in str(missing.value)
    with pytest.raises(PermissionError):
        await _call(read, path="../README")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(max_size=300)
    | st.sampled_from(
        ["README", "readme", "src/small", "../README", "src", "README.", "README..md", ".git/x"]
    ).flatmap(lambda p: st.sampled_from([p, p + "\x00", p.upper(), f'"{p}"', "/" + p, p * 40]))
)
def test_any_path_is_read_or_refused_as_the_model_reads_a_failure(project: Path, path: str) -> None:
    # A model writes any path at all: the file read, or an OSError or ValueError whose message it reads.
    read = _tools(project)["read_file"]
    try:
        got = asyncio.run(_call(read, path=path))
    except (OSError, ValueError) as error:
        assert str(error)
    else:
        assert got


async def test_a_listing_cut_short_says_how_many_of_how_many(tmp_path: Path) -> None:
    for n in range(300):
        (tmp_path / f"file{n:03}.txt").write_text("x\n")
    got = await _call(_tools(tmp_path)["list_dir"], budget=250, path=".")
    assert len(got) <= 1000
    shown = [line for line in got.splitlines() if line.startswith("- ")]
    assert got.endswith(f"(the first {len(shown)} of 300 entries; glob finds the others by name)")
    assert listed_entries(got) == [line.split()[1] for line in shown]
    compact = await _call(_tools(tmp_path, compact=True)["list_dir"], budget=250, path=".")
    assert compact.endswith(" of 300 entries)")  # no glob to point at


# -- searching ----------------------------------------------------------------------------------------------


async def test_a_search_that_finds_nothing_says_what_it_searched_and_where_names_are(project: Path) -> None:
    got = await _call(_tools(project)["search_text"], pattern=r".*\.py$", path="src")
    assert got == (
        r"no matches: no line of the 3 files in src matches '.*\\.py$'. search_text looks inside files, "
        "not at their names: list_dir and glob find files by name."
    )
    compact = await _call(_tools(project, compact=True)["search_text"], pattern="nowhere-to-be-found")
    assert (
        "3 files" not in compact
        and "glob" not in compact
        and "list_dir shows the files of a folder" in compact
    )


async def test_a_search_in_lower_case_matches_any_case(tmp_path: Path) -> None:
    """Smart case: "thursday" finds "Thursday"; a pattern that writes a capital of its own is exact, and an
    escape such as \\S is not a capital."""
    (tmp_path / "notes.txt").write_text("Team meeting on Thursday at 10.\n")
    (tmp_path / "log.txt").write_text("thursday: backups ran\n")
    search = _tools(tmp_path)["search_text"]
    both = await _call(search, pattern="thursday")
    assert "notes.txt:1: Team meeting on Thursday at 10." in both and "log.txt:1: thursday" in both
    exact = await _call(search, pattern="Thursday")
    assert "notes.txt" in exact and "log.txt" not in exact
    escaped = await _call(search, pattern=r"\Sursday")
    assert "notes.txt" in escaped and "log.txt" in escaped


async def test_a_capped_search_says_the_first_hundred_of_how_many(project: Path) -> None:
    got = await _call(_tools(project)["search_text"], pattern=".*")
    lines = got.splitlines()
    total = 327 + 500 + 1 + 40
    assert len(lines) == 101
    assert (
        lines[-1]
        == f"[the first 100 of {total} matching lines in 4 files; narrow the pattern or the path to see others]"
    )


async def test_a_search_counted_past_its_limit_says_at_least(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from steadyloop.cli import file_reads

    monkeypatch.setattr(file_reads, "_COUNT_MATCHES", 400)
    got = await _call(_tools(project)["search_text"], pattern=".*")
    assert got.splitlines()[-1].startswith(
        "[the first 100 of at least 827 matching lines in at least 2 files;"
    )


async def test_a_worktrees_git_file_is_not_searched(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    (tmp_path / "notes.txt").write_text("see the gitdir\n")
    got = await _call(_tools(tmp_path)["search_text"], pattern="gitdir")
    assert got == "notes.txt:1: see the gitdir"


async def test_a_search_within_a_small_room_shows_fewer_and_says_so(project: Path) -> None:
    got = await _call(_tools(project)["search_text"], budget=200, pattern="readme")
    assert len(got) <= 800
    assert re.search(r"\n\[the first \d+ of 327 matching lines in 1 file; ", got)


async def test_a_search_that_finds_more_than_fits_shows_what_defines_the_name_first(tmp_path: Path) -> None:
    # click's case: "echo" on 531 lines, the change log first in file order and def echo( in src/.
    (tmp_path / "CHANGES.rst").write_text("".join(f"- echo() fix number {n}\n" for n in range(300)))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.rst").write_text("Example::\n\n    def echo(src):\n        pass\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "termui.py").write_text("def echo_via_pager(text):\n    echo(text)\n")
    (tmp_path / "src" / "utils.py").write_text("import sys\n\n\ndef echo(message=None):\n    pass\n")
    got = await _call(_tools(tmp_path)["search_text"], budget=200, pattern="echo")
    lines = got.splitlines()
    assert lines[:3] == [
        "src/utils.py:4: def echo(message=None):",  # the name itself, in code
        "docs/guide.rst:3: def echo(src):",  # the name itself, in a code sample of the docs
        "src/termui.py:1: def echo_via_pager(text):",  # another name the pattern touches
    ]
    assert lines[3].startswith("CHANGES.rst:1: ")  # then the rest, in file order
    assert re.fullmatch(
        r"\[\d+ of 304 matching lines in 4 files, definitions first; narrow the pattern or the path to see "
        r"others\]",
        lines[-1],
    )
    # All of it fits: file order, as before.
    small = await _call(_tools(tmp_path)["search_text"], pattern="echo", path="src")
    assert small.splitlines() == [
        "src/termui.py:1: def echo_via_pager(text):",
        "src/termui.py:2: echo(text)",
        "src/utils.py:4: def echo(message=None):",
    ]


# -- glob and the shell -------------------------------------------------------------------------------


async def test_glob_says_how_many_of_how_many_and_how_to_match_any_depth(project: Path) -> None:
    for n in range(200):
        (project / "src" / f"m{n:03}.py").write_text("")
    glob = _tools(project)["glob"]
    got = await _call(glob, budget=200, pattern="src/*.py")
    assert re.search(r"\n\[the first \d+ of 203 paths; narrow the pattern to see others\]$", got)
    missing = await _call(glob, pattern="*.py")
    assert missing == (
        "no files match '*.py' (a pattern is matched from the working directory; **/ matches any depth of "
        "folders, as in **/*.py)"
    )


async def test_shell_output_keeps_its_head_and_tail_within_the_room(tmp_path: Path) -> None:
    run = shell_tool(tmp_path)
    got = await _call(run, budget=200, command="seq 1 5000")
    assert len(got) <= 800 + len("exit code 0\n")
    assert got.startswith("exit code 0\n1\n2\n3\n") and got.endswith("\n4999\n5000")
    assert "characters cut here; send the output to a file to read it in parts" in got


async def test_the_server_file_tools_answer_within_the_room_too(project: Path) -> None:
    tools = {t.name: t for t in file_tools(project, writable=False)}
    got = await _call(tools["read_file"], budget=300, path="README.md")
    assert len(got) <= 1200 and "offset=" in got
