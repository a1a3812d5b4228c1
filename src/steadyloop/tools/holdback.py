"""Holding back answer text that may be a tool call written as text, until the reply is decided (sans I/O).

A model whose server did not parse its call writes the call into its answer, and text-call recovery takes it
out only once the reply is complete. Whoever shows the answer as it streams would print the call first.
``CallHoldback`` sits between the stream and the screen: it passes text on as soon as it cannot be part of
a call, and holds it from the first point where a call could begin:

- anywhere: the markers of the tagged spellings (``<tool_call>``, ``<function=``, ``[TOOL_CALLS]``,
  ``<|python_tag|>``, ``<|channel|>``, ``<TOOLCALL>``, ``Action:`` and the rest of :data:`CALL_MARKERS`);
- at the start of the reply only: a bare JSON object, a JSON list of objects, a Python-style list of calls
  (``[f(x=1)]``), a fence whose body opens with ``{``, ``[`` or ``<``, as recovery reads those only when
  they are the whole reply (a fenced call after words is an example, shown as it streams).

Once a call may have begun, the rest of the reply is held: ``finish`` then says what to show, from the
message as it was decided (its content with any recovered call taken out). Held text is never lost: a reply
without calls gets all of it back. The decision is made on the text alone, so the output is the same
however the stream was chunked, and each character is looked at a bounded number of times.
"""

from __future__ import annotations

import re

__all__ = ["CALL_MARKERS", "CallHoldback"]

#: Markers that start a call in a spelling some open-weight model uses, wherever they appear: each place
#: where text-call recovery (``tools/recovery.py``) may begin taking a call out, so none of it is shown.
CALL_MARKERS: tuple[str, ...] = (
    "<tool_call>",
    "<function=",
    "<function_call>",
    "<json>",
    "<JSON>",
    "<|start|>",
    "<|message_sep|>",
    "<|function_call|>",
    "<|content_invoke_tool_json|>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|channel|>",
    "<|call|>",
    "<TOOLCALL>",
    "[TOOL_CALLS]",
    "function call<|role_sep|>",
    "<response>",
    "Action:",
)

_LONGEST = max(len(m) for m in CALL_MARKERS)
_CANDIDATE = re.compile(r"[<\[fA]")
_FENCE_HEAD = re.compile(r"```[\w.+-]{0,32}[ \t]*\r?\n[ \t\r\n]{0,64}")
_FENCE_SO_FAR = re.compile(r"```[\w.+-]{0,32}[ \t]{0,8}\r?\n?[ \t\r\n]{0,64}|`{1,2}")
_LIST_CALL = re.compile(r"\[\s{0,64}(?:\{|[A-Za-z_][\w.-]{0,64}\s{0,8}\()")
_LIST_SO_FAR = re.compile(r"\[\s{0,64}(?:[A-Za-z_][\w.-]{0,64}\s{0,8})?")
_CALL_START = "{[<"


class CallHoldback:
    """Text of one reply in, text safe to show out; see the module docstring.

    ``feed`` returns what can be shown now; ``finish`` returns the rest once the reply is decided.
    """

    __slots__ = ("_at_start", "_holding", "_pending", "_shown")

    def __init__(self) -> None:
        self._pending = ""  # received, not yet shown: at most an opener still being written, or a held call
        self._shown: list[str] = []
        self._holding = False  # a call may have begun: everything from here waits for finish()
        self._at_start = True  # nothing but whitespace has been received

    @property
    def holding(self) -> bool:
        """Text is being held because a call may have begun."""
        return self._holding

    @property
    def held(self) -> str:
        """The text not shown yet."""
        return self._pending

    def feed(self, text: str) -> str:
        """Take the next piece of the reply; return what can be shown now."""
        if not text:
            return ""
        self._pending += text
        if self._holding:
            return ""
        out = self._release()
        if out:
            self._shown.append(out)
        return out

    def finish(self, content: str | None = None, *, called: bool = False) -> str:
        """The rest of the reply to show, now that it is decided.

        Args:
            content: the message's content as decided (recovered calls taken out); ``None`` when unknown.
            called: the message carries tool calls.

        Returns:
            Everything not shown yet when no call was made (or nothing is known). When calls were made: the
            part of ``content`` not shown yet, provided what was shown is how ``content`` begins; else
            nothing.
        """
        held, self._pending = self._pending, ""
        self._holding = False
        if not called or content is None:
            return held
        shown = "".join(self._shown).strip()
        decided = content.strip()
        return decided[len(shown) :] if decided.startswith(shown) else ""

    # -- the decision ------------------------------------------------------------------------------------

    def _release(self) -> str:
        """Show what cannot start a call; set ``_holding`` once something may."""
        pending = self._pending
        i = 0
        if self._at_start:
            i = len(pending) - len(pending.lstrip())
            if i == len(pending):
                self._pending = ""
                return pending  # whitespace is never part of a call's text
            verdict = _bare_start(pending, i)
            if verdict is None:
                self._pending = pending[i:]
                return pending[:i]
            self._at_start = False
            if verdict:
                self._holding = True
                self._pending = pending[i:]
                return pending[:i]
        out: list[str] = [pending[:i]]
        while True:
            found = _CANDIDATE.search(pending, i)
            if found is None:
                out.append(pending[i:])
                self._pending = ""
                return "".join(out)
            j = found.start()
            verdict = _opener_at(pending, j)
            if verdict is not False:  # an opener, or what may still become one: keep it back
                out.append(pending[i:j])
                self._pending = pending[j:]
                self._holding = verdict is True
                return "".join(out)
            out.append(pending[i : j + 1])
            i = j + 1


def _bare_start(text: str, i: int) -> bool | None:
    """At the reply's start: a bare call (True), surely not one (False), or too early to say (None)."""
    if text[i] == "`":
        head = _FENCE_HEAD.match(text, i)
        if head is not None:
            return None if head.end() == len(text) else text[head.end()] in _CALL_START
        so_far = _FENCE_SO_FAR.match(text, i)
        return None if so_far is not None and so_far.end() == len(text) else False
    if text[i] == "{":
        return True
    if text[i] != "[":
        return False
    if _LIST_CALL.match(text, i):
        return True
    so_far = _LIST_SO_FAR.match(text, i)
    return None if so_far is not None and so_far.end() == len(text) else False


def _opener_at(text: str, j: int) -> bool | None:
    """Whether a call opens at ``text[j]``: yes, no, or not known yet (the text ends inside a prefix)."""
    rest = len(text) - j
    for marker in CALL_MARKERS:
        if text.startswith(marker, j):
            return True
        if rest < len(marker) and marker.startswith(text[j:]):
            return None
    return False
