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

- a file whose name is only ever a file's (README, CHANGELOG, Makefile, Dockerfile) at the top of the
  folder: its name alone, right after "the", "this", "our" or the like ("What does the README say?", "¿Qué
  dice el README?"); not after "a" ("How do I write a good README?").

More than three paths for one request means the words are common ones, and nothing is named. The words
around a name are read in English and in the languages the bundled model is most often asked in after it
(Spanish, French, German, Portuguese, Italian), as ``steering/asked.py`` reads them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import pairwise

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


# Names no plain word shares: said alone after a determiner, they are the file of that name.
_OWN_NAMES = frozenset({"readme", "changelog", "makefile", "dockerfile"})
# "the", "this", "our", "its" and their like in the six languages: "the README" is this folder's.
_DETERMINERS = frozenset(
    {
        *("the", "this", "our", "my", "its", "your"),
        *("el", "este", "ese", "nuestro", "mi", "su", "tu"),  # Spanish
        *("le", "ce", "cet", "notre", "mon", "son", "ton", "du", "votre"),  # French
        *("der", "die", "das", "dem", "den", "des", "dieses", "diese", "unser", "unsere", "mein", "meine"),
        *("o", "deste", "nosso", "meu", "seu", "teu"),  # Portuguese ("do" is also English)
        *("il", "lo", "del", "questo", "nostro", "mio", "suo", "tuo"),  # Italian
    }
)


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


def _own_name(path: str) -> str:
    """A top-level file's name, lower case, without its extension: ``README.md`` is ``readme``."""
    return path.lower().partition(".")[0]


def described_paths(request: str, files: Iterable[str], folders: Collection[str] = ()) -> list[str]:
    """The listed ``folders`` and ``files`` (paths relative to the working folder, ``/``-separated) that
    ``request`` names in words, folders first; none when more than three are."""
    words = _words(request)
    if not words:
        return []
    said = set(words)
    placed = {m.group(1).lower() for m in _PLACED.finditer(request)}
    found = _folders_named(words, folders, placed)
    own = {w for before, w in pairwise(words) if w in _OWN_NAMES and before in _DETERMINERS}
    for path in files:
        if _file_named(said, path) or ("/" not in path and _own_name(path) in own):
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
# library only with "this", "our" or "my" ("the package" is often one the request goes on to name). The
# same in the five other languages; "un proyecto", "a project", is any project.
_THE_PROJECT = re.compile(
    r"\b(?:(?:this|the|our|my)\s+(?:project|repo|repository|codebase|code\s+base)"
    r"|(?:this|our|my)\s+(?:package|library)"
    r"|(?:este|el|del|nuestro|mi)\s+(?:proyecto|repositorio|repo)|(?:este|nuestro|mi)\s+paquete"
    r"|(?:esta|nuestra|mi)\s+(?:librer[ií]a|biblioteca)"  # Spanish
    r"|(?:ce|le|du|notre|mon)\s+(?:projet|d[ée]p[oô]t|repo)|(?:ce|notre|mon)\s+paquet"
    r"|(?:cette|notre|ma)\s+biblioth[èe]que"  # French
    r"|(?:dieses|diesem|das|dem|des|unser|unserem|mein|meinem|im)\s+(?:projekts?|repos?|repository)"
    r"|(?:dieses|diesem|unser|mein)\s+paket|(?:diese|dieser|unsere|meine)\s+bibliothek"  # German
    r"|(?:este|deste|neste|o|do|no|nosso|meu)\s+(?:projeto|reposit[óo]rio|repo)"
    r"|(?:este|deste|nosso|meu)\s+pacote|(?:esta|desta|nossa|minha)\s+biblioteca"  # Portuguese
    r"|(?:questo|il|del|nel|nostro|mio)\s+(?:progetto|repository|repo)"
    r"|(?:questo|nostro|mio)\s+pacchetto|(?:questa|nostra|mia)\s+libreria"  # Italian
    r")\b",
    re.IGNORECASE,
)


def names_the_project(request: str) -> bool:
    """Whether ``request`` speaks of the project in the working folder as a whole ("What does this project
    do?", "What license does the repo use?"). Its files answer it: the 1.5B model's kinds gate filed both of
    those under general knowledge, and the answers were made up ("a web application that provides
    information"; "the MIT License", a guess). Gate examples that said otherwise cost two other requests
    of the tuning half (bench/small_model_tools.py). Linear in the request."""
    return _THE_PROJECT.search(request) is not None


# "How do I run the tests?", "how to install this project": asked how to do something with the project;
# in the five other languages, their "how" ("cómo", "comment", "wie", "como", "come") with the project or
# its tests spoken of, which readme_for_how also asks.
_ASKS_HOW = re.compile(
    r"\bhow\s+(?:do|can|should|would|could|to)\b|\bc[oó]mo\b|\bcomment\b|\bwie\b|\bcome\b",
    re.IGNORECASE,
)
_THE_TESTS = re.compile(
    r"\b(?:the|its|our|my)\s+(?:tests?|test\s+suite|unit\s+tests)\b"
    r"|\b(?:las|sus|nuestras|mis)\s+pruebas\b|\b(?:los|sus)\s+tests\b"  # Spanish
    r"|\b(?:les|ses|nos|mes)\s+tests\b"  # French
    r"|\b(?:die|seine|unsere|meine)\s+tests\b"  # German
    r"|\b(?:os|seus|nossos|meus)\s+testes\b"  # Portuguese
    r"|\bi\s+(?:suoi|nostri|miei)\s+test\b",  # Italian
    re.IGNORECASE,
)
# Italian's plain "i test" is English's "I test" ("How should I test this?"): only with Italian's "come".
_ITALIAN_TESTS = re.compile(r"\bi\s+test\b", re.IGNORECASE)
_ITALIAN_HOW = re.compile(r"\bcome\b", re.IGNORECASE)
_README = re.compile(r"readme(?:\.[a-z]+)?", re.IGNORECASE)


def readme_for_how(request: str, files: Iterable[str]) -> list[str]:
    """The working folder's README when ``request`` asks how to do something with the project ("How do I
    run the tests of this project?", "How can I install this package?"): a project says that in its README.

    Asked "How do I run the tests of this project?", the 1.5B model listed tests/ and answered "you can use
    the list_dir function with the path tests"; the README it never read says which command runs them.
    Only with the project or its tests spoken of: "How do I delete a folder in Linux?" is no question about
    the folder's files. Linear in the request and the listing."""
    tests = _THE_TESTS.search(request) or (_ITALIAN_HOW.search(request) and _ITALIAN_TESTS.search(request))
    if not _ASKS_HOW.search(request) or not (names_the_project(request) or tests):
        return []
    return [path for path in files if "/" not in path and _README.fullmatch(path)][:1]
