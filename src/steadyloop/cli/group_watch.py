"""A tool's processes end with the process that started them, however it ends.

``run_shell`` starts its command in a process group of its own, and kills the group when the call times
out or is cancelled. A process killed outright (``SIGKILL``, a crash, the machine's OOM killer) kills
nothing: its shell and whatever the shell started ran on, and went on writing after another node had
closed their call as interrupted. ``GroupWatch`` is a small ``sh`` started first, in a session of its
own, that reads the group's id from a pipe and then waits on the pipe: the starting process says, when the
call ends, that the group may stay as it is; if the pipe closes without a word (the starting process is
gone, whichever way it went), the watch kills the group. The kernel closes the pipe of a dead process, so
no signal handler, no ``PR_SET_PDEATHSIG`` (which reaches one child, not its group) and no polling is
needed; it works wherever there is a POSIX ``sh``.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["GroupWatch"]

# The group's id is read from the pipe; then a word lets the group be, and the end of the pipe kills it.
# ``kill -KILL -ID``: dash, Debian's sh, reads ``--`` as a process id.
_WATCH = 'read -r group || exit 0; read -r word || kill -KILL "-$group" 2>/dev/null'


class GroupWatch:
    """Kills a process group if this process dies before ``release`` (see the module docstring)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls) -> GroupWatch:
        """Start the watch, before the group it will watch: there is no moment the group goes unwatched."""
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            _WATCH,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C meant for this process is not the watch's to take
        )
        return cls(process)

    async def watch(self, group: int) -> None:
        """Watch ``group`` (a process group's id, its leader's pid)."""
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write(f"{group}\n".encode())
        await stdin.drain()

    async def release(self) -> None:
        """The call is over: the watch ends and leaves the group as it is."""
        stdin = self._process.stdin
        assert stdin is not None
        with contextlib.suppress(ConnectionError):
            stdin.write(b"0\n\n")  # a group (if none was said yet) and the word
            await stdin.drain()
        stdin.close()
        await self._process.wait()
