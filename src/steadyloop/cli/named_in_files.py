"""Which of the user's files define a name a request mentions: "the default of max_workers in build_site"
is about the file that defines ``build_site``, and a small model otherwise answers it from nothing.

The command hands :func:`files_defining` to its tool routing (``ToolRouting.named_in_files``): a request
that names a function, class or setting defined in a file of the folder is then first a read of that
file. The reading of a request and of a file is sans I/O (:func:`code_names`, :func:`defines`); only
:func:`files_defining` reads the folder, bounded in files and bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from .definitions import declarations

__all__ = [
    "asks_where_defined",
    "code_names",
    "declares",
    "defines",
    "file_head",
    "files_declaring",
    "files_defining",
    "settings_asked",
]

#: Names shorter than this are too common to mean one definition.
_SHORTEST = 4
#: Of each file, the bytes read; a file's definitions are near its top, and a huge file is rarely code.
_FILE_BYTES = 256 * 1024
#: The most files a request is said to be about: more is a common word, not a name.
_MOST_FILES = 3

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A word is a name of code when it is written as one: snake_case, camelCase, called ("slugify()"), or
# right after a word that says it is a name ("the function slugify").
_SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]")
_CAMEL = re.compile(r"[a-z][A-Z]")
_SAYS_NAME = frozenset(
    {"function", "method", "class", "variable", "setting", "constant", "parameter", "field"}
)
_ARTICLES = frozenset({"the", "a", "an", "its", "our", "my", "this", "that"})


def code_names(request: str) -> list[str]:
    """The names of code a request mentions, in order, each once. Linear in the request's length."""
    out: list[str] = []
    words = [(m.group(), request.startswith("(", m.end())) for m in _WORD.finditer(request)]
    for i, (word, called) in enumerate(words):
        previous = words[i - 1][0].lower() if i else ""
        # "the echo function", "the Context class": the word before says it as much as the word after
        following = words[i + 1][0].lower() if i + 1 < len(words) else ""
        # (and "the Context class defined": the word after such a pair is none)
        after = previous in _SAYS_NAME and not (i >= 2 and words[i - 2][0] in out)
        said = after or (following in _SAYS_NAME and previous in _ARTICLES)
        named = _SNAKE.search(word) or _CAMEL.search(word) or called or said
        if named and len(word) >= _SHORTEST and word not in out and word.lower() not in _SAYS_NAME:
            out.append(word)
    return out


# A project's settings a request asks of in words, by the keys that declare them: "Which Python version does
# this project require?" is setup.cfg's python_requires, setup.py's python_requires=, pyproject.toml's
# requires-python or PKG-INFO's Requires-Python. Asked it, the 1.5B model guessed a requirements.txt that
# was not there, or read pyproject.toml and answered its pytest minversion.
_PYTHON_VERSION_KEYS = ("python_requires", "requires-python", "Requires-Python")
_VERSION_WORDS = frozenset({"version", "versions"})
_REQUIRE_WORDS = frozenset(
    {"require", "requires", "required", "need", "needs", "needed", "support", "supports", "supported"}
    | {"minimum", "compatible", "run", "runs", "work", "works"}
)
_DEPENDENCY_KEYS = ("install_requires", "dependencies", "Requires-Dist")
_DEPENDENCY_WORDS = frozenset({"dependencies", "dependency", "depend", "depends", "requirements"})
_PROJECT_WORDS = frozenset({"project", "package", "library", "repo", "repository", "codebase"})


def settings_asked(request: str) -> list[str]:
    """The keys of the project settings ``request`` asks of in words: the Python version it requires, what
    it depends on. Linear in the request's length."""
    words = {word.lower() for word in _WORD.findall(request)}
    if "python" in words and words & _VERSION_WORDS and words & _REQUIRE_WORDS:
        return list(_PYTHON_VERSION_KEYS)
    if words & _DEPENDENCY_WORDS and words & _PROJECT_WORDS:
        return list(_DEPENDENCY_KEYS)
    return []


def _definition(name: str) -> re.Pattern[str]:
    # Blanks, not \s: a pattern anchored at line starts that let \s run over newlines would try every
    # following line from every line, quadratic in a file of empty lines.
    n = re.escape(name)
    return re.compile(
        rf"\b(?:def|class|function|fn|func|const|let|var|type|struct|interface)[ \t]+{n}\b"  # a definition
        rf"|(?:^|[(,])[ \t]*{n}[ \t]*(?::[^=\n]*)?=(?!=)"  # an assignment, a parameter's default
        rf"|(?:^|[{{,])[ \t]*[\"']?{n}[\"']?[ \t]*(?::|=(?!=))",  # a key of TOML, YAML or JSON
        re.MULTILINE,
    )


