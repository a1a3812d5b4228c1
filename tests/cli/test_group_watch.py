"""``run_shell``'s processes end with the process that started them: killed outright (SIGKILL) while its
command runs, the command's shell and everything it started go with it; a command that ends normally is
left as it is."""

from __future__ import annotations

import asyncio
import itertools
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from steadyloop.cli.group_watch import GroupWatch

# A process that runs one shell command through run_shell and waits; the test kills it mid-command.
_RUNNER = """
import asyncio, sys
from pathlib import Path
from steadyloop.cli.tools import shell_tool
from steadyloop.tools.definition import ToolContext

async def main() -> None:
    tool = shell_tool(Path(sys.argv[1]))
    await tool.execute({"command": sys.argv[2]}, ToolContext(call_id="c1", name="run_shell"))

asyncio.run(main())
"""

COMMAND = (
    "echo $$ > pids; sleep 60 & echo $! >> pids; (sleep 60; echo late > late.txt) & echo $! >> pids; wait"
)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no one reaped yet has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def until(test: Callable[[], bool], within_s: float) -> None:
    """Look at the processes until ``test()`` holds (they have no event to wait on)."""
    async with asyncio.timeout(within_s):
        for _ in itertools.count():
            if test():
                return
            await asyncio.sleep(0.02)


async def test_a_command_and_all_it_started_end_when_the_process_running_it_is_killed(tmp_path: Path) -> None:
    runner = await asyncio.create_subprocess_exec(sys.executable, "-c", _RUNNER, str(tmp_path), COMMAND)
    pids_file = tmp_path / "pids"
    try:
        await until(lambda: pids_file.exists() and len(pids_file.read_text().split()) == 3, 60)
        pids = [int(pid) for pid in pids_file.read_text().split()]
        assert all(alive(pid) for pid in pids)
    finally:
        runner.send_signal(signal.SIGKILL)
        await runner.wait()
    # Within 30 s (a loaded machine is slow to schedule the watch), well before the sleeps would end.
    await until(lambda: not any(alive(pid) for pid in pids), 30)
    assert not (tmp_path / "late.txt").exists()


async def test_a_released_watch_leaves_the_group_as_it_is() -> None:
    watch = await GroupWatch.start()
    sleeper = await asyncio.create_subprocess_exec("sleep", "30", start_new_session=True)
    try:
        await watch.watch(sleeper.pid)
        await watch.release()
        assert alive(sleeper.pid), "the call ended well: its group is not the watch's to kill"
    finally:
        sleeper.kill()
        await sleeper.wait()
