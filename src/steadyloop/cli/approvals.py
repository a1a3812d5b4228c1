"""Approvals asked on the terminal: ``Allow run_shell(command='ls')? [y/N]``.

Only ``y`` or ``yes`` allows. Anything else, an empty line, end of input, Ctrl-C at the question and the
absence of a terminal are all denies. The answer is read from the terminal's file descriptor through the
event loop, not from a blocked thread, so an abort or a timeout leaves nothing behind still reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Literal

from .. import ApprovalDecision, ApprovalRequest
from ..tools import InMemoryApprovalBroker
from .render import Style, call_text

__all__ = ["Terminal", "TerminalApprovals", "open_terminal"]

_WHO = "terminal"


class Terminal:
    """A terminal to ask on: a file descriptor to read answers from and a stream to write questions to.

    Args:
        fd: read from it; it must be a terminal in line mode.
        close: close ``fd`` when done (it was opened for this).
    """

    def __init__(self, fd: int, *, close: bool = False) -> None:
        self.fd = fd
        self._close = close
        self.style = Style(sys.stderr)

    def write(self, text: str) -> None:
        # The question goes to the terminal itself: stdout and stderr may both be redirected.
        os.write(self.fd if self._close else sys.stderr.fileno(), text.encode())

    def close(self) -> None:
        if self._close:
            with contextlib.suppress(OSError):
                os.close(self.fd)


def open_terminal() -> Terminal | None:
    """The terminal to ask on: stdin when it is one, else the controlling terminal, else ``None``."""
    if sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty():
        return Terminal(sys.stdin.fileno())
    try:
        return Terminal(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY), close=True)
    except OSError:
        return None


class TerminalApprovals(InMemoryApprovalBroker):
    """An ``ApprovalBroker`` that asks on the terminal, one question at a time (``request``, ``decide`` and
    ``pending`` are the in-memory broker's; only waiting for the answer differs).

    Args:
        terminal: where to ask; ``None`` denies every request (``no terminal to ask``).
    """

    def __init__(self, terminal: Terminal | None) -> None:
        super().__init__()
        self.terminal = terminal
        self._asking: asyncio.Future[str | None] | None = None
        self._lock = asyncio.Lock()

    @property
    def asking(self) -> bool:
        """A question is on the screen now."""
        return self._asking is not None and not self._asking.done()

    def interrupt(self) -> None:
        """Ctrl-C at the question: deny it."""
        if self._asking is not None and not self._asking.done():
            self._asking.set_result(None)

    async def wait(self, approval_id: str, timeout_s: float) -> ApprovalDecision:
        """Ask on the terminal and return what was answered (a deny on anything but yes)."""
        request = self._requests.get(approval_id)
        future = self._futures.get(approval_id)
        if request is None or future is None:
            return ApprovalDecision("deny", "unknown approval", _WHO)
        try:
            if self.terminal is None:
                await self.decide(approval_id, "deny", "no terminal to ask", _WHO)
            else:
                async with self._lock:  # a parallel batch asks its questions one after another
                    if not future.done():
                        async with asyncio.timeout(timeout_s):
                            answer = await self._ask(request)
                        verdict: Literal["allow", "deny"] = (
                            "allow"
                            if answer is not None and answer.strip().lower() in ("y", "yes")
                            else "deny"
                        )
                        reason = (
                            "" if verdict == "allow" else ("interrupted" if answer is None else "refused")
                        )
                        await self.decide(approval_id, verdict, reason, _WHO)
        except TimeoutError:
            if self.terminal is not None:
                self.terminal.write("\n")
            await self.decide(approval_id, "deny", "timeout", _WHO)
        finally:
            self._requests.pop(approval_id, None)
        decision = future.result() if future.done() else ApprovalDecision("deny", "cancelled", _WHO)
        self._futures.pop(approval_id, None)
        return decision

    async def _ask(self, request: ApprovalRequest) -> str | None:
        terminal = self.terminal
        assert terminal is not None
        style = terminal.style
        question = f"Allow {style.bold(call_text(request.name, request.arguments))}? [y/N] "
        terminal.write(question)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[str | None] = loop.create_future()
        self._asking = answer
        buffer = bytearray()

        def readable() -> None:
            try:
                chunk = os.read(terminal.fd, 1024)
            except OSError:
                chunk = b""
            if not chunk:  # end of input: nobody is there to say yes
                if not answer.done():
                    answer.set_result("")
                return
            buffer.extend(chunk)
            if b"\n" in buffer and not answer.done():
                answer.set_result(buffer.split(b"\n", 1)[0].decode(errors="replace"))

        loop.add_reader(terminal.fd, readable)
        try:
            result = await answer
        finally:
            loop.remove_reader(terminal.fd)
            self._asking = None
        if result is None:
            terminal.write("^C\n")
        return result
