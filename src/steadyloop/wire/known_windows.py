"""The context windows hosted models are documented with, as data: the window of a model whose endpoint
names none (api.openai.com's listing names no window), until the endpoint says otherwise.

``context_limit_for`` asks the server first (the operator's number, the served window, the listing, a window
an earlier refusal stated); this table only fills the gap before the first overflow, and an overflow that
states the window wins over it from then on. Each entry names its source. A window is the whole context:
prompt and reply together, as the overflow refusals count it.
"""

from __future__ import annotations

import re

__all__ = ["KNOWN_WINDOWS", "known_window"]


def _names(regex: str) -> re.Pattern[str]:
    # A router's prefix (``openai/``) and a dated snapshot (``-2024-08-06``) name the same model.
    return re.compile(rf"^(?:[\w.-]+/)?(?:{regex})(?:-\d{{4}}-\d{{2}}-\d{{2}})?$", re.IGNORECASE)


#: (model names, window in tokens, source), first match wins.
KNOWN_WINDOWS: tuple[tuple[re.Pattern[str], int, str], ...] = (
    # OpenAI's model pages (platform.openai.com/docs/models/<model>), "Context window":
    (
        _names(r"gpt-4o(?:-mini)?|chatgpt-4o-latest|gpt-4-turbo"),
        128_000,
        "platform.openai.com/docs/models/gpt-4o",
    ),
    (_names(r"gpt-4\.1(?:-mini|-nano)?"), 1_047_576, "platform.openai.com/docs/models/gpt-4.1"),
    (_names(r"o1-mini|o1-preview"), 128_000, "platform.openai.com/docs/models/o1-mini"),
    (_names(r"o1|o1-pro|o3|o3-mini|o3-pro|o4-mini"), 200_000, "platform.openai.com/docs/models/o3"),
    (_names(r"gpt-5(?:-mini|-nano|-pro)?"), 400_000, "platform.openai.com/docs/models/gpt-5"),
    (_names(r"gpt-3\.5-turbo"), 16_385, "platform.openai.com/docs/models/gpt-3.5-turbo"),
)


def known_window(model: str | None) -> int | None:
    """The documented window of ``model``, or ``None`` for a model the table does not name."""
    if not model:
        return None
    name = model.strip()
    for pattern, window, _source in KNOWN_WINDOWS:
        if pattern.search(name):
            return window
    return None
