"""The operator's approvals are a floor: a session may gate more and wait less, never gate less or wait longer.

The floor is the server's own approvals (``ServerSettings.approval_policy`` with the approvals of the
server's agent document over it). A session asks for its own in its create request (``approvals``, or
the ``[approvals]`` of its agent document). ``below_floor`` names everything such a request would lower,
so the API refuses it whole; ``held_to_floor`` raises a kept layer to the floor when a session is built,
so a session stored before the floor was raised (or by an older server) never runs under it.

A tool is gated by the floor when the floor's overrides say so, else when its effect is one the floor
gates. A name that is not one of the server's own tools (an MCP server's, whose effect is known only once
the server is connected) counts as gated whenever the floor gates any effect: turning it off is lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from steadyloop import Tool
from steadyloop.spec import ApprovalsSpec

__all__ = ["below_floor", "held_to_floor"]


def _floor_gates(name: str, floor: ApprovalsSpec, tools: Sequence[Tool]) -> bool:
    fixed = (floor.overrides or {}).get(name)
    if fixed is not None:
        return fixed
    gated = set(floor.require_for or ())
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return bool(gated)
    return tool.effect is not None and tool.effect in gated


def below_floor(asked: ApprovalsSpec, floor: ApprovalsSpec, tools: Sequence[Tool]) -> list[str]:
    """Each way ``asked`` would lower ``floor``, in words; empty when it only keeps or tightens it.

    Args:
        asked: the session's own approvals (``None`` fields say nothing, and keep the floor's).
        floor: the server's approvals.
        tools: the server's own tools, whose effects tell which of them the floor gates.
    """
    problems: list[str] = []
    if asked.require_for is not None:
        left_out = sorted(set(floor.require_for or ()) - set(asked.require_for))
        if left_out:
            problems.append(f"require_for leaves out {', '.join(left_out)}")
    if asked.timeout is not None and floor.timeout is not None and asked.timeout > floor.timeout:
        problems.append(f"a decision may take {asked.timeout:g} s, the floor {floor.timeout:g} s")
    for name, gated in sorted((asked.overrides or {}).items()):
        if not gated and _floor_gates(name, floor, tools):
            problems.append(f"overrides turns approval off for {name!r}")
    return problems


def held_to_floor(asked: ApprovalsSpec, floor: ApprovalsSpec, tools: Sequence[Tool]) -> ApprovalsSpec:
    """``asked`` with whatever lowers ``floor`` raised to it: the effects the floor gates added, the
    timeout cut to the floor's, and an override that turns a gated tool's approval off dropped."""
    require_for = asked.require_for
    if require_for is not None:
        require_for = (*require_for, *sorted(set(floor.require_for or ()) - set(require_for)))
    timeout = asked.timeout
    if timeout is not None and floor.timeout is not None:
        timeout = min(timeout, floor.timeout)
    overrides = asked.overrides
    if overrides is not None:
        overrides = {n: g for n, g in overrides.items() if g or not _floor_gates(n, floor, tools)}
    return replace(asked, require_for=require_for, timeout=timeout, overrides=overrides)
