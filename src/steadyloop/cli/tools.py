"""The CLI's own tools: read, list, search and glob files under the working directory, and, behind an
approval, write and edit files and run shell commands there.

What the reading tools answer, within the room the window has left for it, is in ``file_reads``; here
are the tools as the model sees them, and the sets ``run``, ``chat`` and ``serve`` give it. A tool fails
by raising: the message is what the model reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Literal

from .. import Tool, ToolContext, tool
from ..context import cut_middle
from ..tools import ResourceClaim
from .file_reads import (
    FLOOR_CHARS,
    SKIPPED_DIRS,
    Root,
    file_entry,
    file_text,
    glob_paths,
    list_folder,
    read_lines,
    room_for,
    search_lines,
)
from .group_watch import GroupWatch
from .licenses import is_license_file, licenses_in

__all__ = [
    "COMPACT_WINDOW",
    "default_tools",
    "file_tools",
    "listed_files",
    "listed_folders",
    "paths_to_name",
    "shell_tool",
    "system_prompt",
]

_READ_LIMIT = 400  # lines one read returns unless asked otherwise
_MAX_READ_CHARS = 256_000
_MAX_LISTING_CHARS = 64_000
_MAX_SEARCH_CHARS = 32_000
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
_NAMED_PATHS = 5000  # the most files (or folders) a request is read against for the paths it names

# Reads share the file system; a write has it alone, so a read never sees a file half written.
_READ = (ResourceClaim("fs", "read"),)
_WRITE = (ResourceClaim("fs", "write"),)


def file_tools(root: Path, *, writable: bool = True, paged: bool = True, glob: bool = True) -> list[Tool]:
    """The file tools over ``root``: reads always, ``write_file`` and ``edit_file`` when ``writable``.

    Each answers within the room the window has left for it (``ToolContext.budget_chars``) and says what
    it left out and how to get it (``file_reads``).

    Args:
        paged: ``read_file`` takes the first line and the number of lines to read, and numbers the lines;
            without, it reads a file from its start, as it is (a small model's tool: see
            :func:`default_tools`).
        glob: offer ``glob``; without it, nothing points the model at it.
    """
    where = Root(root)
    globbing = glob  # ``search_text`` has an argument of that name
    finders = "list_dir and glob find files by name" if globbing else "list_dir shows the files of a folder"

    def read(path: str, offset: int, limit: int, context: ToolContext) -> str:
        target, named_so = where.file_for(path)
        shown = where.show(target)
        # The file read in place of a name that names none says so: the answer may name it.
        meant = "" if named_so else f"\n[this is {shown}: no file is named {path}]"
        named = shown if meant else path
        text = file_text(target, named)
        which = _license_said(target.name, text)
        room = room_for(context, _MAX_READ_CHARS) - len(meant) - len(which)
        return which + read_lines(text, named, offset=offset, limit=limit, numbered=paged, room=room) + meant

    def listed_file(target: Path, path: str, context: ToolContext) -> str:
        """A file named to ``list_dir``: its entry, then its text as ``read_file`` reads it from the start.

        Told only "not a folder", the 1.5B model that listed notes.txt to count its lines answered "The
        file is not a folder, so I cannot list its contents"; given the entry alone, it answered "How many
        items are in todo.txt?" with "1 entry".
        """
        entry = file_entry(target)
        try:
            text = file_text(target, path)
        except ValueError:  # a binary file: its entry says its size
            return entry
        entry += f"\n({path} is a file, not a folder; what it holds:)"
        room = max(room_for(context, _MAX_READ_CHARS) - len(entry) - 1, FLOOR_CHARS)
        return f"{entry}\n{read_lines(text, path, offset=1, limit=_READ_LIMIT, numbered=paged, room=room)}"

    @tool(effect="read", claims=_READ)
    def read_file(path: str, context: ToolContext, offset: int = 1, limit: int = _READ_LIMIT) -> str:
        """Read a text file, with line numbers.

        Args:
            path: the file's path.
            offset: the first line to read.
            limit: the most lines to read.
        """
        return read(path, offset, limit, context)

    if not paged:
        # Asked for "the second item in todo.txt", the 1.5B model read line 2 alone (offset 2, limit 1)
        # and answered from the call's arguments; a small file read whole holds the item and its
        # neighbours, and the schema is shorter.
        @tool(name="read_file", effect="read", claims=_READ)
        def read_whole(path: str, context: ToolContext) -> str:
            """Read a text file.

            Args:
                path: the file's path.
            """
            return read(path, 1, _READ_LIMIT, context)

        read_file = read_whole

    @tool(effect="read", claims=_READ)
    def list_dir(context: ToolContext, path: str = ".", sort: Literal["name", "size"] = "name") -> str:
        """List the files and folders in a folder; folders end in /.

        Each file is listed with its size in bytes, and its lines when it is text.

        Args:
            path: the folder's path; leave it out for the working directory.
            sort: name, or size for the largest files first.
        """
        target = where.inside(path)
        if target.is_file():
            return listed_file(target, path, context)
        if not target.is_dir():
            raise NotADirectoryError(f"{path}: not a folder")
        room = room_for(context, _MAX_LISTING_CHARS)
        return list_folder(target, sort=sort, room=room, finder="glob" if globbing else None)

    @tool(effect="read", claims=_READ)
    def search_text(context: ToolContext, pattern: str, path: str = ".", glob: str | None = None) -> str:
        """Find which files contain a word or regular expression; answers file:line: text for each match.

        It looks inside files, not at their names.

        Args:
            pattern: the word or Python regular expression to look for.
            path: the file or folder to search.
            glob: only files whose names match this pattern, e.g. *.py.
        """
        room = room_for(context, _MAX_SEARCH_CHARS)
        return search_lines(where, pattern, path, glob, room=room, finders=finders)

    @tool(name="glob", effect="read", claims=_READ)
    def glob_files(pattern: str, context: ToolContext) -> str:
        """Find files by a name pattern, e.g. src/**/*.py.

        Args:
            pattern: the glob pattern.
        """
        return glob_paths(where, pattern, room=room_for(context, _MAX_LISTING_CHARS))

    # No default in the schema: a small model shown 'Default: "."' copies the quotes into the path.
    tools = [read_file, _no_default(list_dir, "path"), search_text]
    if globbing:
        tools.append(glob_files)
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
        text = file_text(target, path)
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
    # The head and the tail: a command's last lines (its summary, its error) matter as much as its first.
    output = cut_middle(
        output, room_for(context, _MAX_SHELL_OUTPUT), why="; send the output to a file to read it in parts"
    )
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
    where = Root(root)
    found: list[str] = ["."] if folders else []
    for folder, dirs, names in os.walk(where.path):
        here = Path(folder)
        level = len(here.relative_to(where.path).parts)
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        if level >= depth:
            dirs[:] = []
        for name in dirs if folders else sorted(n for n in names if not n.startswith(".")):
            found.append(str((here / name).relative_to(where.path)))
            if len(found) > cap:
                return None
    return sorted(found)


def listed_files(root: Path) -> list[str]:
    """The files the compact tool set's ``read_file`` lists in its schema (none past its cap)."""
    return _paths_here(root, folders=False, depth=3, cap=_LISTED_FILES) or []


