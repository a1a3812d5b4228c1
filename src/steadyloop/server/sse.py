"""Events as server-sent events: ``id:`` is the event's seq in the session's record.

A recorded event goes out as ``id: <seq>``, ``event: <type>``, ``data: <the event's JSON>``, so a client
that reconnects with ``Last-Event-ID`` (or ``?after=``) resumes right after the last one it had. A live
delta goes out as ``event: delta`` with no id: it previews the ``message_update`` the record will hold,
and a client replaces the deltas it showed since the last id with that update when it comes.

Fields with no value are left out of a frame rather than sent as ``null`` (a usage frame would be
mostly nulls: every timing the endpoint did not report): reading a frame back with
``steadyloop.events.event_from_json`` gives the same event, whose fields default to ``None``. Nulls inside
free-form values (a call's arguments, a structured answer) are the values themselves and stay.

Errors inside events are scrubbed like every error the server answers with.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pydantic import TypeAdapter

from steadyloop import Event
from steadyloop.events import AgentEnd, Failover, Retry, SideTask, TurnEnd

from .errors import Scrubber
from .hub import Item

__all__ = ["HEARTBEAT", "event_json", "frame", "heartbeat"]

HEARTBEAT = b": keep-alive\n\n"

_EVENTS = TypeAdapter[Any](Event)


def event_json(event: Event, scrub: Scrubber) -> str:
    """The event as JSON for a client: errors scrubbed, the server's secrets out of everything."""
    if isinstance(event, AgentEnd | TurnEnd | SideTask) and event.error:
        event = replace(event, error=scrub(event.error))
    elif isinstance(event, Retry):
        event = replace(event, reason=scrub(event.reason))
    elif isinstance(event, Failover):
        event = replace(event, cause=scrub(event.cause))
    return scrub.secrets_only(_EVENTS.dump_json(event, exclude_none=True).decode())


def frame(item: Item, scrub: Scrubber) -> bytes:
    """One item as an SSE frame."""
    data = event_json(item.event, scrub)
    if item.seq is None:
        name = "delta" if item.event.type == "message_update" else item.event.type
        return f"event: {name}\ndata: {data}\n\n".encode()
    return f"id: {item.seq}\nevent: {item.event.type}\ndata: {data}\n\n".encode()


def heartbeat() -> bytes:
    return HEARTBEAT


def error_frame(code: str, message: str) -> bytes:
    """A stream's last frame when it cannot go on."""
    return f"event: error\ndata: {json.dumps({'error': {'code': code, 'message': message}})}\n\n".encode()
