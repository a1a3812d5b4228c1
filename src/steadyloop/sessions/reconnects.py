"""When to try a lost database connection again, and when to say so (sans-I/O).

A process keeps some connections open for as long as it runs (one that ``LISTEN``\\ s, say) and connects
again each time one drops. Trying again at once hammers a server that is restarting, and a log line per
attempt buries the log for as long as a database refuses (a changed password: every few seconds, for
hours). ``Reconnects`` decides both from what happened, and does no I/O itself: the pause before each
attempt doubles from ``first_s`` up to ``max_s``, each drawn between half and all of its step so processes
that lost the server together do not come back together; a line is due only when the state changes: the
connection was lost, the server refuses it (again when its reason changes), it is back.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidInput

__all__ = ["ConnectFailure", "Reconnects", "StateChange"]


@dataclass(frozen=True)
class ConnectFailure:
    """Why a connection to a database failed or was lost, as a caller may show it.

    Attributes:
        reason: the driver's words on one line, the password hidden.
        refused: the server refused in a way no retry changes (a wrong password, a missing role or
            database, a role without LOGIN or CONNECT, ``pg_hba.conf`` or SSL rules); ``False`` for
            anything that may pass by itself (a server down or full, a connection cut).
        sqlstate: the code the failure came with, if it came with one.
    """

    reason: str
    refused: bool
    sqlstate: str | None = None


@dataclass(frozen=True)
class StateChange:
    """A line worth logging: the connection's state changed.

    Attributes:
        level: a ``logging`` level (``WARNING`` when lost or refused, ``INFO`` when back).
        text: what happened, with the reason.
    """

    level: int
    text: str


State = Literal["up", "lost", "refused"]


class Reconnects:
    """The pauses between attempts to connect again, and the state changes worth a log line.

    Call ``failed`` after each failed attempt (or a drop), wait ``pause()`` seconds, try again, and call
    ``connected`` once connected; log what they return when it is not ``None``.

    Args:
        what: names the connection in the lines, e.g. ``"the session store's listener"``.
        first_s: the first pause; doubled after each failure.
        max_s: the longest pause.
        rng: the source of jitter; injectable so tests can draw the same pauses again.

    Raises:
        InvalidInput: ``first_s`` is not above zero, or ``max_s`` is below it.
    """

    def __init__(
        self, what: str, *, first_s: float = 0.05, max_s: float = 5.0, rng: random.Random | None = None
    ) -> None:
        if not 0 < first_s <= max_s:
            raise InvalidInput(f"need 0 < first_s <= max_s, got {first_s!r} and {max_s!r}")
        self.what = what
        self.first_s = first_s
        self.max_s = max_s
        self._rng = rng or random.Random()
        self.state: State = "up"
        self.failures = 0  # since the last connection
        self._reason = ""
        self._down_since: float | None = None

    def failed(self, failure: ConnectFailure, now: float) -> StateChange | None:
        """An attempt failed (or the connection dropped) at ``now`` (seconds, any clock): the line to log,
        if the state changed."""
        self.failures += 1
        if self._down_since is None:
            self._down_since = now
        before, self.state = self.state, "refused" if failure.refused else "lost"
        same_reason, self._reason = self._reason == failure.reason, failure.reason
        retry = f"trying again, at most every {self.max_s:g} s"
        if self.state == "refused":
            if before == "refused" and same_reason:
                return None
            return StateChange(
                logging.WARNING,
                f"{self.what}: the database refuses the connection: {failure.reason}; {retry}",
            )
        if before == "lost":
            return None  # still unreachable: the words of each attempt may differ, the state does not
        if before == "refused":
            return StateChange(
                logging.WARNING,
                f"{self.what}: the database no longer refuses, but cannot be reached: {failure.reason}; {retry}",
            )
        return StateChange(logging.WARNING, f"{self.what} lost its connection: {failure.reason}; {retry}")

    def pause(self) -> float:
        """Seconds to wait before the next attempt: the step doubles with each failure up to ``max_s``,
        and the pause is drawn between half and all of it."""
        step = min(self.first_s * 2.0 ** max(self.failures - 1, 0), self.max_s)
        return step * (0.5 + 0.5 * self._rng.random())

    def connected(self, now: float) -> StateChange | None:
        """An attempt succeeded at ``now``: the line to log if the connection was down."""
        if self._down_since is None:
            return None
        down_s, tries = now - self._down_since, self.failures
        self.state, self.failures, self._reason, self._down_since = "up", 0, "", None
        return StateChange(
            logging.INFO, f"{self.what} is connected again after {down_s:.1f} s and {tries} failed attempts"
        )
