"""The process ``test_crash.py`` kills: it resumes a session and writes to it as fast as it can, forever.

Usage: ``python crash_writer.py STORE SESSION_ID RUN`` (a SQLite path or a PostgreSQL URL). Prints ``ready`` once the run has started, then
writes turns (a user message, an assistant message with two tool calls, each result on its own, a closing
answer) with their events through an ``EventRecorder``, until it is killed.
"""

from __future__ import annotations

import asyncio
import sys

from steadyloop.events import (
    AgentStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from steadyloop.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from steadyloop.sessions import EventRecorder, SessionConfig, open_store, reconstruct
from steadyloop.usage import Usage

AGENT = "crash-agent"
#: Small enough that the cap trims mid-turn often, leaving orphan results at the head.
CONFIG = SessionConfig(max_history_entries=40)


async def main(target: str, sid: str, run: str) -> None:
    store = open_store(target, config=CONFIG)
    if await store.get(sid, agent_id=AGENT) is None:
        await store.create(AGENT, session_id=sid)
    reconstruct(await store.load_messages(sid, agent_id=AGENT))  # what a resuming run would send first
    recorder = EventRecorder(store, sid, AGENT)
    await recorder.record(AgentStart(run_id=run))
    print("ready", flush=True)
    step = 0
    while True:
        step += 1
        tag = f"{run}-{step}"
        await store.append_messages(sid, [UserMessage(content=f"turn {tag}")], agent_id=AGENT)
        await recorder.record(TurnStart(step=step, run_id=run))
        for piece in ("thinking ", "about ", tag):
            await recorder.record(MessageUpdate(kind="thinking", delta=piece, step=step, run_id=run))
        for piece in ("calling ", "two ", "tools"):
            await recorder.record(MessageUpdate(kind="text", delta=piece, step=step, run_id=run))
        calls = (ToolCall(f"{tag}-a", "read", {"n": step}), ToolCall(f"{tag}-b", "ls", {}))
        assistant = AssistantMessage(
            content="calling two tools", reasoning=f"thinking about {tag}", tool_calls=calls
        )
        await store.append_messages(sid, [assistant], agent_id=AGENT)
        results = []
        for call in calls:
            await recorder.record(
                ToolExecutionStart(call_id=call.id, name=call.name, arguments=call.arguments)
            )
            result = ToolResultMessage(call_id=call.id, content=f"result of {call.id}", name=call.name)
            await store.append_messages(sid, [result], agent_id=AGENT)
            await recorder.record(
                ToolExecutionEnd(call_id=call.id, name=call.name, result=result, disposition="completed")
            )
            results.append(result)
        await recorder.record(TurnEnd(step=step, message=assistant, tool_results=tuple(results), run_id=run))
        await store.append_messages(sid, [AssistantMessage(content=f"done {tag}")], agent_id=AGENT)
        await store.record_usage(sid, Usage(prompt_tokens=10, completion_tokens=2), agent_id=AGENT, turns=1)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
