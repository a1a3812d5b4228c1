"""Pieces of a Gemini reply that come over several chunks, or that a chat message has no field for, sans I/O.

- ``StreamedArguments``: Vertex AI can stream a call's arguments (``streamFunctionCallArguments`` in the
  function-calling config): the call's first part names it and says ``willContinue``, each later part
  carries ``partialArgs``, a JSON path and a piece of the value there, and a part without ``willContinue``
  ends it. The pieces are put back together into the call's arguments object.
- ``ReplyParts``: the reply's parts in the order they came, streamed text fragments joined back into the
  part they were cut from. Kept where the chat-completions shape cannot hold the reply (code the model ran
  and what it printed, a thought signature on more than one part), so it is sent back as Gemini wrote it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ReplyParts", "StreamedArguments", "recorded_parts"]

# One step of a JSON path as Vertex AI writes them: ``.name``, ``[3]`` or ``['name']``.
_STEP = re.compile(
    r"\.(?P<name>[A-Za-z_][\w-]*)|\[(?P<index>\d{1,6})\]|\[(?P<quote>['\"])(?P<key>.*?)(?P=quote)\]"
)
# A partial argument's value, in the API's spelling.
_VALUES = ("stringValue", "numberValue", "boolValue", "nullValue")
# Parts a chat message carries in fields of its own; any other part (executableCode, codeExecutionResult,
# inlineData, ...) is kept with the reply.
_CARRIED = frozenset({"text", "thought", "thoughtSignature", "functionCall"})


def _steps(path: str) -> list[str | int] | None:
    """The keys and indexes of a path like ``$.recipe.steps[0]``; ``None`` for one that cannot be read."""
    if not path.startswith("$"):
        return None
    steps: list[str | int] = []
    at = 1
    while at < len(path):
        match = _STEP.match(path, at)
        if match is None:
            return None
        if match["name"] is not None:
            steps.append(match["name"])
        elif match["index"] is not None:
            steps.append(int(match["index"]))
        else:
            steps.append(match["key"])
        at = match.end()
    return steps


class StreamedArguments:
    """A call's arguments put back together from Vertex AI's ``partialArgs`` pieces.

    Attributes:
        index: the call's index in the reply.
        call_id: the call's id (Gemini's, or one given here).
        name: the function's name.
        skipped: pieces that could not be placed (a path not read, a value of no known type).
    """

    def __init__(self, index: int, call_id: str, name: str) -> None:
        self.index = index
        self.call_id = call_id
        self.name = name
        self.arguments: dict[str, Any] = {}
        self.skipped = 0

    def add(self, pieces: Any) -> None:
        """Place each piece of ``partialArgs``: a string continues the string already at its path."""
        for piece in pieces if isinstance(pieces, list) else ():
            path = piece.get("jsonPath") if isinstance(piece, Mapping) else None
            steps = _steps(path) if isinstance(path, str) else None
            kinds = [k for k in _VALUES if isinstance(piece, Mapping) and k in piece]
            if not steps or len(kinds) != 1:
                self.skipped += 1
                continue
            value = None if kinds[0] == "nullValue" else piece[kinds[0]]
            if not self._place(steps, value):
                self.skipped += 1

    def _place(self, steps: list[str | int], value: Any) -> bool:
        holder: Any = self.arguments
        for step, following in zip(steps, [*steps[1:], None], strict=True):
            fresh: Any = {} if isinstance(following, str) else [] if isinstance(following, int) else None
            if isinstance(step, str) and isinstance(holder, dict):
                if following is None:
                    holder[step] = _joined(holder.get(step), value)
                    return True
                holder = holder.setdefault(step, fresh)
            elif isinstance(step, int) and isinstance(holder, list):
                holder.extend([None] * (step + 1 - len(holder)))
                if following is None:
                    holder[step] = _joined(holder[step], value)
                    return True
                if holder[step] is None:
                    holder[step] = fresh
                holder = holder[step]
            else:
                return False  # a path through a value that is not a container of that kind
        return False


def _joined(before: Any, value: Any) -> Any:
    # A string's pieces arrive one after another at the same path.
    if isinstance(before, str) and isinstance(value, str):
        return before + value
    return value


class ReplyParts:
    """The reply's parts in order, streamed text fragments joined into the part they were cut from."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self._signed = 0
        self._opaque = False

    def add(self, part: Mapping[str, Any]) -> None:
        """Keep a part that is not a call (``add_call`` keeps those)."""
        if not set(part) <= _CARRIED:
            self._opaque = True
            self.parts.append(dict(part))
            return
        text = part.get("text")
        signature = part.get("thoughtSignature")
        thought = part.get("thought") is True
        if isinstance(signature, str) and signature:
            self._signed += 1
        elif thought:
            return  # a thought summary with nothing to give back: Gemini does not ask for it
        last = self.parts[-1] if self.parts else None
        if (
            last is not None
            and set(last) <= {"text", "thought"}
            and (last.get("thought") is True) == thought
            and isinstance(text, str)
        ):
            last["text"] += text  # a fragment of the part before, cut by the stream
            if signature:
                last["thoughtSignature"] = signature
            return
        kept: dict[str, Any] = {"text": text if isinstance(text, str) else ""}
        if thought:
            kept["thought"] = True
        if signature:
            kept["thoughtSignature"] = signature
        self.parts.append(kept)

    def add_call(self, call: Mapping[str, Any], signature: str | None) -> None:
        """Keep a call as the part Gemini would have sent whole."""
        part: dict[str, Any] = {"functionCall": dict(call)}
        if signature:
            part["thoughtSignature"] = signature
        self.parts.append(part)

    def kept(self) -> str:
        """The parts as JSON where a chat message cannot carry them, else ``""``."""
        if not self._opaque and self._signed < 2:
            return ""
        return json.dumps(self.parts, ensure_ascii=False, separators=(",", ":"))


def recorded_parts(kept: str) -> list[dict[str, Any]] | None:
    """Parts ``ReplyParts.kept`` wrote, read back; ``None`` when the text is not such a list."""
    try:
        value = json.loads(kept)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, list) or not all(isinstance(part, dict) for part in value):
        return None
    return value
