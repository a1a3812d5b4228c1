"""Prompt tokens the real llama-server evaluated over the fewest it could have, across a 10-step tool run.

Each step's minimum is what is new since the previous request: the first request's whole prompt, then only
what the previous reply and this step added (the previous prompt and reply are in the server's KV cache).
The server says what it actually evaluated in every usage report (``prompt - cached``). A ratio of 1.0
means nothing was evaluated twice; the target is <= 1.05.

Run: ``.venv/bin/python bench/prefill.py [BASE_URL]`` (default: start the bundled local server).
"""

from __future__ import annotations

import asyncio
import sys
import uuid

from steadyloop.agent import Agent
from steadyloop.events import Event, UsageReport
from steadyloop.local import LocalServerConfig, running_server
from steadyloop.request_body import ModelParams
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint

FILES = ["alpha", "bravo", "charlie", "delta", "echo"]


@tool
def read_file(name: str) -> str:
    """Read a text file from the project folder.

    Args:
        name: the file name, for example alpha.txt.
    """
    stem = name.split(".")[0].strip().lower()
    return "\n".join(f"{stem} line {i}: value {i * 7 % 23}" for i in range(12))


async def measure(base_url: str) -> float:
    # A fresh nonce in the system prompt keeps an earlier run's cache from flattering the first request.
    system = f"Session {uuid.uuid4().hex[:8]}. You read files with read_file when asked, then summarise in one sentence."
    agent = Agent(
        Endpoint(base_url, request_timeout=120.0),
        ModelParams(model="qwen", temperature=0, max_tokens=60),
        system=system,
        tools=[read_file],
    )
    usage: list[UsageReport] = []

    def keep(event: Event) -> None:
        if isinstance(event, UsageReport):
            usage.append(event)

    agent.subscribe(keep)
    for name in FILES[1:]:
        agent.follow_up(f"Now read {name}.txt with read_file.")
    await agent.prompt(f"Read {FILES[0]}.txt with read_file.")
    evaluated = 0
    minimum = 0
    previous: UsageReport | None = None
    print(f"{'step':>4} {'prompt':>7} {'cached':>7} {'evaluated':>9} {'new':>5}")
    for report in usage:
        turn = report.turn
        spent = turn.prompt_tokens - turn.cached_tokens
        new = (
            turn.prompt_tokens
            if previous is None
            else turn.prompt_tokens - previous.turn.prompt_tokens - previous.turn.completion_tokens
        )
        evaluated += spent
        minimum += max(new, 0)
        print(f"{report.step:>4} {turn.prompt_tokens:>7} {turn.cached_tokens:>7} {spent:>9} {new:>5}")
        previous = report
    ratio = evaluated / minimum
    print(f"requests: {len(usage)}; evaluated {evaluated} prompt tokens, minimum {minimum}")
    print(f"ratio evaluated / minimum: {ratio:.3f}  (target <= 1.05)")
    return ratio


def main() -> None:
    if len(sys.argv) > 1:
        asyncio.run(measure(sys.argv[1]))
        return
    with running_server(LocalServerConfig()) as server:
        asyncio.run(measure(server.base_url))


if __name__ == "__main__":
    main()
