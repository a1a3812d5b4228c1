"""Which of the user's files and folders a request names in words rather than by path: "the tests folder"
is ``tests``, "the site config" is ``config/site.toml``. A small model given such a request searches the
files' text for one of its words, or answers from nothing, instead of looking at what was named.

The command hands these paths to its tool routing with the files that define a name the request mentions
(``ToolRouting.named_in_files``), so the first step looks at them. Sans I/O: the request and the listed
paths in, paths out, in time linear in the request and the listing.

What counts as naming, kept narrow because a wrong hit forces a call:

- a folder: its name right before or after "folder" or "directory" ("the tests folder", "the directory
  docs"); "this", "current" or "working" there is the working folder, listed as ``.``;
- a file: its name without the extension, written as a word of its own, together with another word of its
  path (a folder it is in, its extension) or a word for its kind ("config" or "settings" for a TOML, YAML,
  JSON or INI file; "python", "module" or "script" for Python; "doc" or "page" for text). A name alone
  ("build") is too often a plain word.

More than three paths for one request means the words are common ones, and nothing is named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence

__all__ = [
    "described_paths",
    "names_the_project",
    "paths_described_by",
    "readme_for_how",
    "written_folders",
]

_MOST = 3
_SHORTEST = 3  # a name shorter than this ("a", "io") is too common to name one path
_WORD = re.compile(r"[a-z0-9_]+")
# A path the request writes out: name/name, a leading ./ and a trailing slash allowed.
_WRITTEN_PATH = re.compile(r"(?<![\w./-])(?:\./)?[\w-][\w.-]*(?:/[\w.-]+)+/?")
_MOST_WRITTEN = 8
_FOLDER_WORDS = frozenset({"folder", "folders", "directory", "directories", "dir", "subfolder"})
_WORKING_FOLDER = frozenset({"this", "current", "working"})
# A name after "in", "inside", "under" or "within", not the start of a path written out ("in src/app"):
# "Which file in httpx has the most lines?" is about the folder httpx; asked it, the 1.5B model searched
# httpx for ".*" instead of listing it.
_PLACED = re.compile(r"\b(?:in|inside|under|within)\s+(?:the\s+)?([\w-]+)(?![\w/.-])", re.IGNORECASE)
_KIND_WORDS: dict[str, frozenset[str]] = {
    "config": frozenset({"toml", "yaml", "yml", "json", "ini", "cfg", "conf"}),
    "configuration": frozenset({"toml", "yaml", "yml", "json", "ini", "cfg", "conf"}),
    "settings": frozenset({"toml", "yaml", "yml", "json", "ini", "cfg", "conf"}),
    "python": frozenset({"py"}),
    "module": frozenset({"py"}),
    "script": frozenset({"py", "sh"}),
    "doc": frozenset({"md", "rst", "txt"}),
    "docs": frozenset({"md", "rst", "txt"}),
    "page": frozenset({"md", "rst", "txt"}),
}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _folders_named(words: Sequence[str], folders: Collection[str], placed: Collection[str] = ()) -> list[str]:
    around: set[str] = set()
    for i, word in enumerate(words):
        if word in _FOLDER_WORDS:
            if i > 0:
                around.add(words[i - 1])
            if i + 1 < len(words):
                around.add(words[i + 1])
    out: list[str] = []
    if not around.isdisjoint(_WORKING_FOLDER) and "." in folders:
        out.append(".")  # "this folder": the working folder, which the tools list as "."
    for folder in folders:
        name = folder.rstrip("/").rsplit("/", 1)[-1].lower()
        if len(name) >= _SHORTEST and (name in around or name in placed) and name not in _FOLDER_WORDS:
            out.append(folder)
    return out


def _file_named(said: set[str], path: str) -> bool:
    parts = path.lower().split("/")
    stem, dot, extension = parts[-1].rpartition(".")
    if not dot or not stem:
        stem, extension = parts[-1], ""
    if len(stem) < _SHORTEST or stem not in said:
        return False
    companions = set(parts[:-1])
    if extension:
        companions.add(extension)
        companions |= {kind for kind, extensions in _KIND_WORDS.items() if extension in extensions}
    companions.discard(stem)
    return not said.isdisjoint(companions)


def described_paths(request: str, files: Iterable[str], folders: Collection[str] = ()) -> list[str]:
    """The listed ``folders`` and ``files`` (paths relative to the working folder, ``/``-separated) that
    ``request`` names in words, folders first; none when more than three are."""
    words = _words(request)
    if not words:
        return []
    said = set(words)
    placed = {m.group(1).lower() for m in _PLACED.finditer(request)}
    found = _folders_named(words, folders, placed)
    for path in files:
        if _file_named(said, path):
            found.append(path)
        if len(found) > _MOST:
            return []
    return found if len(found) <= _MOST else []


def paths_described_by(files: Sequence[str], folders: Sequence[str]) -> Callable[[str], list[str]]:
    """:func:`described_paths` over one listing, as ``ToolRouting.named_in_files`` takes it."""

    def named(request: str) -> list[str]:
        return described_paths(request, files, folders)

    return named


def written_folders(request: str) -> list[str]:
    """The nested paths ``request`` writes out that could be folders (``src/steadyloop/cli``; not a file
    name with an extension, not a URL's: a word right after a slash is no path's start), in order, without a leading ``./`` or a trailing slash; none past
    eight. Which of them are folders is the caller's to check: listed folders stop a few levels down, and
    a small model asked about a deeper one lists the nearest it may (``tools.listed_folders``)."""
    found: list[str] = []
    for match in _WRITTEN_PATH.finditer(request):
        written = match.group(0).removeprefix("./")
        if ".." in written.split("/"):
            continue
        path = written.rstrip("/.")  # a sentence's full stop, a trailing slash or "/."
        if "/" not in path or "." in path.rsplit("/", 1)[-1] or path in found:
            continue
        found.append(path)
        if len(found) > _MOST_WRITTEN:
            return []
    return found


# "this project", "the repo", "our codebase", "my package": the folder's project as a whole. A package or
# library only with "this", "our" or "my" ("the package" is often one the request goes on to name).
_THE_PROJECT = re.compile(
    r"\b(?:(?:this|the|our|my)\s+(?:project|repo|repository|codebase|code\s+base)"
    r"|(?:this|our|my)\s+(?:package|library))\b",
    re.IGNORECASE,
)


def names_the_project(request: str) -> bool:
    """Whether ``request`` speaks of the project in the working folder as a whole ("What does this project
    do?", "What license does the repo use?"). Its files answer it: the 1.5B model's kinds gate filed both of
    those under general knowledge, and the answers were made up ("a web application that provides
    information"; "the MIT License", a guess). Gate examples that said otherwise cost two other requests
    of the tuning half (bench/small_model_tools.py). Linear in the request."""
    return _THE_PROJECT.search(request) is not None


# "How do I run the tests?", "how to install this project": asked how to do something with the project.
_ASKS_HOW = re.compile(r"\bhow\s+(?:do|can|should|would|could|to)\b", re.IGNORECASE)
_THE_TESTS = re.compile(r"\b(?:the|its|our|my)\s+(?:tests?|test\s+suite|unit\s+tests)\b", re.IGNORECASE)
_README = re.compile(r"readme(?:\.[a-z]+)?", re.IGNORECASE)


def readme_for_how(request: str, files: Iterable[str]) -> list[str]:
    """The working folder's README when ``request`` asks how to do something with the project ("How do I
    run the tests of this project?", "How can I install this package?"): a project says that in its README.

    Asked "How do I run the tests of this project?", the 1.5B model listed tests/ and answered "you can use
    the list_dir function with the path tests"; the README it never read says which command runs them.
    Only with the project or its tests spoken of: "How do I delete a folder in Linux?" is no question about
    the folder's files. Linear in the request and the listing."""
    if not _ASKS_HOW.search(request) or not (names_the_project(request) or _THE_TESTS.search(request)):
        return []
    return [path for path in files if "/" not in path and _README.fullmatch(path)][:1]
