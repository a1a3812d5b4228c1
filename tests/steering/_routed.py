"""What the routing and tool-gate tests share: a reply that streams text, and one loop run over the scripted
model server that records its events."""

from __future__ import annotations

from collections.abc import Sequence

from steadyloop.events import Event
from steadyloop.loop import LoopPolicy, LoopResult, run_agent_loop
from steadyloop.messages import Message, SystemMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import Tool
from steadyloop.wire.endpoints import Endpoint


def text(content: str) -> ScriptedReply:
    return Reply.stream(stream_of(content))


async def run_routed(
    server: ScriptedServer, question: str, tools: Sequence[Tool], policy: LoopPolicy, system: str = ""
) -> tuple[LoopResult, list[Event]]:
    """One run of the loop asking ``question`` (after the ``system`` prompt, if any) with ``tools`` under
    ``policy``, and the events it sent."""
    events: list[Event] = []
    first: list[Message] = [SystemMessage(content=system)] if system else []
    result = await run_agent_loop(
        Endpoint(server.base_url),
        ModelParams(model="m"),
        messages=[*first, UserMessage(content=question)],
        tools=tools,
        policy=policy,
        on_event=events.append,
    )
    return result, events
