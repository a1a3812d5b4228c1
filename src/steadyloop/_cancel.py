"""Awaiting work against a cancel event (internal): the work is cancelled the moment the event is set."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable
from typing import Literal, TypeVar

__all__ = ["CANCELLED", "Lost", "unless_cancelled"]

T = TypeVar("T")


class Lost(enum.Enum):
    """What ``unless_cancelled`` gives when the cancel event won."""

    CANCELLED = "cancelled"


CANCELLED = Lost.CANCELLED


async def unless_cancelled(
    work: Awaitable[T], cancel: asyncio.Event, *, ignore: tuple[type[BaseException], ...]
) -> T | Literal[Lost.CANCELLED]:
    """``work``'s result, or ``CANCELLED`` when ``cancel`` is set first.

    The work is then cancelled (so an HTTP request under it is closed) and awaited, so it never outlives the
    call; a failure of an ``ignore`` kind it ends with is dropped, since nobody waits for its result any more.
    Cancelling the caller cancels both.
    """
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        waiter.cancel()
        raise
    if task in done:
        waiter.cancel()
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, *ignore):
        await task
    return CANCELLED
