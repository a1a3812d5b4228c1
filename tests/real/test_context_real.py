"""Keeping a run inside a small real window: pruning and folding against llama-server at -c 2048.

The same scripted run (one file read per question, each result about 1,600 characters) completes with
context management on and is refused by the server with it off. Figures are printed (pytest -s).
"""

from __future__ import annotations

import pytest

from steadyloop.agent import Agent
from steadyloop.context.keeper import ContextPolicy
from steadyloop.errors import RunError
from steadyloop.events import ContextCompacted, ContextPruned, Event, UsageReport
from steadyloop.loop import LoopPolicy
from steadyloop.messages import AssistantMessage, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.tools.definition import tool
from steadyloop.wire.endpoints import Endpoint

FILES = ["alpha.txt", "bravo.txt", "charlie.txt", "delta.txt", "echo.txt", "foxtrot.txt"]


@tool
def read_file(name: str) -> str:
    """Read a text file from the project folder.

    Args:
        name: the file name, for example alpha.txt.
    """
    stem = name.split(".")[0].strip().lower() or "unknown"
    lines = [
        f"{stem} record {i}: status nominal, checksum {abs(hash((stem, i))) % 99991:05d}." for i in range(36)
    ]
    return "\n".join(lines)


async def _run(endpoint: Endpoint, context: ContextPolicy | None) -> tuple[Agent, list[Event]]:
    agent = Agent(
        endpoint,
        ModelParams(model="qwen", temperature=0, max_tokens=60),
        system="You read files with read_file when asked and then say in one short sentence what you read.",
        tools=[read_file],
        policy=LoopPolicy(context=context),
    )
    events: list[Event] = []
    agent.subscribe(events.append)
    for name in FILES[1:]:
        agent.follow_up(f"Now read {name} with read_file.")
    await agent.prompt(f"Read {FILES[0]} with read_file.")
    return agent, events


async def test_a_run_that_overflows_the_window_completes_with_pruning_and_a_fold(llama_2k: Endpoint) -> None:
    agent, events = await _run(llama_2k, ContextPolicy(keep_last=1, max_chars=200))
    reads = [c for m in agent.state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    folds = [e for e in events if isinstance(e, ContextCompacted)]
    prunes = [e for e in events if isinstance(e, ContextPruned)]
    usage = [e for e in events if isinstance(e, UsageReport)]
    steps_with_fold = {e.step for e in folds} | {e.step for e in prunes}
    kept = [u for u in usage[1:] if u.step not in steps_with_fold]
    survived = [u.cache_broken is False for u in kept]
    total_prompt = sum(len(str(m)) for m in agent.state.messages)
    print(
        f"\n[context acceptance] reads {len(reads)}, requests {len(usage)}, folds {len(folds)}, prunes {len(prunes)}"
    )
    for fold in folds:
        print(
            f"[context acceptance] fold at step {fold.step}: {fold.tokens_before} -> {fold.tokens_after} tokens, forced={fold.forced}"
        )
    print(f"[context acceptance] prompt tokens per request {[u.turn.prompt_tokens for u in usage]}")
    print(
        f"[context acceptance] cache kept on {sum(survived)} of {len(survived)} requests between folds; transcript {total_prompt} chars"
    )
    # Structure, not the small model's diligence: every question was answered, the window was kept, and
    # the run went through prunes and folds rather than stopping.
    questions = [m for m in agent.state.messages if isinstance(m, UserMessage)]
    assert len(questions) == len(FILES) and isinstance(agent.state.messages[-1], AssistantMessage)
    assert len(reads) >= 2
    assert folds and prunes
    assert all(u.turn.prompt_tokens <= 2048 for u in usage)
    assert all(survived), [(u.step, u.cache_break_reason) for u in kept if u.cache_broken]


async def test_the_same_run_without_context_management_is_refused_by_the_server(llama_2k: Endpoint) -> None:
    with pytest.raises(RunError) as caught:
        await _run(llama_2k, None)
    assert caught.value.reason == "overflow"
    assert "context" in str(caught.value)
