"""A cancel always reaches the task it is sent to: the library waits with a deadline through
``asyncio.timeout``, never ``asyncio.wait_for``.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when a cancel lands in the moment the inner
awaitable finishes, and the cancel is lost. A node's heartbeat waited on each beat that way: a server
stopping at that moment cancelled the heartbeat, which beat on, and the stop waited for it forever (a
two-node test hung until its timeout). ``asyncio.timeout`` keeps the cancel."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "steadyloop"


def test_the_library_never_waits_through_asyncio_wait_for() -> None:
    pattern = re.compile(r"\bwait_for\(")
    found = [
        f"{path.relative_to(SRC)}:{number}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and "def wait_for" not in line and ".wait_for_" not in line
    ]
    assert not found, f"asyncio.wait_for can lose a cancel (use asyncio.timeout): {found}"


async def _cancels_lost(trials: int = 200) -> int:
    """How many of ``trials`` cancels a beating loop lost, each sent after a few turns of the loop (with
    ``asyncio.wait_for`` in place of the timeout, 129 of 300 were lost on Python 3.11.7)."""

    async def beat_once() -> int:
        await asyncio.sleep(0)
        return 1

    async def beating() -> None:
        while True:
            async with asyncio.timeout(1):
                await beat_once()
            await asyncio.sleep(0.001)

    lost = 0
    for trial in range(trials):
        task = asyncio.get_running_loop().create_task(beating())
        for _ in range(trial % 7 + 1):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
        if not task.done():
            lost += 1
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=0.01)
    return lost


async def test_a_deadline_through_asyncio_timeout_never_loses_a_cancel() -> None:
    assert await _cancels_lost() == 0
