"""Calls that only a series of numbers nobody wrote tells apart ("Mission 1" to "Mission 5") are one call.

The reading is sans I/O and total; one run goes through the loop against the scripted model server on
loopback, to show the tool is called once."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.steering.decision import ANSWER, Decision
from steadyloop.steering.numbered_calls import without_numbered_calls
from steadyloop.tools.definition import tool

from ._routed import decided_then_answered

REWARDS = [
    {
        "type": "function",
        "function": {
            "name": "rewards",
            "parameters": {
                "type": "object",
                "required": ["game", "level"],
                "properties": {
                    "game": {"type": "string"},
                    "level": {"type": "string"},
                    "mission": {"type": "string"},
                    "trophy": {"type": "string"},
                },
            },
        },
    }
]
FORTNITE = "Find out the rewards for playing Fortnite with different missions and trophies"


def _calls(*arguments: dict[str, Any], name: str = "rewards") -> Decision:
    (first, *more) = [(name, a) for a in arguments]
    return Decision(first[0], first[1], tuple(more))


def _series(n: int, **fixed: Any) -> Decision:
    return _calls(*({**fixed, "mission": f"Mission {i}", "trophy": f"Trophy #{i}"} for i in range(1, n + 1)))


def test_calls_told_apart_by_a_series_nobody_wrote_are_one_call() -> None:
    out = without_numbered_calls(_series(5, game="Fortnite", level="any"), FORTNITE, REWARDS)
    assert out.calls == (("rewards", {"game": "Fortnite", "level": "any"}),)
    # a required argument keeps the first call's value
    levels = _calls(*({"game": "Fortnite", "level": f"Level {i}"} for i in (1, 2, 3)))
    assert without_numbered_calls(levels, "Fortnite rewards for any level", REWARDS).calls == (
        ("rewards", {"game": "Fortnite", "level": "Level 1"}),
    )


def test_a_series_the_request_writes_is_its_own() -> None:
    for request in ("rewards for missions 1 and 2 of Fortnite", "Fortnite's mission2 rewards, and mission1"):
        two = _series(2, game="Fortnite", level="any")
        assert without_numbered_calls(two, request, REWARDS) == two


def test_calls_told_apart_by_anything_else_are_kept() -> None:
    games = _calls(
        {"game": "Fortnite", "mission": "Mission 1"}, {"game": "Minecraft", "mission": "Mission 2"}
    )
    assert without_numbered_calls(games, "rewards in Fortnite and Minecraft", REWARDS) == games
    words = _calls({"game": "Fortnite", "mission": "Storm"}, {"game": "Fortnite", "mission": "Rescue"})
    assert without_numbered_calls(words, FORTNITE, REWARDS) == words
    mixed = _calls({"game": "Fortnite", "mission": "Mission 1"}, {"game": "Fortnite", "mission": "Quest 2"})
    assert without_numbered_calls(mixed, FORTNITE, REWARDS) == mixed
    again = _calls({"game": "Fortnite"}, {"game": "Fortnite"})
    assert without_numbered_calls(again, FORTNITE, REWARDS) == again
    assert without_numbered_calls(Decision(ANSWER, {}), FORTNITE, REWARDS) == Decision(ANSWER, {})


def test_another_tool_s_calls_keep_their_place() -> None:
    decision = Decision(
        "news",
        {"q": "Fortnite"},
        (
            ("rewards", {"game": "Fortnite", "mission": "Mission 1"}),
            ("rewards", {"game": "Fortnite", "mission": "Mission 2"}),
            ("news", {"q": "Minecraft"}),
        ),
    )
    assert without_numbered_calls(decision, FORTNITE, REWARDS).calls == (
        ("news", {"q": "Fortnite"}),
        ("rewards", {"game": "Fortnite"}),
        ("news", {"q": "Minecraft"}),
    )


_value = (
    st.none()
    | st.integers()
    | st.floats()
    | st.text(max_size=10)
    | st.sampled_from(["Mission 1", "Mission 2"])
)


@given(
    request=st.text(max_size=200),
    calls=st.lists(
        st.tuples(
            st.sampled_from(["rewards", "news", "nope"]),
            st.dictionaries(st.sampled_from(["game", "level", "mission", "x"]), _value, max_size=4),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_any_decision_keeps_a_call_of_each_tool_and_invents_nothing(
    request: str, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    decision = Decision(calls[0][0], calls[0][1], tuple(calls[1:]))
    out = without_numbered_calls(decision, request, REWARDS)
    assert {name for name, _ in out.calls} == {name for name, _ in calls}
    assert len(out.calls) <= len(calls)
    for name, arguments in out.calls:
        assert any(n == name and arguments.items() <= a.items() for n, a in calls)


def test_the_reading_is_linear_in_the_request() -> None:
    def timed(n: int) -> float:
        request = "missions 7 and trophies 12345678 " * n
        started = time.perf_counter()
        without_numbered_calls(_series(6, game="Fortnite"), request, REWARDS)
        return time.perf_counter() - started

    timed(1_000)
    assert timed(100_000) < 100 * max(timed(1_000), 1e-4) * 4


asked: list[dict[str, Any]] = []


@tool
def rewards(game: str, mission: str = "", trophy: str = "") -> str:
    """The rewards of a game, for a mission or a trophy."""
    asked.append({"game": game, "mission": mission, "trophy": trophy})
    return f"{game}: skins and V-Bucks"


async def test_a_routed_step_calls_the_tool_once() -> None:
    asked.clear()
    series = [
        {
            "name": "rewards",
            "arguments": {"game": "Fortnite", "mission": f"Mission {i}", "trophy": f"Trophy {i}"},
        }
        for i in (1, 2, 3)
    ]
    result = await decided_then_answered(series, FORTNITE, [rewards], "Skins and V-Bucks.")
    assert asked == [{"game": "Fortnite", "mission": "", "trophy": ""}]
    assert result.turn.content == "Skins and V-Bucks."
