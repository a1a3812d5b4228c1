"""Deciding whether a run goes on after a step, and with what.

In order: every call asked to terminate, the host's ``should_stop_after_turn``, steering queued while the
step ran, the tool calls' results to read, the follow-ups queued for when the model stops, and last, an
answer that misses the response schema, sent back with the problem. Whatever means another request is
held to the run's two budgets at this one point (``max_turns``, ``max_tool_iterations``), so both stop the
run the same way.
"""

from __future__ import annotations

import inspect

from ..errors import OutputInvalid, RunLimitReached
from ..messages import Message, UserMessage
from ..structured import OutputMismatch, read_structured, response_schema
from ..tools.batch import BatchOutcome
from .state import RunState

__all__ = ["go_on"]

_FIX = (
    "Your answer does not match the required JSON schema: {problem}. Reply again with only the JSON value "
    "that matches the schema, and nothing else."
)


async def go_on(run: RunState, batch: BatchOutcome | None) -> bool:
    """Whether to send another request; the messages it adds are queued on ``run.announce``.

    Raises:
        RunLimitReached: the run would go on past ``max_turns`` or ``max_tool_iterations``.
        OutputInvalid: the final answer still misses the response schema after ``output_retries``.
    """
    if batch is not None and batch.terminate:
        run.outcome = "completed"
        return False
    stop = run.config.hooks.should_stop_after_turn
    if stop is not None:
        verdict = stop(run.last_turn, run.transcript)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict:
            run.outcome = "stopped"
            return False
    queues = run.config.queues
    steering = list(queues.steering()) if queues.steering is not None else []
    if steering:
        return _again(run, steering, answering_tools=batch is not None)
    if batch is not None:
        return _again(run, [], answering_tools=True)
    later = list(queues.follow_up()) if queues.follow_up is not None else []
    if later:
        return _again(run, later, answering_tools=False)
    problem = _off_schema(run)
    if problem is not None:
        if run.output_retries >= run.config.policy.output_retries:
            raise OutputInvalid(
                f"the answer does not match the response schema: {problem}",
                problem=problem,
                messages=run.transcript,
                usage=run.totals,
                steps=run.steps,
            )
        run.output_retries += 1
        return _again(run, [UserMessage(content=_FIX.format(problem=problem))], answering_tools=False)
    run.outcome = "completed"
    return False


def _again(run: RunState, added: list[Message], *, answering_tools: bool) -> bool:
    policy = run.config.policy
    if policy.max_turns is not None and run.steps >= policy.max_turns:
        raise RunLimitReached(
            f"stopped after {run.steps} requests (max_turns); the model wanted to go on",
            limit="max_turns",
            value=policy.max_turns,
            reason="max_turns",
            messages=run.transcript,
            usage=run.totals,
            steps=run.steps,
        )
    if answering_tools and run.tool_steps >= policy.max_tool_iterations:
        raise RunLimitReached(
            f"stopped after {run.tool_steps} tool iterations (max_tool_iterations)",
            limit="max_tool_iterations",
            value=policy.max_tool_iterations,
            reason="max_iterations",
            messages=run.transcript,
            usage=run.totals,
            steps=run.steps,
        )
    run.transcript.extend(added)
    run.announce = added
    return True


def _off_schema(run: RunState) -> str | None:
    """What is wrong with the final answer against the response schema; ``None`` when it fits (or none
    was asked for). A fitting answer's value is kept as the run's output."""
    schema = response_schema(run.config.params.response_format)
    if schema is None:
        return None
    try:
        run.output = read_structured(run.last_turn.content, schema)
    except OutputMismatch as problem:
        return str(problem)
    return None
