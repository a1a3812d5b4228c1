"""The durable runs' ``StepRecorder`` (``Checkpoints``) inside real DBOS workflows, on DBOS's SQLite system
database in-process: each request and each call is a step at the ID it drew (a batch's calls in the order
listed, whichever ends first); a workflow run again (a fork from past its last step) gets every kept output
back without sending or running anything, and a call whose result could not be kept runs again; a failed
request keeps only that it failed. Outside a workflow the recorder only awaits what it is given."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from dbos import DBOS, SetWorkflowID

from steadyloop import ToolCall
from steadyloop.server.durable_steps import FAILED, MODEL_STEP, Checkpoints, tool_step

CALLS = [ToolCall(id="c1", name="t", arguments={}), ToolCall(id="c2", name="t", arguments={})]
checkpoints = Checkpoints()
done: Counter[str] = Counter()  # what was really sent or run


class Unpicklable:
    """A tool's output DBOS cannot keep (a lock does not pickle)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()


@DBOS.workflow(name="checkpoints_probe")
async def probe(fail_request: bool) -> str:
    async def answer() -> str:
        done["request"] += 1
        if fail_request:
            raise ValueError("the endpoint refused")
        return "an answer"

    async def first() -> Unpicklable:
        done["c1"] += 1
        return Unpicklable()

    async def second() -> str:
        done["c2"] += 1
        return "second result"

    try:
        said = await checkpoints.model_request(answer)
    except ValueError as exc:
        return f"raised {exc}"
    checkpoints.tool_batch(CALLS)
    # The second call runs (and ends) first: its step is still the one its call drew, after the first's.
    second_result = await checkpoints.tool_execution(CALLS[1], second)
    first_result = await checkpoints.tool_execution(CALLS[0], first)
    assert isinstance(first_result, Unpicklable)
    return f"{said} / {second_result}"


@pytest.fixture
async def dbos(tmp_path: Path) -> AsyncIterator[None]:
    done.clear()
    DBOS(config={"name": "checkpoints-probe", "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}"})
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy(destroy_registry=False)


async def steps(workflow_id: str) -> list[tuple[int, str, Any]]:
    kept = await DBOS.list_workflow_steps_async(workflow_id)
    return [
        (step["function_id"], step["function_name"], step["output"] if step["error"] is None else "error")
        for step in kept
    ]


async def test_requests_and_calls_are_steps_and_a_rerun_gets_them_back(dbos: None) -> None:
    with SetWorkflowID("probe-ok"):
        handle = await DBOS.start_workflow_async(probe, False)
    assert await handle.get_result() == "an answer / second result"
    assert await steps("probe-ok") == [
        (1, MODEL_STEP, "an answer"),
        (2, tool_step(CALLS[0]), "error"),  # its output does not pickle: DBOS kept that error
        (3, tool_step(CALLS[1]), "second result"),
    ]
    assert done == Counter(request=1, c1=1, c2=1)

    again = await DBOS.fork_workflow_async("probe-ok", 4)  # every step copied: the workflow replays them
    assert await again.get_result() == "an answer / second result"
    assert done == Counter(request=1, c1=2, c2=1), "only the call whose result was not kept ran again"


async def test_a_failed_request_raises_its_own_error_and_keeps_only_that_it_failed(dbos: None) -> None:
    with SetWorkflowID("probe-failed"):
        handle = await DBOS.start_workflow_async(probe, True)
    assert await handle.get_result() == "raised the endpoint refused"
    assert await steps("probe-failed") == [(1, MODEL_STEP, FAILED)]


async def test_outside_a_workflow_the_recorder_only_awaits() -> None:
    async def answer() -> str:
        return "plain"

    assert await checkpoints.model_request(answer) == "plain"
    checkpoints.tool_batch(CALLS)
    assert await checkpoints.tool_execution(CALLS[0], answer) == "plain"
