"""What the session list shows beyond the store's rows: a title taken from the first message, and a
search over titles and what was said.

A session made over the API without a title is titled from its first message, as ``AgentSession``
titles a session it creates itself. The search reads each session's messages: a scan, fine for the
hundreds of sessions one person keeps, and no index to keep in step with the store.
"""

from __future__ import annotations

from collections.abc import Sequence

from steadyloop import AssistantMessage, InvalidInput, Message, UserMessage
from steadyloop.messages import text_of
from steadyloop.sessions import SessionInfo, SessionStore

__all__ = ["MAX_QUERY", "TITLE_CHARS", "search", "title_from"]

#: The longest title taken from a message; a longer first line is cut with an ellipsis.
TITLE_CHARS = 80
#: The longest search text the list takes.
MAX_QUERY = 200


def title_from(text: str) -> str | None:
    """A title from a message: its first line with text, spaces collapsed, cut to ``TITLE_CHARS``."""
    line = next((" ".join(line.split()) for line in text.splitlines() if line.strip()), "")
    if not line:
        return None
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def _said(message: Message) -> str:
    """What a person reads of a message: the user's and the assistant's words, not tools' output."""
    if isinstance(message, UserMessage | AssistantMessage):
        return text_of(message.content)
    return ""


async def search(
    store: SessionStore, principal: str, infos: Sequence[SessionInfo], query: str
) -> list[SessionInfo]:
    """The sessions whose title or words contain ``query`` (case and spacing aside), in their order."""
    wanted = " ".join(query.split()).casefold()
    if not wanted:
        return list(infos)
    found: list[SessionInfo] = []
    for info in infos:
        if wanted in " ".join((info.title or "").split()).casefold():
            found.append(info)
            continue
        try:
            messages = await store.load_messages(info.session_id, agent_id=principal)
        except InvalidInput:  # deleted or expired since it was listed
            continue
        if any(wanted in " ".join(_said(m).split()).casefold() for m in messages):
            found.append(info)
    return found
