"""gpt-oss channel markers that reached the answer: found, taken out, and told.

gpt-oss writes in the harmony format: ``<|start|>assistant<|channel|>analysis<|message|>...<|end|>`` for its
scratchpad, ``<|channel|>final<|message|>...<|return|>`` for the answer. A server without a harmony parser
hands that framing over as content; the thinking fences take the analysis channel and the final header out,
and whatever framing is left (a ``<|return|>`` at the end, a second channel, a stray ``<|start|>``) is a leak.

``find_harmony_leak`` reads an answer (sans-I/O, linear in its length) and says which markers it holds and
what the answer is without them: the header text between ``<|start|>``/``<|channel|>``/``<|constrain|>`` and
``<|message|>`` is framing, an analysis channel's body is reasoning, everything else is answer. An answer
whose framing addresses a tool (``to=functions.get_weather``) is left as it came, so the text-call recovery
can still read the call; the leak is still told. ``mend_harmony`` applies it to a turn, emits a ``Notice``
and calls the caller's callback.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from ..events import Event, Notice
from ..messages import Turn

__all__ = ["HARMONY_MARKERS", "HarmonyLeak", "HarmonyLeakCallback", "find_harmony_leak", "mend_harmony"]

#: The harmony format's control tokens.
HARMONY_MARKERS: tuple[str, ...] = (
    "<|start|>",
    "<|channel|>",
    "<|constrain|>",
    "<|message|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
)

_MARKER = re.compile("|".join(re.escape(m) for m in HARMONY_MARKERS))
_OPENS_HEADER = frozenset({"<|start|>", "<|channel|>", "<|constrain|>"})


@dataclass(frozen=True, slots=True)
class HarmonyLeak:
    """Harmony framing found in an answer.

    Attributes:
        markers: the distinct markers found, in the order they first appear.
        text: the answer as it came.
        cleaned: the answer without the framing (``text`` itself when the framing addressed a tool).
        reasoning: the body of any analysis channel, which belongs with the reasoning.
        step: the step whose answer it was (0 outside a run).
    """

    markers: tuple[str, ...]
    text: str
    cleaned: str
    reasoning: str = ""
    step: int = 0


HarmonyLeakCallback = Callable[[HarmonyLeak], "object | Awaitable[object]"]


def find_harmony_leak(text: str) -> HarmonyLeak | None:
    """The harmony framing in ``text``, or ``None`` when it holds none."""
    if "<|" not in text:
        return None
    pieces = _MARKER.split(text)
    markers = _MARKER.findall(text)
    if not markers:
        return None
    answer: list[str] = [pieces[0]]
    reasoning: list[str] = []
    header: list[str] = []  # header text since the last marker that opens one, held until <|message|>
    in_header = False
    channel = ""
    addressed = False
    for marker, piece in zip(markers, pieces[1:], strict=True):
        if marker in _OPENS_HEADER:
            if marker == "<|channel|>":
                channel = piece.strip().split(" ", 1)[0]
            if "to=" in piece:
                addressed = True
            in_header = True
            header.append(piece)
            continue
        if marker == "<|message|>":
            in_header = False
            header.clear()
            (reasoning if channel == "analysis" else answer).append(piece)
            continue
        # <|end|>, <|return|>, <|call|>: a message ends; what follows is outside any channel.
        if in_header:
            answer.extend(header)  # a header never closed was not one
            header.clear()
            in_header = False
        channel = ""
        answer.append(piece)
    if in_header:
        answer.extend(header)
    seen = tuple(dict.fromkeys(markers))
    if addressed:
        return HarmonyLeak(markers=seen, text=text, cleaned=text)
    return HarmonyLeak(
        markers=seen, text=text, cleaned="".join(answer).strip(), reasoning="".join(reasoning).strip()
    )


async def mend_harmony(
    turn: Turn,
    *,
    step: int = 0,
    emit: Callable[[Event], object] | None = None,
    on_leak: HarmonyLeakCallback | None = None,
) -> Turn:
    """The turn with any harmony framing taken out of its answer, told as a ``Notice`` and to ``on_leak``.

    A callback that raises is told as a notice too: watching a leak is never worth failing the run over.
    """
    leak = find_harmony_leak(turn.content)
    if leak is None:
        return turn
    leak = replace(leak, step=step)
    done = (
        "left as it came: it addresses a tool" if leak.cleaned == leak.text else "the framing was taken out"
    )
    if emit is not None:
        emit(
            Notice(
                text=f"gpt-oss channel markers reached the answer ({' '.join(leak.markers)}); {done}",
                name="harmony_leak",
                step=step,
            )
        )
    if on_leak is not None:
        try:
            result = on_leak(leak)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            if emit is not None:
                emit(
                    Notice(
                        text=f"the harmony-leak callback failed: {error!r}", name="harmony_leak", step=step
                    )
                )
    if leak.cleaned == leak.text and not leak.reasoning:
        return turn
    reasoning = "\n".join(part for part in (turn.reasoning, leak.reasoning) if part)
    return replace(turn, content=leak.cleaned, reasoning=reasoning)
