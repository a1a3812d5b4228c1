"""What the command's read-only file tools answer: a file's lines, a folder's entries with their sizes, the
lines that match a pattern, the paths that match a glob; each within the room it is given.

Every answer fits the characters the window has left for it (``ToolContext.budget_chars``, never below
``FLOOR_CHARS``) and says what it left out in words a model cannot take for a count or a whole: "lines
1-120 of 327", "the first 100 of 3,412 matching lines", and how to get the rest. A search that finds
nothing says what it looked through (the contents of so many files) and where names are found instead.

Every path is resolved (symlinks followed) before use and refused when it lands outside the root, so a
link pointing out of the working directory is as out of reach as ``../``. A tool fails by raising: the
message is what the model reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .. import ToolContext
from .definitions import NOT_DEFINITION, definition_rank

__all__ = [
    "FLOOR_CHARS",
    "SKIPPED_DIRS",
    "Root",
    "file_entry",
    "glob_paths",
    "list_folder",
    "read_lines",
    "room_for",
    "search_lines",
    "unquoted",
]

#: The least room a tool answers in, whatever the window has left: a result the window cannot take
#: whole is cut by the context keeper, and an answer shorter than this says too little to be worth it.
FLOOR_CHARS = 600

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"})

_MAX_LINE_READ = 2000
_MAX_LISTED = 500
_MAX_MATCHES = 100
_MAX_LINE = 240
# Counting matches past what is shown stops here, and the count is then "at least".
_COUNT_MATCHES = 10_000
_COUNT_BYTES = 64_000_000
# Lines are counted in files up to this size; a bigger one is listed with its size alone.
_COUNTED_BYTES = 8_000_000
_BINARY_PROBE = 8192
# A listed folder's own entries are counted up to this many; past it the note says "at least".
_COUNTED_CHILDREN = 10_000
_FOOTER = 160  # characters kept for the note that says what was left out
_PROSE = frozenset({".md", ".markdown", ".rst", ".txt", ".adoc", ".html", ".htm", ".ipynb", ".tex"})
_QUOTES = "\"'`"
_MAX_NEAR_SCAN = 5_000  # entries of a folder looked through for the file a missing name means
_NEAR_NAMED = 5  # of the files a missing name may mean, the most an error names
_HELD_NAMED = 40  # of the entries of a missing file's folder, the most an error names

SortOrder = Literal["name", "size"]


def room_for(context: ToolContext | None, most: int) -> int:
    """The characters an answer may take: the window's room for it, at most ``most``, at least
    ``FLOOR_CHARS``."""
    chars = context.budget_chars if context is not None else None
    return most if chars is None else max(min(chars, most), FLOOR_CHARS)


def unquoted(given: str) -> str:
    """A path as a small model meant it: without the quotes around it (and a sentence's full stop after
    them: '".".' is '.'), and from the working directory when written from a root ('/notes.txt')."""
    text = given.strip()
    if text.endswith(".") and text[:-1].endswith(tuple(_QUOTES)):
        text = text[:-1]
    return text.strip(_QUOTES).lstrip("/") or "."


class Root:
    """The directory the tools may reach, and the check every path goes through."""

    def __init__(self, root: Path) -> None:
        self.path = root.resolve()

    def inside(self, given: str) -> Path:
        target = (self.path / given).resolve()
        if not target.exists():
            # A small model quotes the path it means ('"."', '".".', "'notes.txt'") or writes it from a root
            # ('/notes.txt'); what it meant is read only when what it wrote names nothing.
            bare = unquoted(given)
            if bare != given and (self.path / bare).resolve().exists():
                target = (self.path / bare).resolve()
        if target != self.path and self.path not in target.parents:
            raise PermissionError(
                f"{given!r} is outside the working directory {self.path}; only paths inside it"
            )
        return target

    def file_for(self, given: str) -> tuple[Path, bool]:
        """The file ``given`` names, or the one it means when it names nothing: the same name in another
        case (``readme.md``), or the name with an extension (``README`` for ``README.md``); and whether it
        is the one named.

        Asked "What does the README say?" in a folder holding README.md, the 1.5B model read ``README``,
        was told there was no such file, and answered from a search's scattered lines instead.

        Raises:
            FileNotFoundError: no file there, and not exactly one meant; the message names those that may be.
            PermissionError: outside the root.
        """
        target = self.inside(given)
        if target.exists():
            return target, True
        near = self._near(target)
        if len(near) == 1:
            return near[0], False
        if near:
            named = ", ".join(self.show(p) for p in near[:_NEAR_NAMED])
            raise FileNotFoundError(f"{given}: no such file; there are {named}")
        raise FileNotFoundError(f"{given}: no such file" + self._held_by(target.parent))

    def _held_by(self, folder: Path) -> str:
        """What a missing file's folder holds, for the model to pick from: asked which Python version a
        project needs, the 1.5B model read requirements.txt, which it does not have, and answered "3.8 or
        higher" from nothing."""
        if not folder.is_dir() or (folder != self.path and self.path not in folder.parents):
            return ""
        where = "the working folder" if folder == self.path else f"{self.show(folder)}/"
        names: list[str] = []
        for count, path in enumerate(sorted(folder.iterdir())):
            if count >= _MAX_NEAR_SCAN or len(names) >= _HELD_NAMED:
                return f"; {where} holds {', '.join(names)} and more"
            if not path.name.startswith("."):
                names.append(path.name + "/" if path.is_dir() else path.name)
        return f"; {where} holds {', '.join(names)}" if names else ""

    def _near(self, wanted: Path) -> list[Path]:
        """The files of ``wanted``'s folder that it may mean (see :meth:`file_for`), in name order."""
        folder, name = wanted.parent, wanted.name.lower()
        if not name or not folder.is_dir() or (folder != self.path and self.path not in folder.parents):
            return []
        found: list[Path] = []
        for count, path in enumerate(folder.iterdir()):
            if count >= _MAX_NEAR_SCAN:
                break
            low = path.name.lower()
            same = low == name or (low.startswith(name + ".") and "." not in low[len(name) + 1 :])
            if same and path.is_file():
                found.append(path)
        return sorted(found)

    def show(self, path: Path) -> str:
        return "." if path == self.path else str(path.relative_to(self.path))

    def files(self, start: Path) -> Iterator[Path]:
        """The files under ``start`` (or ``start`` itself), in name order, skipping tool folders and
        links that lead out."""
        if start.is_file():
            yield start
            return
        for folder, dirs, names in os.walk(start):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(n for n in names if n not in SKIPPED_DIRS):  # a worktree's .git is a file
                path = Path(folder) / name
                # A link may point anywhere; only what resolves inside the root is read.
                try:
                    yield self.inside(str(path.relative_to(self.path)))
                except PermissionError:
                    continue


