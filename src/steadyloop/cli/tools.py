"""The CLI's own tools: read, list, search and glob files under the working directory, and, behind an
approval, write and edit files and run shell commands there.

Every path is resolved (symlinks followed) before use and refused when it lands outside the root, so a
link pointing out of the working directory is as out of reach as ``../``. A tool fails by raising: the
message is what the model reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from ..tools.definition import ResourceClaim, Tool, ToolContext, tool
from .group_watch import GroupWatch

__all__ = ["COMPACT_WINDOW", "default_tools", "file_tools", "shell_tool", "system_prompt"]

_READ_LIMIT = 400  # lines one read returns unless asked otherwise
_MAX_READ_BYTES = 256_000
_MAX_LISTED = 500
_MAX_MATCHES = 100
_MAX_LINE = 240
_MAX_SHELL_OUTPUT = 16_000
# No absolute path: a small model copies it into every path argument, and the tools need none. No "answer
# briefly": with it, the 1.5B model answered "Translate 'good morning' into Spanish." with "Good morning!"
# (and "thank you" into French with "Thank you.") at temperature 0; asked for full sentences, it
# translates. The opening stays: with the assistant named first and the terminal after, the same model
# listed docs/ for "Can you show me this directory's contents?" every time.
_SYSTEM = (
    "You are a helpful assistant in a terminal, working in a folder of the user's. Use the tools when a "
    "question is about the files here; answer other questions directly, in full sentences. When a tool's "
    "result is what the user asked for, give it in full."
)
#: A context window this small (tokens) gets the compact tool set: the file tools a small model can tell
#: apart, without edit_file, glob and run_shell, which overlap them, in about half the prompt.
COMPACT_WINDOW = 8192
_LISTED_FOLDERS = 40  # the most folders list_dir's schema names; past this the path is free text
_LISTED_FILES = 60
_QUOTES = "\"'`"
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"})

# Reads share the file system; a write has it alone, so a read never sees a file half written.
_READ = (ResourceClaim("fs", "read"),)
_WRITE = (ResourceClaim("fs", "write"),)


class _Root:
    """The directory the tools may reach, and the check every path goes through."""

    def __init__(self, root: Path) -> None:
        self.path = root.resolve()

    def inside(self, given: str) -> Path:
        target = (self.path / given).resolve()
        if not target.exists():
            # A small model quotes the path it means ('"."', '".".', "'notes.txt'") or writes it from a root
            # ('/notes.txt'); what it meant is read only when what it wrote names nothing.
            unquoted = _unquoted(given)
            if unquoted != given and (self.path / unquoted).resolve().exists():
                target = (self.path / unquoted).resolve()
        if target != self.path and self.path not in target.parents:
            raise PermissionError(
                f"{given!r} is outside the working directory {self.path}; only paths inside it"
            )
        return target

    def show(self, path: Path) -> str:
        return "." if path == self.path else str(path.relative_to(self.path))


def _unquoted(given: str) -> str:
    """A path as a small model meant it: without the quotes around it (and a sentence's full stop after
    them: '".".' is '.'), and from the working directory when written from a root ('/notes.txt')."""
    text = given.strip()
    if text.endswith(".") and text[:-1].endswith(tuple(_QUOTES)):
        text = text[:-1]
    return text.strip(_QUOTES).lstrip("/") or "."


def _text(path: Path, shown: str) -> str:
    if not path.is_file():
        raise FileNotFoundError(f"{shown}: no such file" + (" (it is a directory)" if path.is_dir() else ""))
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ValueError(f"{shown} is a binary file")
    return data.decode("utf-8", errors="replace")


def _files(root: _Root, start: Path) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for folder, dirs, names in os.walk(start):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(folder) / name
            # A link may point anywhere; only what resolves inside the root is read.
            try:
                resolved = root.inside(str(path.relative_to(root.path)))
            except PermissionError:
                continue
            yield resolved


def file_tools(root: Path, *, writable: bool = True, paged: bool = True) -> list[Tool]:
    """The file tools over ``root``: reads always, ``write_file`` and ``edit_file`` when ``writable``.

    Args:
        paged: ``read_file`` takes the first line and the number of lines to read, and numbers the lines;
            without, it reads a file from its start, as it is (a small model's tool: see
            :func:`default_tools`).
    """
    where = _Root(root)

    def read(path: str, offset: int, limit: int) -> str:
        target = where.inside(path)
        lines = _text(target, path).splitlines()
        start = max(offset, 1) - 1
        chosen = lines[start : start + max(limit, 1)]
        if paged:
            out = [f"{start + i + 1:6}  {line[:2000]}" for i, line in enumerate(chosen)]
        else:  # the 1.5B model read "     1  Lisbon" as 1 degree in Lisbon; nothing here edits by line
            out = [line[:2000] for line in chosen]
        text = "\n".join(out)
        if len(text) > _MAX_READ_BYTES:
            text = text[:_MAX_READ_BYTES] + "\n[cut: read fewer lines]"
        if start + len(chosen) < len(lines):
            after = start + len(chosen)
            more = f"read again with offset={after + 1}" if paged else "search_text finds lines in it"
            text += f"\n[{len(lines) - after} more lines: {more}]"
        return text or "(empty file)"

    @tool(effect="read", claims=_READ)
    def read_file(path: str, offset: int = 1, limit: int = _READ_LIMIT) -> str:
        """Read a text file, with line numbers.

        Args:
            path: the file's path.
            offset: the first line to read.
            limit: the most lines to read.
        """
        return read(path, offset, limit)

    if not paged:
        # Asked for "the second item in todo.txt", the 1.5B model read line 2 alone (offset 2, limit 1)
        # and answered from the call's arguments; a small file read whole holds the item and its
        # neighbours, and the schema is shorter.
        @tool(name="read_file", effect="read", claims=_READ)
        def read_whole(path: str) -> str:
            """Read a text file.

            Args:
                path: the file's path.
            """
            return read(path, 1, _READ_LIMIT)

        read_file = read_whole

    @tool(effect="read", claims=_READ)
    def list_dir(path: str = ".") -> str:
        """List the files and folders in a folder; folders end in /.

        Args:
            path: the folder's path; leave it out for the working directory.
        """
        target = where.inside(path)
        if not target.is_dir():
            raise NotADirectoryError(f"{path}: not a folder")
        every = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        # Hidden entries (.git, .venv, caches) last and by count only, as ls leaves them out: a small
        # model describing the folder described .ci/ and .mypy_cache/ first.
        entries = [p for p in every if not p.name.startswith(".")]
        # A bulleted list with each folder named as one: given bare lines, the 0.5B model read the first
        # line ("bench/") as the folder's name and answered about it (0 of 6 right at temperature 0; 6 of 6
        # with the bullets).
        shown = [f"- {p.name}/ (folder)" if p.is_dir() else f"- {p.name}" for p in entries[:_MAX_LISTED]]
        if len(entries) > _MAX_LISTED:
            shown.append(f"(and {len(entries) - _MAX_LISTED} more)")
        if len(every) > len(entries):
            # Said without a count: after "(and 7 hidden, ...)" the 1.5B model answered "What is in this
            # folder?" with a count of files, 3 times in 8 at temperature 0.2 (0 in 8 without the count).
            shown.append("(hidden entries, named with a leading dot, are not shown)")
        return "\n".join(shown) or "(empty folder)"

    @tool(effect="read", claims=_READ)
    def search_text(pattern: str, path: str = ".", glob: str | None = None) -> str:
        """Find which files contain a word or regular expression; answers file:line: text for each match.

        Args:
            pattern: the word or Python regular expression to look for.
            path: the file or folder to search.
            glob: only files whose names match this pattern, e.g. *.py.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        found: list[str] = []
        for file in _files(where, where.inside(path)):
            if glob and not file.match(glob):
                continue
            try:
                text = _text(file, where.show(file))
            except (ValueError, OSError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    found.append(f"{where.show(file)}:{number}: {line.strip()[:_MAX_LINE]}")
                    if len(found) >= _MAX_MATCHES:
                        return "\n".join([*found, f"[stopped at {_MAX_MATCHES} matches: narrow the search]"])
        return "\n".join(found) or "no matches"

    @tool(name="glob", effect="read", claims=_READ)
    def glob_files(pattern: str) -> str:
        """Find files by a name pattern, e.g. src/**/*.py.

        Args:
            pattern: the glob pattern.
        """
        if Path(pattern).is_absolute():
            raise PermissionError("give a pattern relative to the working directory")
        matches: list[str] = []
        for path in sorted(where.path.glob(pattern)):
            with contextlib.suppress(PermissionError):
                matches.append(where.show(where.inside(str(path.relative_to(where.path)))))
            if len(matches) >= _MAX_LISTED:
                matches.append("[more not shown: narrow the pattern]")
                break
        return "\n".join(matches) or "no files match"

    # No default in the schema: a small model shown 'Default: "."' copies the quotes into the path.
    tools = [read_file, _no_default(list_dir, "path"), search_text, glob_files]
    if not writable:
        return tools

    @tool(effect="mutate-reversible", claims=_WRITE, dedupe=False)
    def write_file(path: str, content: str) -> str:
        """Create a text file, or replace the one there.

        Args:
            path: the file's path.
            content: the whole text the file holds.
        """
        target = where.inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode())} bytes to {where.show(target)}"

    @tool(effect="mutate-reversible", claims=_WRITE, dedupe=False)
    def edit_file(path: str, old: str, new: str) -> str:
        """Replace one exact piece of text in a file.

        Args:
            path: the file's path.
            old: the text to replace; it must occur exactly once.
            new: what to put in its place.
        """
        target = where.inside(path)
        text = _text(target, path)
        count = text.count(old) if old else 0
        if count != 1:
            where_ = "does not occur" if count == 0 else f"occurs {count} times"
            raise ValueError(f"the old text {where_} in {path}; give a piece that occurs exactly once")
        target.write_text(text.replace(old, new, 1), encoding="utf-8")
        return f"edited {where.show(target)}"

    return [*tools, write_file, edit_file]


