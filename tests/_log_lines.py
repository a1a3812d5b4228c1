"""A logger's records kept for a test, with a wait for the one it expects (the reconnect tests)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar


class LogLines(logging.Handler):
    """Keeps a logger's records and wakes whoever waits for one.

    Args:
        pause: the pattern of a "tries again in N s" line, its first group the seconds.
    """

    def __init__(self, pause: re.Pattern[str]) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._news = asyncio.Event()
        self._pause = pause

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._news.set()

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(60):
            while not done():
                self._news.clear()
                await self._news.wait()

    def pauses(self) -> list[float]:
        return [float(m.group(1)) for r in self.records if (m := self._pause.search(r.getMessage()))]

    def said(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


Lines = TypeVar("Lines", bound=LogLines)


@contextmanager
def captured(logger_name: str, handler: Lines) -> Iterator[Lines]:
    """``handler`` on the logger, at DEBUG, for the block; the logger as it was after."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
