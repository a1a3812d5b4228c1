"""A request asked through the loop with the command's routing over a real folder, against a scripted server
that decides one read (or listing), says the request needs nothing more, and answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from steadyloop.cli.tools import default_tools
from steadyloop.loop import LoopPolicy, LoopResult, run_agent_loop
from steadyloop.messages import UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.steering import ToolRouting
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy
from steadyloop.wire.endpoints import Endpoint


async def read_then_answer(
    root: Path, routing: ToolRouting, request: str, path: str, answer: str, *, tool: str = "read_file"
) -> tuple[LoopResult, dict[str, Any]]:
    """The loop's result, and the first request the server was sent (the gate's question or the decision);
    the call decided is ``tool`` on ``path``."""
    decision = json.dumps({"name": tool, "arguments": {"path": path}})
    async with ScriptedServer(
        Reply.stream(stream_of(decision)),
        Reply.stream(stream_of(json.dumps({"choice": "answer"}))),
        Reply.stream(stream_of(answer)),
    ) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="m"),
            messages=[UserMessage(content=request)],
            tools=default_tools(root, compact=True),
            policy=LoopPolicy(tool_routing=routing, retry=RetryPolicy(base_delay_s=0.01, max_retries=1)),
        )
        return result, server.chat_requests[0].json
