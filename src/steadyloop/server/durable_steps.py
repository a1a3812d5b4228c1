"""Each model request and each tool execution of a durable run as a DBOS step (see ``durable``).

``Checkpoints`` is the Agent's ``StepRecorder`` in a durable server: a request takes the next step ID
when the loop makes it; a batch's calls take theirs in the order the model listed them, before any starts
(``DBOS.reserve_step``), and each runs at its own ID whichever ends first. ``step_ids`` draws again, in a
recovered workflow, the IDs its kept answers and calls took, and ``kept_outputs`` reads what DBOS kept.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from dbos import DBOS, StepReservation
from dbos._error import DBOSWorkflowConflictIDError

from steadyloop import AssistantMessage, Message, RunError, ToolCall

__all__ = [
    "FAILED",
    "INTERRUPTED",
    "MODEL_STEP",
    "Adopted",
    "Checkpoints",
    "Given",
    "in_workflow",
    "interrupted",
    "is_interrupted",
    "kept_outputs",
    "step_ids",
    "tool_step",
]

log = logging.getLogger("steadyloop.server.durable")

T = TypeVar("T")

#: Waits until this node holds the workflow's run; ``False`` once another node took it over.
Gate = Callable[[str], Awaitable[bool]]
#: Told that DBOS refused to keep a step another node's run owns now: the workflow, the call (``None``: a
#: model request) and what the step made here.
Conflict = Callable[[str, "ToolCall | None", Any], Awaitable[None]]


async def _open(_: str) -> bool:
    return True


class _GivenUp(BaseException):
    """Raised in a step this node may no longer run: a ``BaseException``, so DBOS keeps nothing for it."""


async def _ignored(_: str, __: ToolCall | None, ___: Any) -> None:
    return None


#: The name of the step that holds a model request's answer.
MODEL_STEP = "model_request"
#: What a tool call's step keeps when the call was in flight on a node that died and may not run again.
INTERRUPTED = "steadyloop:interrupted"
#: What a model request's step keeps when the request failed (the run ended there; its error is not kept).
FAILED = "steadyloop:failed"
#: Why a run ends on a node that another node took it over from.
TAKEN_OVER = "another node took this run over"


def tool_step(call: ToolCall) -> str:
    """The name of the step that holds a tool call's result: the call's id is in it, so a result is never
    given back to another call (DBOS refuses a step whose name differs from the one kept at its ID)."""
    return f"tool {call.id}"


def in_workflow() -> bool:
    """Whether the caller runs in a DBOS workflow (outside one, the recorder only awaits)."""
    return DBOS.workflow_id is not None


class Checkpoints:
    """The ``StepRecorder`` of durable runs: each model request and each tool execution is a DBOS step.

    A model request is a step started where the loop makes it. A batch's calls draw their step IDs
    (``DBOS.reserve_step``) in the order the model listed them, before any starts, and each runs at its
    own ID when it is cleared to run: the IDs do not depend on which call starts or ends first. Outside a
    workflow the recorder only awaits what it is given.
    """

    def __init__(self, *, gate: Gate = _open, on_conflict: Conflict = _ignored) -> None:
        self._reserved: dict[tuple[str, str], StepReservation] = {}  # (workflow, call id)
        # Calls that ran here whose steps are not kept yet (the database may be away): (call, what it made).
        self._unkept: dict[str, dict[str, tuple[ToolCall, Any]]] = {}
        self._gate = gate
        self._on_conflict = on_conflict

    def unkept(self, workflow_id: str) -> list[tuple[ToolCall, Any]]:
        """The calls of the workflow that ran here and returned, whose steps DBOS has not kept (yet)."""
        return list(self._unkept.pop(workflow_id, {}).values())

    async def model_request(self, send: Callable[[], Awaitable[T]]) -> T:
        if not in_workflow():
            return await send()
        workflow_id = DBOS.workflow_id or ""
        made: list[T] = []  # what this node's request returned, or raised (its step keeps FAILED)
        failed: list[Exception] = []

        async def step() -> Any:
            if not await self._gate(workflow_id):  # sent only while this node holds the run
                raise _GivenUp
            try:
                made.append(await send())
            except Exception as exc:  # not kept itself: an error may not survive DBOS's pickling
                failed.append(exc)
                return FAILED
            return made[0]

        try:
            kept = await DBOS.run_step_async({"name": MODEL_STEP}, step)
        except _GivenUp:
            raise RunError(TAKEN_OVER, reason="error") from None
        except DBOSWorkflowConflictIDError:
            await self._on_conflict(workflow_id, None, made[0] if made else None)
            raise RunError(TAKEN_OVER, reason="error") from None
        except Exception as exc:
            if not (made or failed):
                raise
            # DBOS could not keep the answer (the database is away): it is still this run's, and its
            # step is left as one cut off.
            log.warning("a model request's answer could not be kept: %s", exc)
        if failed:
            raise failed[0]
        if made:
            return made[0]
        if isinstance(kept, str) and kept == FAILED:
            raise RunError(
                "the model request failed on the node that ran it before it stopped; the run ends here",
                reason="error",
            )
        return kept  # type: ignore[no-any-return]

    def tool_batch(self, calls: Sequence[ToolCall]) -> None:
        if not in_workflow():
            return
        workflow_id = DBOS.workflow_id or ""
        # A new batch: the last one's calls that never ran (denied, skipped) keep their gaps.
        for key in [key for key in self._reserved if key[0] == workflow_id]:
            del self._reserved[key]
        for call in calls:
            self._reserved[workflow_id, call.id] = DBOS.reserve_step()

    def adopt(self, reserved: dict[str, StepReservation]) -> None:
        """Have calls run at IDs drawn elsewhere (the resumed run's open calls)."""
        workflow_id = DBOS.workflow_id or ""
        self._reserved.update({(workflow_id, call_id): r for call_id, r in reserved.items()})

    def forget(self, workflow_id: str) -> None:
        for key in [key for key in self._reserved if key[0] == workflow_id]:
            del self._reserved[key]
        self._unkept.pop(workflow_id, None)

    async def tool_execution(self, call: ToolCall, execute: Callable[[], Awaitable[T]]) -> T:
        reserved = self._reserved.pop((DBOS.workflow_id or "", call.id), None) if in_workflow() else None
        if reserved is None:
            return await execute()
        workflow_id = DBOS.workflow_id or ""
        made: list[T] = []

        async def step() -> Any:
            if not await self._gate(workflow_id):  # run only while this node holds the run
                raise _GivenUp
            made.append(await execute())
            self._unkept.setdefault(workflow_id, {})[call.id] = (call, made[0])
            return made[0]

        try:
            kept = await reserved.run_async({"name": tool_step(call)}, step)
            self._unkept.get(workflow_id, {}).pop(call.id, None)
        except _GivenUp:
            raise RunError(TAKEN_OVER, reason="error") from None
        except DBOSWorkflowConflictIDError:
            # Another node owns the run now; a call that completed here is told in the record.
            self._unkept.get(workflow_id, {}).pop(call.id, None)
            await self._on_conflict(workflow_id, call, made[0] if made else None)
            if made:
                return made[0]
            raise RunError(TAKEN_OVER, reason="error") from None
        except Exception as exc:
            if made:  # DBOS could not keep it (it does not pickle; DBOS kept that error at the step)
                log.warning("the result of call %s could not be kept: %s", call.id, exc)
                return made[0]
            # Given back: the error its step kept, not a result. Run again (only calls that may be are
            # given back here), unkept.
            log.warning("call %s kept no result (%s): it runs again", call.id, exc)
            return await execute()
        return made[0] if made else kept


class Adopted:
    """The recorder of the resumed run's open calls: their IDs were drawn by ``step_ids``."""

    def __init__(self, checkpoints: Checkpoints) -> None:
        self._checkpoints = checkpoints

    async def model_request(self, send: Callable[[], Awaitable[T]]) -> T:
        return await send()

    def tool_batch(self, calls: Sequence[ToolCall]) -> None:
        pass

    async def tool_execution(self, call: ToolCall, execute: Callable[[], Awaitable[T]]) -> T:
        return await self._checkpoints.tool_execution(call, execute)


class Given:
    """The recorder giving back a call's kept result: the call completed on the node that died."""

    def __init__(self, kept: dict[str, Any]) -> None:
        self._kept = kept

    async def model_request(self, send: Callable[[], Awaitable[T]]) -> T:
        return await send()

    def tool_batch(self, calls: Sequence[ToolCall]) -> None:
        pass

    async def tool_execution(self, call: ToolCall, execute: Callable[[], Awaitable[T]]) -> T:
        return self._kept[call.id]  # type: ignore[no-any-return]


def step_ids(messages: Sequence[Message], base: int) -> dict[str, StepReservation]:
    """Draw again the step IDs the run's kept answers and their calls took, in the order they took them;
    returns the ones of the last answer's calls, by call id.

    After the first step (the history's length at the start, ID 1), a run draws one ID per model request
    and one per call of its answer, before any call starts: every answer the history kept since
    ``base`` came from one request, and lists its calls. The IDs that are not run again leave their
    kept outputs where they are; the next request the resumed run makes gets the ID after them.
    """
    last: dict[str, StepReservation] = {}
    for message in messages[base:]:
        if isinstance(message, AssistantMessage):
            DBOS.reserve_step()  # its request: answered and kept, never run again
            last = {call.id: DBOS.reserve_step() for call in message.tool_calls}
    return last


async def kept_outputs(workflow_id: str) -> dict[int, tuple[str, Any]]:
    """The steps of the workflow for which DBOS kept an output, by ID: (name, output).

    Read in a context of its own, outside the workflow's: DBOS takes a call made inside a workflow for
    one of its steps, which would draw an ID the run's replay does not expect.
    """
    steps = await asyncio.create_task(
        DBOS.list_workflow_steps_async(workflow_id), context=contextvars.Context()
    )
    return {
        int(step["function_id"]): (str(step["function_name"]), step["output"])
        for step in steps
        if step["error"] is None and step["output"] is not None
    }


async def interrupted() -> str:
    return INTERRUPTED


def is_interrupted(kept: object) -> bool:
    return isinstance(kept, str) and kept == INTERRUPTED