def listed_folders(root: Path) -> list[str]:
    """The folders the compact tool set's ``list_dir`` lists in its schema (none past its cap)."""
    return _paths_here(root, folders=True, depth=2, cap=_LISTED_FOLDERS) or []


def _license_said(name: str, text: str) -> str:
    """A license file's license, said above its text (``licenses.py``); "" for any other file."""
    found = licenses_in(text) if is_license_file(name) else []
    if not found:
        return ""
    if len(found) == 1:
        return f"[this is the text of the {found[0]} license]\n"
    return f"[this holds the texts of the {', '.join(found[:-1])} and {found[-1]} licenses]\n"


def paths_to_name(root: Path, *, folders: bool) -> list[str]:
    """The files (or folders) a request may name in words, whether or not a schema lists them: those
    within three levels of ``root``, or, in a folder with more than can be read quickly, its top level's."""
    return (
        _paths_here(root, folders=folders, depth=3, cap=_NAMED_PATHS)
        or _paths_here(root, folders=folders, depth=0, cap=_NAMED_PATHS)
        or []
    )


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
    tools = file_tools(root, paged=not compact, glob=not compact)
    if not compact:
        return [*tools, shell_tool(root)]
    kept = [t for t in tools if t.name in ("read_file", "list_dir", "search_text", "write_file")]
    folders = _paths_here(root, folders=True, depth=2, cap=_LISTED_FOLDERS)
    files = listed_files(root)
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
