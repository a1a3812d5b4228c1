"""The approvals floor as a decision: what lowers it is named, and a held layer gates at least what it does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from steadyloop import ApprovalPolicy, Tool, tool
from steadyloop.server.floor import below_floor, held_to_floor
from steadyloop.spec import ApprovalsSpec
from steadyloop.tools.definition import EFFECT_CLASSES


def _tool(name: str, effect: str | None) -> Tool:
    def body() -> str:
        """A tool."""
        return ""

    body.__name__ = name
    return tool(effect=effect)(body)  # type: ignore[arg-type]


TOOLS = [
    _tool("read_file", "read"),
    _tool("write_file", "mutate-reversible"),
    _tool("run_shell", "destructive"),
]
NAMES = ["read_file", "write_file", "run_shell", "an_mcp_tool"]
EFFECTS = list(EFFECT_CLASSES)

effects = st.lists(st.sampled_from(EFFECTS), unique=True).map(tuple)
overrides = st.dictionaries(st.sampled_from(NAMES), st.booleans(), max_size=4)
timeouts = st.floats(min_value=0.1, max_value=10_000)
floors = st.builds(ApprovalsSpec, require_for=effects, overrides=st.none() | overrides, timeout=timeouts)
asks = st.builds(
    ApprovalsSpec,
    require_for=st.none() | effects,
    overrides=st.none() | overrides,
    timeout=st.none() | timeouts,
)


def _policy(floor: ApprovalsSpec, asked: ApprovalsSpec) -> ApprovalPolicy:
    """The policy a session gets: its layer over the server's (require_for replaced, overrides merged)."""
    return ApprovalPolicy(
        require_for=frozenset(
            asked.require_for if asked.require_for is not None else floor.require_for or ()
        ),  # type: ignore[arg-type]
        overrides={**(floor.overrides or {}), **(asked.overrides or {})},
        timeout_s=asked.timeout if asked.timeout is not None else floor.timeout or 300.0,
    )


def _gates(policy: ApprovalPolicy, name: str, unknown_effect: str | None) -> bool:
    known = {t.name: t for t in TOOLS}
    return policy.requires(known.get(name) or _tool(name, unknown_effect))


@given(floors, asks, st.none() | st.sampled_from(EFFECTS))
def test_a_layer_held_to_the_floor_gates_everything_the_floor_does_and_waits_no_longer(
    floor: ApprovalsSpec, asked: ApprovalsSpec, mcp_effect: str | None
) -> None:
    held = held_to_floor(asked, floor, TOOLS)
    assert below_floor(held, floor, TOOLS) == []
    session, server = _policy(floor, held), _policy(floor, ApprovalsSpec())
    for name in NAMES:
        if _gates(server, name, mcp_effect):
            assert _gates(session, name, mcp_effect), name
    assert session.timeout_s <= server.timeout_s


@given(floors, asks)
def test_a_layer_that_lowers_nothing_is_kept_as_it_is(floor: ApprovalsSpec, asked: ApprovalsSpec) -> None:
    if not below_floor(asked, floor, TOOLS):
        assert held_to_floor(asked, floor, TOOLS) == asked


@given(floors, asks, st.none() | st.sampled_from(EFFECTS))
def test_a_layer_named_as_lowering_nothing_gates_at_least_the_floor(
    floor: ApprovalsSpec, asked: ApprovalsSpec, mcp_effect: str | None
) -> None:
    if below_floor(asked, floor, TOOLS):
        return
    session, server = _policy(floor, asked), _policy(floor, ApprovalsSpec())
    for name in NAMES:
        if _gates(server, name, mcp_effect):
            assert _gates(session, name, mcp_effect), name


def test_each_lowering_is_named() -> None:
    floor = ApprovalsSpec(require_for=("destructive", "mutate-reversible"), overrides=None, timeout=300)
    asked = ApprovalsSpec(
        require_for=("read",), overrides={"run_shell": False, "read_file": False}, timeout=301
    )
    assert below_floor(asked, floor, TOOLS) == [
        "require_for leaves out destructive, mutate-reversible",
        "a decision may take 301 s, the floor 300 s",
        "overrides turns approval off for 'run_shell'",
    ]
    # A tool the floor does not gate may be turned off; one it names itself may not.
    assert below_floor(ApprovalsSpec(overrides={"read_file": False}), floor, TOOLS) == []
    named = ApprovalsSpec(require_for=(), overrides={"read_file": True}, timeout=300)
    assert below_floor(ApprovalsSpec(overrides={"read_file": False}), named, TOOLS) == [
        "overrides turns approval off for 'read_file'"
    ]
    # A name that is none of the server's tools (an MCP server's) counts as gated while any effect is.
    assert below_floor(ApprovalsSpec(overrides={"an_mcp_tool": False}), floor, TOOLS) != []
    assert (
        below_floor(ApprovalsSpec(overrides={"an_mcp_tool": False}), ApprovalsSpec(require_for=()), TOOLS)
        == []
    )