def file_text(path: Path, shown: str) -> str:
    """A text file's contents.

    Raises:
        FileNotFoundError: no file there (a folder is named as one).
        ValueError: it is a binary file.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{shown}: no such file" + (" (it is a directory)" if path.is_dir() else ""))
    data = path.read_bytes()
    if b"\0" in data[:_BINARY_PROBE]:
        raise ValueError(f"{shown} is a binary file")
    return data.decode("utf-8", errors="replace")


def _fitting(lines: Iterable[str], room: int, most: int) -> list[str]:
    """The leading lines that fit in ``room`` characters (a newline after each), at most ``most``."""
    kept: list[str] = []
    used = 0
    for line in lines:
        if len(kept) >= most or used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    return kept


# -- read_file --------------------------------------------------------------------------------------


def read_lines(text: str, shown: str, *, offset: int, limit: int, numbered: bool, room: int) -> str:
    """A file's lines from ``offset`` (1-based), at most ``limit`` and ``room`` characters, and a note
    saying which lines these are of how many when any are left out.

    Args:
        numbered: number the lines, and say the offset to read on from; without, the note points at
            ``search_text`` (the tool reads from the start only).
    """
    lines = text.splitlines()
    total = len(lines)
    if not lines:
        return "(empty file)"
    start = max(offset, 1) - 1
    if start >= total:
        return f"({shown} has {total} line{'s' if total != 1 else ''}; line {start + 1} is past its end)"
    chosen = [line[:_MAX_LINE_READ] for line in lines[start : start + max(limit, 1)]]
    if numbered:
        chosen = [f"{start + i + 1:6}  {line}" for i, line in enumerate(chosen)]
    kept = _fitting(chosen, room - _FOOTER, len(chosen))
    if not kept:  # one line longer than the room: its start
        kept = [chosen[0][: max(room - _FOOTER, 1)]]
    end = start + len(kept)
    out = "\n".join(kept)
    if start == 0 and end == total:
        return out
    where = f"lines {start + 1}-{end} of {total}"
    if end >= total:
        return f"{out}\n[{where}]"
    more = f"read again with offset={end + 1} for more" if numbered else "search_text finds lines in the rest"
    return f"{out}\n[{where}; {more}]"


# -- list_dir --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    folder: bool
    size: int
    note: str


def _folder_note(path: Path) -> str:
    """What a listed folder holds directly, as ``ls`` would list it (hidden entries left out): "folder: 3
    files, 1 folder", "folder: empty". Asked "Which tests folder has the most files?", the 1.5B model saw
    only "- cli/ (folder)" for each and answered "tests"."""
    files = folders = 0
    try:
        with os.scandir(path) as children:
            for child in children:
                if child.name.startswith("."):
                    continue
                if files + folders >= _COUNTED_CHILDREN:
                    return f"folder: at least {_COUNTED_CHILDREN:,} entries"
                try:
                    folder = child.is_dir()
                except OSError:
                    folder = False
                folders += folder
                files += not folder
    except OSError:
        return "folder, unreadable"
    if not files and not folders:
        return "folder: empty"
    held = [
        f"{n:,} {one if n == 1 else many}"
        for n, one, many in ((files, "file", "files"), (folders, "folder", "folders"))
        if n
    ]
    return "folder: " + ", ".join(held)


def _entry(path: Path) -> _Entry:
    if path.is_dir():
        return _Entry(path.name, True, 0, _folder_note(path))
    try:
        size = path.stat().st_size
    except OSError:
        return _Entry(path.name, False, 0, "unreadable")
    note = f"{size:,} byte{'s' if size != 1 else ''}"
    if 0 < size <= _COUNTED_BYTES:
        try:
            data = path.read_bytes()
        except OSError:
            return _Entry(path.name, False, size, note)
        if b"\0" not in data[:_BINARY_PROBE]:
            lines = data.count(b"\n") + (not data.endswith(b"\n"))
            note += f", {lines:,} line{'s' if lines != 1 else ''}"
    return _Entry(path.name, False, size, note)


def file_entry(target: Path) -> str:
    """A file's entry as a listing gives it (``- notes.txt (40 bytes, 3 lines)``): ``list_dir`` given a
    file lists it as ``ls`` lists one, then gives its text (``tools.listed_file``)."""
    entry = _entry(target)
    return f"- {entry.name} ({entry.note})"


def list_folder(target: Path, *, sort: SortOrder, room: int, finder: str | None) -> str:
    """A folder's entries as a bulleted list, a file with its size and lines, a folder named as one.

    Hidden entries are left out and said to be; past ``room`` (or 500 entries) the note says how many
    were shown of how many.

    Args:
        sort: ``"name"`` (folders first), or ``"size"``: files from the largest, then folders.
        finder: the tool that finds entries by name, for the note on a list cut short.
    """
    every = list(target.iterdir())
    hidden = any(p.name.startswith(".") for p in every)
    # Hidden entries (.git, .venv, caches) by mention only, as ls leaves them out: a small model
    # describing the folder described .ci/ and .mypy_cache/ first.
    entries = [_entry(p) for p in every if not p.name.startswith(".")]
    if sort == "size":
        entries.sort(key=lambda e: (e.folder, -e.size, e.name))
    else:
        entries.sort(key=lambda e: (not e.folder, e.name))
    # A bulleted list with each folder named as one: given bare lines, the 0.5B model read the first
    # line ("bench/") as the folder's name and answered about it (0 of 6 right at temperature 0; 6 of 6
    # with the bullets).
    lines = [f"- {e.name}/ ({e.note})" if e.folder else f"- {e.name} ({e.note})" for e in entries]
    shown = _fitting(lines, room - _FOOTER, _MAX_LISTED)
    if len(shown) < len(lines):
        rest = f"; {finder} finds the others by name" if finder else ""
        shown.append(f"(the first {len(shown)} of {len(lines)} entries{rest})")
    if hidden:
        # Said without a count: after "(and 7 hidden, ...)" the 1.5B model answered "What is in this
        # folder?" with a count of files, 3 times in 8 at temperature 0.2 (0 in 8 without the count).
        shown.append("(hidden entries, named with a leading dot, are not shown)")
    return "\n".join(shown) or "(empty folder)"


# -- search_text -------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tally:
    """What a search found: the lines shown, and how many matched in all (``complete`` when counted to
    the end)."""

    shown: list[str]
    # Lines that define a name the pattern matches, with their rank, wherever they are: shown first when
    # not every line fits (``definitions.py``).
    defining: list[tuple[int, str]] = field(default_factory=list[tuple[int, str]])
    used: int = 0
    full: bool = False
    matches: int = 0
    files: int = 0
    searched: int = 0
    read: int = 0
    complete: bool = True


def _scan(where: Root, start: Path, regex: re.Pattern[str], glob: str | None, room: int) -> _Tally:
    tally = _Tally(shown=[])
    for file in where.files(start):
        if glob and not file.match(glob):
            continue
        if tally.matches >= _COUNT_MATCHES or tally.read >= _COUNT_BYTES:
            tally.complete = False
            break
        try:
            text = file_text(file, where.show(file))
        except (ValueError, OSError):
            continue
        tally.searched += 1
        tally.read += len(text)
        found = 0
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line) is None:
                continue
            found += 1
            rank = definition_rank(line, regex)
            if tally.full and (rank == NOT_DEFINITION or len(tally.defining) >= _MAX_MATCHES):
                continue
            entry = f"{where.show(file)}:{number}: {line.strip()[:_MAX_LINE]}"
            if rank != NOT_DEFINITION and len(tally.defining) < _MAX_MATCHES:
                # A code sample in the docs (``def echo(src):`` in an .rst) defines nothing of the project's.
                tally.defining.append((rank * 2 + (file.suffix.lower() in _PROSE), entry))
            if tally.full:
                continue
            if len(tally.shown) < _MAX_MATCHES and tally.used + len(entry) + 1 <= room - _FOOTER:
                tally.shown.append(entry)
                tally.used += len(entry) + 1
            else:
                tally.full = True
        tally.matches += found
        tally.files += found > 0
    return tally


_ESCAPE = re.compile(r"\\.")


def _has_capitals(pattern: str) -> bool:
    """Whether ``pattern`` writes a capital letter of its own (escapes such as ``\\S`` aside): a search
    in lower case matches any case, as ripgrep's smart case does. A model asked which file talks about
    "Thursday" searched for "thursday" and was told no file did."""
    return any(c.isupper() for c in _ESCAPE.sub("", pattern))


def search_lines(where: Root, pattern: str, path: str, glob: str | None, *, room: int, finders: str) -> str:
    """The lines of the files under ``path`` that ``pattern`` matches (``file:line: text``; a pattern
    without capitals matches any case), with a note
    saying how many matched when not all are shown; when none do, what was searched and where names
    are found (``finders``).

    Raises:
        ValueError: the pattern is not a regular expression.
    """
    try:
        regex = re.compile(pattern, 0 if _has_capitals(pattern) else re.IGNORECASE)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from exc
    start = where.inside(path)
    tally = _scan(where, start, regex, glob, room)
    place = "the working directory" if start == where.path else where.show(start)
    if tally.matches == 0:
        kind = f" {glob}" if glob else ""
        if tally.searched == 0:
            return f"no matches: there are no{kind} text files to search in {place}"
        files = f"{tally.searched} file{'s' if tally.searched != 1 else ''}"
        return (
            f"no matches: no line of the{kind} {files} in {place} matches {pattern!r}. "
            f"search_text looks inside files, not at their names: {finders}."
        )
    if len(tally.shown) == tally.matches:
        return "\n".join(tally.shown)
    least = "" if tally.complete else "at least "
    files = f"{tally.files:,} file{'s' if tally.files != 1 else ''}"
    count = f"{least}{tally.matches:,} matching lines in {least}{files}"
    shown, defining = _definitions_first(tally, room)
    which = (
        f"{len(shown)} of {count}, definitions first" if defining else f"the first {len(shown)} of {count}"
    )
    note = f"[{which}; narrow the pattern or the path to see others]"
    return "\n".join([*shown, note])


def _definitions_first(tally: _Tally, room: int) -> tuple[list[str], bool]:
    """The lines to show of a search that found more than fit: those defining what the pattern names
    first (best rank first, then in file order), then the rest in file order; and whether any defines."""
    if not tally.defining:
        return tally.shown, False
    ranked = [entry for _, entry in sorted(tally.defining, key=lambda pair: pair[0])]
    first = set(ranked)
    chosen = [*ranked, *(entry for entry in tally.shown if entry not in first)]
    return _fitting(chosen, room - _FOOTER, _MAX_MATCHES), True


# -- glob -----------------------------------------------------------------------------------------


def glob_paths(where: Root, pattern: str, *, room: int) -> str:
    """The paths ``pattern`` matches from the root, sorted, with a note saying how many of how many when
    not all fit."""
    if Path(pattern).is_absolute():
        raise PermissionError("give a pattern relative to the working directory")
    matches: list[str] = []
    for path in sorted(where.path.glob(pattern)):
        try:
            matches.append(where.show(where.inside(str(path.relative_to(where.path)))))
        except PermissionError:
            continue
    if not matches:
        hint = "" if "**" in pattern else "; **/ matches any depth of folders, as in **/*.py"
        return f"no files match {pattern!r} (a pattern is matched from the working directory{hint})"
    shown = _fitting(matches, room - _FOOTER, _MAX_LISTED)
    if len(shown) == len(matches):
        return "\n".join(shown)
    note = f"[the first {len(shown)} of {len(matches):,} paths; narrow the pattern to see others]"
    return "\n".join([*shown, note])
