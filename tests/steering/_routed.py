"""What the routing and tool-gate tests share: a reply that streams text, one loop run over the scripted
model server that records its events, and one routed run from a given decision."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from steadyloop.events import Event
from steadyloop.loop import LoopPolicy, LoopResult, run_agent_loop
from steadyloop.messages import Message, SystemMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering.decision import ANSWER
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply, ScriptedReply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import Tool
from steadyloop.turn import RetryPolicy
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


async def decided_then_answered(
    calls: Sequence[dict[str, Any]], question: str, tools: Sequence[Tool], answer: str
) -> LoopResult:
    """One routed run (no gate) whose first decision is ``calls``, the next one to answer, and the answer
    ``answer``: the tools see what the routed step made of the calls."""
    policy = LoopPolicy(
        tool_routing=True, tool_gate=False, retry=RetryPolicy(base_delay_s=0.01, max_retries=1)
    )
    replies = [text(json.dumps(list(calls))), text(json.dumps([{"name": ANSWER}])), text(answer)]
    async with ScriptedServer(*replies) as server:
        result, _ = await run_routed(server, question, tools, policy)
    return result


def one_tool(name: str, properties: dict[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI tools of one function ``name`` whose parameters are ``properties``."""
    parameters = {"type": "object", "properties": properties}
    return [{"type": "function", "function": {"name": name, "parameters": parameters}}]
