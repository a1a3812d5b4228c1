"""Prompt tokens the real llama-server evaluated over the fewest it could have.

Each request's minimum is what is new since the previous request: the first request's whole prompt, then
only what the previous reply and this step added (the previous prompt and reply are in the server's KV
cache). The server says what it actually evaluated in every usage report (``timings.prompt_n``, i.e.
prompt minus ``cache_n``). A ratio of 1.0 means nothing was evaluated twice; the target is <= 1.05.

Two runs:

- ``tools``: one prompt and its follow-ups, ten requests of file reads.
- ``long``: a conversation of many prompts in a small window (2,048 tokens planned against), with
  lifecycle hook context on every question, pruning and folds. A fold rewrites the head on purpose, so
  the request that folds (and its summary side request) is left out; every other request, including the
  first of each new prompt, must cost only what is new. This is what the Agent's ``StablePrefix`` holds:
  the system prompt and tools frozen, hook context kept on the question it was first sent with, and
  nothing rewritten between folds.

Run: ``.venv/bin/python bench/prefill.py [BASE_URL]`` (default: start the bundled local server, and a
second one with one slot for the long run). The long run needs a server whose window is at least 4,096.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from steadyloop.agent import Agent
from steadyloop.context.folding import summariser
from steadyloop.context.keeper import ContextPolicy
from steadyloop.events import ContextCompacted, ContextPruned, Event, Notice, PrefixRewritten, UsageReport
from steadyloop.hooks import HookContext, HookOutcome
from steadyloop.local import LocalServerConfig, key_for, running_server
from steadyloop.loop import LifecycleHooks, LoopPolicy, RunConfig
from steadyloop.request_body import ModelParams
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint

FILES = ["alpha", "bravo", "charlie", "delta", "echo"]
LONG_FILES = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
]  # fmt: skip


@tool
def read_file(name: str) -> str:
    """Read a text file from the project folder.

    Args:
        name: the file name, for example alpha.txt.
    """
    stem = name.split(".")[0].strip().lower()
    return "\n".join(f"{stem} line {i}: value {i * 7 % 23}" for i in range(12))


@tool
def read_record(name: str) -> str:
    """Read a record file from the project folder.

    Args:
        name: the file name, for example alpha.txt.
    """
    stem = name.split(".")[0].strip().lower() or "unknown"
    return "\n".join(f"{stem} record {i}: status nominal, reading {i * 37 % 101:03d}." for i in range(24))


@dataclass(frozen=True, slots=True)
class Row:
    """One request as the server counted it."""

    step: str
    prompt: int
    cached: int
    new: int
    counted: bool  # False for the first request and for the requests that folded

    @property
    def evaluated(self) -> int:
        return self.prompt - self.cached


def rows_of(events: Sequence[Event]) -> list[Row]:
    """Every main request of the events, with what was new in it and whether it counts."""
    folds = {(e.run_id, e.step) for e in events if isinstance(e, ContextCompacted | ContextPruned)}
    rows: list[Row] = []
    previous: UsageReport | None = None
    runs: dict[str, int] = {}
    for report in (e for e in events if isinstance(e, UsageReport)):
        turn = report.turn
        new = (
            turn.prompt_tokens
            if previous is None
            else turn.prompt_tokens - previous.turn.prompt_tokens - previous.turn.completion_tokens
        )
        run = runs.setdefault(report.run_id, len(runs) + 1)
        folded = (report.run_id, report.step) in folds
        rows.append(
            Row(
                step=f"{run}.{report.step}" + (" fold" if folded else ""),
                prompt=turn.prompt_tokens,
                cached=turn.cached_tokens,
                new=max(new, 0),
                counted=previous is not None and not folded,
            )
        )
        previous = report
    return rows


def report(title: str, rows: Sequence[Row]) -> float:
    print(f"\n{title}")
    print(f"{'request':>10} {'prompt':>7} {'cached':>7} {'evaluated':>9} {'new':>5}")
    for row in rows:
        mark = "" if row.counted else "  (not counted)"
        print(f"{row.step:>10} {row.prompt:>7} {row.cached:>7} {row.evaluated:>9} {row.new:>5}{mark}")
    counted = [row for row in rows if row.counted]
    evaluated = sum(row.evaluated for row in counted)
    minimum = sum(row.new for row in counted)
    ratio = evaluated / minimum if minimum else float("nan")
    print(
        f"requests counted: {len(counted)} of {len(rows)}; evaluated {evaluated} prompt tokens, minimum {minimum}"
    )
    print(f"ratio evaluated / minimum: {ratio:.3f}  (target <= 1.05)")
    return ratio


async def measure(base_url: str) -> float:
    """One prompt and its follow-ups: ten requests of file reads."""
    # A fresh nonce in the system prompt keeps an earlier run's cache from flattering the first request.
    system = f"Session {uuid.uuid4().hex[:8]}. You read files with read_file when asked, then summarise in one sentence."
    agent = Agent(
        Endpoint(base_url, key_for(base_url), request_timeout=120.0),
        ModelParams(model="qwen", temperature=0, max_tokens=60),
        system=system,
        tools=[read_file],
    )
    events: list[Event] = []
    agent.subscribe(events.append)
    for name in FILES[1:]:
        agent.follow_up(f"Now read {name}.txt with read_file.")
    await agent.prompt(f"Read {FILES[0]}.txt with read_file.")
    # Nothing folds here, and the first request counts too (its minimum is its whole prompt).
    rows = [replace(row, counted=True) for row in rows_of(events)]
    return report("tools: one prompt, ten requests", rows)


def turn_notes() -> LifecycleHooks:
    """A ``before_turn`` hook that puts a different note on every question, as a memory hook would."""
    count = 0

    async def run(event: Any, context: HookContext, *, cancel: Any = None) -> list[HookOutcome]:
        nonlocal count
        if event != "before_turn":
            return []
        count += 1
        text = f"Turn {count}. The user reviews the records in order and wants one sentence per file."
        return [HookOutcome(hook_id="notes", text=text)]

    return LifecycleHooks(run=run, preface="Notes for this turn:")


class Unheld(Agent):
    """The same agent without its stable prefix: the baseline the long run is compared with."""

    def run_config(self) -> RunConfig:
        return replace(super().run_config(), prefix=None)


async def measure_long(
    base_url: str, files: Sequence[str] = LONG_FILES, *, held: bool = True
) -> tuple[float, list[Row]]:
    """Many prompts in a small window, with hook context, pruning and folds (``held``: with the prefix)."""
    system = f"Session {uuid.uuid4().hex[:8]}. You read records with read_record when asked, then say in one sentence what you read."
    endpoint = Endpoint(base_url, key_for(base_url), request_timeout=600.0)
    # Short summaries: what is measured is the prefill between folds, not the notes a fold writes.
    notes = summariser(endpoint, "qwen", max_tokens=160)
    agent = (Agent if held else Unheld)(
        endpoint,
        ModelParams(model="qwen", temperature=0, max_tokens=60),
        system=system,
        tools=[read_record],
        policy=LoopPolicy(
            context_limit=2048, context=ContextPolicy(keep_last=2, max_chars=400, summarise=notes)
        ),
        lifecycle=turn_notes(),
    )
    events: list[Event] = []
    agent.subscribe(events.append)
    for n, name in enumerate(files, 1):
        await agent.prompt(f"Read {name}.txt with read_record.")
        print(f"prompt {n}/{len(files)} done", file=sys.stderr, flush=True)
    rows = rows_of(events)
    folds = sum(isinstance(e, ContextCompacted) for e in events)
    prunes = sum(isinstance(e, ContextPruned) for e in events)
    rewrites = sum(isinstance(e, PrefixRewritten) for e in events)
    prefix_notes = [e.text for e in events if isinstance(e, Notice) and e.name == "prefix"]
    title = (
        f"long{'' if held else ' without the stable prefix (baseline)'}: {len(files)} prompts, hook "
        f"context on each, {folds} folds, {prunes} prunes, {rewrites} rewrites told; steps between folds"
    )
    ratio = report(title, rows)
    for text in prefix_notes:
        print(f"prefix notice: {text}")
    return ratio, rows


def main() -> None:
    if len(sys.argv) > 1:
        asyncio.run(measure(sys.argv[1]))
        asyncio.run(long_side_by_side(sys.argv[1]))
        return
    # The 0.5B model, as the figures this bench has published were measured on, not the bundled default.
    with running_server(LocalServerConfig(model="qwen")) as server:
        asyncio.run(measure(server.base_url))
    # One slot, so the window is the whole context and the cache is the slot's.
    with running_server(LocalServerConfig(model="qwen", ctx=4096, extra_args=("-np", "1"))) as server:
        asyncio.run(long_side_by_side(server.base_url))


async def long_side_by_side(base_url: str) -> None:
    held, _ = await measure_long(base_url)
    unheld, _ = await measure_long(base_url, held=False)
    print(f"\nlong run, between folds: {held:.3f} with the stable prefix, {unheld:.3f} without")


if __name__ == "__main__":
    main()