def defines(text: str, name: str) -> bool:
    """Whether ``text`` defines ``name``: a function or class of that name, an assignment or a parameter's
    default, or a key of a configuration file."""
    return _definition(name).search(text) is not None


def files_defining(root: Path, listed: Sequence[str]) -> Callable[[str], list[str]]:
    """The reading ``ToolRouting.named_in_files`` takes: for a request, the files of ``listed`` (paths
    under ``root``, as the command's tools list them) that define a name it mentions, at most three."""

    def named_in_files(request: str) -> list[str]:
        names = [*code_names(request), *settings_asked(request)]
        if not names:
            return []
        found: list[str] = []
        for path in listed:
            text = file_head(root / path)
            if text is not None and any(defines(text, name) for name in names):
                found.append(path)
                if len(found) > _MOST_FILES:
                    return []
        return found

    return named_in_files


def file_head(path: Path) -> str | None:
    """The first bytes of a text file, or ``None`` for a folder, a binary file or one that cannot be read."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_FILE_BYTES)
    except OSError:
        return None
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


# "Where is the echo function defined?", "Which file declares the Context class?": asked for the file that
# defines a name. (Bounded gap: linear in the request.)
_WHERE_DEFINED = re.compile(
    r"\bwhere\b[^?.!]{0,80}?\b(?:defined|declared|implemented)\b"
    r"|\bwhich\s+(?:files?|modules?)\s+(?:defines?|declares?|implements?|has|holds|contains)\b",
    re.IGNORECASE,
)
_CODE_SUFFIXES = frozenset(
    {".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".rb", ".java", ".kt"}
    | {".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".swift", ".php", ".scala", ".lua", ".ex", ".exs"}
)
#: Of a project's code, the most bytes read to find what declares a name.
_SCAN_BYTES = 16 * 1024 * 1024
_TEST_PART = re.compile(r"(?:^|/)(?:tests?|testing|spec)(?:/|$)|(?:^|/)test_[^/]*$|_test\.\w+$")


def asks_where_defined(request: str) -> bool:
    """Whether ``request`` asks which file defines something ("Where is the echo function defined?")."""
    return _WHERE_DEFINED.search(request) is not None


def declares(text: str, name: str) -> int:
    """How ``text`` declares a function, class, type or constant called ``name`` (``definitions.py``): 2
    at the top level, 1 only indented (a method), 0 not at all. Not by an assignment or a key: asked
    where ``command`` is defined, click's files assign ``command =`` in a dozen places; its one function
    is in decorators.py, and core.py has a method of that name."""
    best = 0
    for declared, top_level in declarations(text):
        if declared == name:
            if top_level:
                return 2
            best = 1
    return best


def files_declaring(root: Path, files: Sequence[str]) -> Callable[[str], list[str]]:
    """For a request that asks where a name of code is defined, the code files of ``files`` that declare
    it, at most three: those outside the tests when any is. Reads at most :data:`_SCAN_BYTES` in all.

    Asked "Where is the command function defined?" in click's source, the 1.5B model listed the folder and
    answered "in the tools section of the XML file"; the schemas list no file of so big a project, so the
    files that define a name read in :func:`files_defining` were the top level's only."""
    code = [p for p in files if Path(p).suffix.lower() in _CODE_SUFFIXES]

    def declaring(request: str) -> list[str]:
        if not asks_where_defined(request):
            return []
        names = code_names(request)
        if not names:
            return []
        found: list[tuple[str, int]] = []
        read = 0
        for path in code:
            if read >= _SCAN_BYTES:
                break
            text = file_head(root / path)
            if text is None:
                continue
            read += len(text)
            how = max(declares(text, name) for name in names)
            if how:
                found.append((path, how))
        # The best kind of declaration there is: outside the tests, at the top level, not a stub (.pyi).
        for keep in (
            lambda p, _h: not _TEST_PART.search(p),
            lambda _p, h: h == 2,
            lambda p, _h: not p.endswith(".pyi"),
        ):
            found = [f for f in found if keep(*f)] or found
        return [p for p, _ in found] if len(found) <= _MOST_FILES else []

    return declaring
