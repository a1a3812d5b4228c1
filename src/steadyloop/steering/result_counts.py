"""What a tool result holds, counted: the entries of a listing, its files and folders and each kind of
file, a JSON array's items, a text's lines, and the numbers a text states.

A listing is a result whose lines are bulleted names (one word each, a note in parentheses after it
allowed), with notes in parentheses between them: a file's own bulleted prose is no listing. A whole
listing is one whose notes hold no number (a note with one may say it was cut short). ``grounding.py``
holds answers to these counts. Sans I/O, and linear in the text.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Container

__all__ = [
    "FILE_KINDS",
    "FILE_WORD",
    "FOLDER_WORD",
    "NUMBER_WORDS",
    "QUOTES",
    "asked_kind",
    "counts_held",
    "folder_counts",
    "folder_holds",
    "line_counts",
    "listed_entries",
    "listing_counts",
    "plural",
    "sized_values",
    "stated_numbers",
    "whole_listing",
]

#: The marks a name may be written between (```a.py```, ``"docs"``, ``**b/**``): not part of it.
QUOTES = "`'\"*"
_BULLET = re.compile(r"[-*•]\s+(\S+)(?:\s+\([^()\n]*\))?")


_NOTE = re.compile(r"\([^\n]*\)")


# "Files" in the languages count questions are read in (``asked.py``): English and Italian "file",
# Spanish "archivos"/"ficheros", French "fichiers", German "Dateien", Portuguese "arquivos".
FILE_WORD = re.compile(r"\b(?:files?|archivos?|ficheros?|fichiers?|dateien|datei|arquivos?)\b", re.IGNORECASE)


# A listed file with its size, and its lines when it is text: "- core.py (2,053 bytes, 170 lines)".
_SIZED_ENTRY = re.compile(r"^[-*•]\s+(\S+)\s+\(([\d,]+) bytes?(?:, ([\d,]+) lines?)?\)\s*$", re.MULTILINE)


# A listed folder with what it holds directly: "- cli/ (folder: 22 files, 1 folder)", "- docs/ (folder: empty)".
_FOLDER_ENTRY = re.compile(r"^[-*•]\s+(\S+/)\s+\(folder: ([^()\n]*)\)\s*$", re.MULTILINE)
_HELD = re.compile(r"^([\d,]+) (files?|folders?)$")


NUMBER_WORDS = {
    w: n
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}


# A whole number as an answer writes it: "7", "1,024", "seven"; not a part of "2.5", "v3" or "file2".
_NUMBER = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?![\w]|[.,]\d)|\b(" + "|".join(NUMBER_WORDS) + r")\b", re.I
)


# The file kinds a count may name, by the extensions their files end in (the first is how a correction
# says it).
FILE_KINDS: dict[str, tuple[str, ...]] = {
    "python": ("py", "pyi"),
    "markdown": ("md", "markdown"),
    "json": ("json",),
    "yaml": ("yaml", "yml"),
    "toml": ("toml",),
    "javascript": ("js", "mjs", "cjs"),
    "typescript": ("ts", "tsx"),
    "rust": ("rs",),
    "go": ("go",),
    "shell": ("sh", "bash"),
    "java": ("java",),
    "html": ("html", "htm"),
    "css": ("css",),
    "csv": ("csv",),
    "log": ("log",),
}


# "Python files", "python source files", ".md files", "*.txt files"; an extension written bare ("py
# files") is read only when the listing holds files of it.
_KIND_ASKED = re.compile(
    r"\b(" + "|".join(FILE_KINDS) + r")\s+(?:source\s+|script\s+|code\s+)?files?\b"
    r"|(?<![\w.])\*?\.([a-z0-9]{1,8})\s+files?\b"
    r"|\b([a-z0-9]{1,8})\s+files?\b",
    re.IGNORECASE,
)


# A language named anywhere in a count request names its files ("Python and Markdown files", "Python
# scripts"); those that are English words too ("go", "shell", "log") only right before "files".
_LANGUAGE_NAMED = re.compile(
    r"\b(" + "|".join(k for k in FILE_KINDS if k not in ("go", "shell", "log")) + r")\b", re.IGNORECASE
)


# Folders named in the languages count questions are read in, as plurals: English, Spanish, French,
# German ("Verzeichnisse", "Unterordner"; "Ordner" is its own plural, and "im Ordner docs" names the folder
# counted in), Portuguese, Italian.
_FOLDER_PLURALS = (
    r"(?:sub)?(?:folders|directories|dirs)"
    r"|(?:sub)?(?:carpetas|directorios|dossiers|r[ée]pertoires|verzeichnisse|unterordner|pastas|diret[óo]rios|cartelle)"
)
# Folders counted: the plural only ("How many files are in the tests folder?" counts files, as does
# "¿Cuántos archivos hay en la carpeta docs?").
_FOLDERS_ASKED = re.compile(rf"\b(?:{_FOLDER_PLURALS})\b", re.IGNORECASE)
#: A folder named in one word, singular or plural, in those languages: an answer that says it counted
#: folders too ("12 files and folders", "including one directory", "11 archivos y una carpeta").
FOLDER_WORD = re.compile(
    rf"\b(?:{_FOLDER_PLURALS}|(?:sub)?(?:folder|directory|dir)"
    r"|carpeta|directorio|dossier|r[ée]pertoire|ordner|verzeichnis|pasta|diret[óo]rio|cartella)\b",
    re.IGNORECASE,
)


_ARRAY_SCAN = 200_000  # characters of a result parsed as JSON, at most: a count is asked of small results


def listed_entries(result: str) -> list[str] | None:
    """The entries of a listing result, as it names them (``docs/``, ``README.md``); ``None`` when the
    result is no listing (see the module docstring)."""
    entries: list[str] = []
    for raw in result.splitlines():
        line = raw.strip()
        if not line:
            continue
        bullet = _BULLET.fullmatch(line)
        if bullet is not None:
            entries.append(bullet.group(1).strip(QUOTES))
        elif not _NOTE.fullmatch(line):
            return None
    return entries or None


def counts_held(
    result: str, asked: str = "", *, files_only: bool = False
) -> tuple[frozenset[int], str] | None:
    """The counts a count question may be answered with from ``result``, and how to say them; ``None`` when
    the result does not say how many things it holds (no listing, or one cut short; no JSON array).

    A listing's counts are every entry, its files and its folders, and each kind of file's; the request
    ``asked``, when it names one kind ("How many Python files", "how many .md files", "how many folders"),
    narrows them to that kind's. ``files_only``: see :func:`listing_counts`.
    """
    entries = whole_listing(result)
    if entries is not None:
        return listing_counts(entries, asked, files_only=files_only)
    items = _json_array(result)
    if items is None:
        return None
    return frozenset({items}), f"{items} {plural(items, 'item', 'items')}"


def listing_counts(entries: list[str], asked: str, *, files_only: bool = False) -> tuple[frozenset[int], str]:
    """The counts ``entries`` (a listing's) may be answered with when ``asked``, and how to say them.

    Asked for files of no kind, the files are counted, or every entry taken loosely for one (an answer
    that says "12 files" of what its own text calls "files and folders"); ``files_only`` holds the count
    to the files alone where folders are listed too, for an answer that does not say it counted folders.
    """
    folders = sum(e.endswith("/") for e in entries)
    files = len(entries) - folders
    kinds = Counter(e.rsplit(".", 1)[1].lower() for e in entries if "." in e.strip(".") and e[-1] != "/")
    named = _kind_asked(asked, kinds)
    if named is not None and named not in ("folders", "files"):
        # Asked how many Python files src/ holds, the 1.5B model answered 14, its count of folders,
        # and the listing's other counts let it pass.
        extensions = FILE_KINDS.get(named, (named,))
        count = sum(kinds[e] for e in extensions)
        return frozenset({count}), f"{count} {plural(count, 'file', 'files')} ending in .{extensions[0]}"
    if named == "folders":
        return frozenset({folders}), f"{folders} {plural(folders, 'folder', 'folders')}"
    both = f"{files} {plural(files, 'file', 'files')} and {folders} {plural(folders, 'folder', 'folders')}"
    said = f"{len(entries)} {plural(len(entries), 'entry', 'entries')}"
    if folders and files:
        said += f": {both}"
    if named == "files":  # the files, or every entry taken loosely for one; never the folders alone
        # Asked how many files docs/ held (11 files and a folder), the 1.5B model answered "There are
        # 12 entries in the docs folder.": true of the listing, and no answer to the question. Told
        # "12 entries: 11 files and 1 folder", it answered 12 entries again: the files come first.
        loose = {files} if files_only and folders else {files, len(entries)}
        if folders:
            said = f"{both} ({len(entries)} entries in all)"
        return frozenset(loose - ({0} if entries else set())), said
    # With no kind named ("How many Python scripts are in src?") one may still be counted: each
    # extension's count stands.
    counts = {len(entries), files, folders, *kinds.values()}
    return frozenset(counts - ({0} if entries else set())), said


def asked_kind(asked: str) -> str | None:
    """The one kind of entry a count request names, as :func:`listing_counts` reads it with no listing's
    extensions to hand: a language ("python"), a dotted extension ("md"), ``"folders"`` or ``"files"``;
    ``None`` for none, or more than one."""
    return _kind_asked(asked, ())


def _kind_asked(asked: str, extensions: Container[str]) -> str | None:
    """The one kind of entry a count request names: a language's name as in ``FILE_KINDS``, an extension,
    ``"folders"``, or ``"files"`` of no kind; ``None`` for none, or more than one."""
    named: set[str] = set()
    for match in _KIND_ASKED.finditer(asked):
        language, dotted, bare = match.groups()
        if language or dotted:
            named.add((language or dotted).lower())
        elif bare.lower() in extensions:
            named.add(bare.lower())
    named |= {m.group(1).lower() for m in _LANGUAGE_NAMED.finditer(asked)}
    folders, files = _FOLDERS_ASKED.search(asked), FILE_WORD.search(asked)
    if not named and (folders is None) != (files is None):
        named.add("folders" if folders else "files")
    return named.pop() if len(named) == 1 else None


def plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def whole_listing(result: str) -> list[str] | None:
    # A note with a number in it may say the list was cut short ("the first 100 of 3,412"): no count
    # then. One without ("hidden entries are not shown") leaves the entries shown the ones counted.
    entries = listed_entries(result)
    if entries is None or any(
        _NOTE.fullmatch(line.strip()) and any(c.isdigit() for c in line) for line in result.splitlines()
    ):
        return None
    return entries


def _json_array(result: str) -> int | None:
    text = result.strip()
    if not text.startswith("[") or len(text) > _ARRAY_SCAN:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return len(value) if isinstance(value, list) else None


def stated_numbers(text: str) -> set[int]:
    """The whole numbers ``text`` states, in digits ("1,024") or in words up to twenty."""
    found: set[int] = set()
    for match in _NUMBER.finditer(text):
        digits, word = match.group(1), match.group(2)
        found.add(int(digits.replace(",", "")) if digits else NUMBER_WORDS[word.lower()])
    return found


def line_counts(result: str) -> tuple[frozenset[int], str]:
    """The counts a question about ``result``'s lines may be answered with ("How many lines does poem.txt
    have?"): its lines, those not blank, and every number it states itself (a tool that counted, as
    ``wc -l`` does, or a note saying how many lines a file holds of which some were shown); and how to say
    the first two."""
    lines = result.splitlines()
    filled = sum(bool(line.strip()) for line in lines)
    said = f"{len(lines)} {plural(len(lines), 'line', 'lines')}"
    if filled != len(lines):
        said += f", {filled} of them not blank"
    return frozenset({len(lines), filled} | stated_numbers(result)), said


def sized_values(listing: str, *, lines: bool) -> dict[str, int]:
    """The files of a listing that gives their sizes, each with its bytes (or its lines, where ``lines``
    and the listing gives them): ``- core.py (2,053 bytes, 170 lines)``."""
    values: dict[str, int] = {}
    for match in _SIZED_ENTRY.finditer(listing):
        value = match.group(3) if lines else match.group(2)
        if value is not None:
            values[match.group(1)] = int(value.replace(",", ""))
    return values


def folder_counts(listing: str) -> dict[str, tuple[int, int]]:
    """The folders of a listing that says what each holds directly, each with its files and its folders:
    ``- cli/ (folder: 22 files, 1 folder)`` is ``{"cli/": (22, 1)}``, ``(folder: empty)`` ``(0, 0)``. A
    folder counted only in part ("at least 10,000 entries") is left out."""
    found: dict[str, tuple[int, int]] = {}
    for match in _FOLDER_ENTRY.finditer(listing):
        held = match.group(2)
        if held == "empty":
            found[match.group(1)] = (0, 0)
            continue
        counts = {"file": 0, "folder": 0}
        for part in held.split(", "):
            said = _HELD.match(part)
            if said is None:
                break
            counts[said.group(2).rstrip("s")] = int(said.group(1).replace(",", ""))
        else:
            found[match.group(1)] = (counts["file"], counts["folder"])
    return found


def folder_holds(held: tuple[int, int], kind: str) -> int:
    """What a folder holding ``held`` (its files, its folders; :func:`folder_counts`) holds of ``kind``:
    ``"files"``, ``"folders"``, or ``"entries"`` (both)."""
    files, folders = held
    return files if kind == "files" else folders if kind == "folders" else files + folders