def shell_tool(root: Path, *, timeout: float = 120.0) -> Tool:
    """``run_shell``: a shell command in ``root``, its output capped, killed on timeout or cancel."""

    @tool(effect="destructive", claims="exclusive", dedupe=False)
    async def run_shell(command: str, context: ToolContext) -> str:
        """Run a shell command in the working directory; answers its exit code and output.

        Args:
            command: the command line, run by /bin/sh.
        """
        # Its own group, so killing it takes its children too; watched, so this process dying kills it.
        watch = await GroupWatch.start()
        try:
            process = await asyncio.create_subprocess_shell(
                command,
                cwd=root,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            await watch.watch(process.pid)
            return await _shell_answer(process, context, timeout)
        finally:
            await watch.release()

    return run_shell


async def _shell_answer(process: asyncio.subprocess.Process, context: ToolContext, limit_s: float) -> str:
    """The command's exit code and output; its group killed if it runs past ``limit_s`` or is cancelled."""
    reading = asyncio.ensure_future(process.communicate())
    cancelled = asyncio.ensure_future(context.cancelled.wait())
    try:
        done, _ = await asyncio.wait(
            {reading, cancelled}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        cancelled.cancel()
        if not reading.done():
            _kill(process)
            with contextlib.suppress(Exception):
                await reading
    if reading not in done:
        why = "it was cancelled" if context.cancelled.is_set() else f"it ran past {limit_s:.0f}s"
        raise TimeoutError(f"the command was killed: {why}")
    output = reading.result()[0].decode("utf-8", errors="replace")
    if len(output) > _MAX_SHELL_OUTPUT:
        output = output[:_MAX_SHELL_OUTPUT] + f"\n[cut: {len(output) - _MAX_SHELL_OUTPUT} more characters]"
    return f"exit code {process.returncode}\n{output}".rstrip()


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _no_default(tool: Tool, name: str) -> Tool:
    """``tool`` with its schema giving no default for ``name`` (the description says what leaving it out does)."""
    parameters = dict(tool.parameters)
    properties = dict(parameters.get("properties", {}))
    properties[name] = {k: v for k, v in properties[name].items() if k != "default"}
    parameters["properties"] = properties
    return replace(tool, parameters=parameters)


def _without(tool: Tool, name: str) -> Tool:
    """``tool`` with its schema leaving out the optional argument ``name``."""
    parameters = dict(tool.parameters)
    parameters["properties"] = {k: v for k, v in parameters.get("properties", {}).items() if k != name}
    if "required" in parameters:
        parameters["required"] = [r for r in parameters["required"] if r != name]
    return replace(tool, parameters=parameters)


def _choices(tool: Tool, name: str, values: list[str], description: str | None = None) -> Tool:
    """``tool`` with its schema holding ``name`` to ``values``, so a grammar server keeps the model to them."""
    parameters = dict(tool.parameters)
    properties = dict(parameters.get("properties", {}))
    properties[name] = {**properties[name], "enum": values}
    if description is not None:
        properties[name]["description"] = description
    parameters["properties"] = properties
    return replace(tool, parameters=parameters)


def _paths_here(root: Path, *, folders: bool, depth: int, cap: int) -> list[str] | None:
    """The folders (or files) within ``depth`` levels of ``root``, sorted; ``None`` past ``cap`` of them."""
    where = _Root(root)
    found: list[str] = ["."] if folders else []
    for folder, dirs, names in os.walk(where.path):
        here = Path(folder)
        level = len(here.relative_to(where.path).parts)
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
        if level >= depth:
            dirs[:] = []
        for name in dirs if folders else sorted(n for n in names if not n.startswith(".")):
            found.append(str((here / name).relative_to(where.path)))
            if len(found) > cap:
                return None
    return sorted(found)


def default_tools(root: Path, *, compact: bool = False) -> list[Tool]:
    """The tools ``run`` and ``chat`` give the model over ``root``: the file tools and the shell.

    Args:
        compact: for a small model (see :data:`COMPACT_WINDOW`): only ``read_file``, ``list_dir``,
            ``search_text`` and ``write_file``; ``search_text`` without a file-name pattern;
            ``read_file`` without a line range (from the file's start); and, in a small folder, the paths
            ``list_dir`` and ``read_file`` take are the ones that exist, listed in their schemas, and
            ``search_text`` searches all of it. A grammar server then holds the model to a real path: asked about "this folder", the 0.5B model otherwise writes
            '/path/to/folder', '".".' or an example it saw. The lists are taken when the tools are made.
    """
    tools = file_tools(root, paged=not compact)
    if not compact:
        return [*tools, shell_tool(root)]
    kept = [t for t in tools if t.name in ("read_file", "list_dir", "search_text", "write_file")]
    folders = _paths_here(root, folders=True, depth=2, cap=_LISTED_FOLDERS)
    files = _paths_here(root, folders=False, depth=3, cap=_LISTED_FILES)
    out: list[Tool] = []
    for each in kept:
        if each.name == "list_dir" and folders is not None:
            each = _choices(each, "path", folders, "the folder; . is the working directory itself.")
        elif each.name == "read_file" and files:
            each = _choices(each, "path", files)
        elif each.name == "search_text":
            # The 0.5B model filled the optional pattern with the description's own example, period and
            # all ('*.py.'), and the path with '.".' from its default: it searched nothing. The whole
            # folder, or one of its folders or files, and no name pattern.
            # In a small folder it searches all of it: asked to find which file mentions Alice, the 1.5B
            # model searched docs (Alice is in todo.txt), and a search of every file costs little here.
            each = _without(each, "glob")
            if folders is not None and files:
                each = _without(each, "path")
        out.append(each)
    return out


def system_prompt(root: Path) -> str:
    """The system prompt ``run`` and ``chat`` use with their tools over ``root``."""
    return _SYSTEM
