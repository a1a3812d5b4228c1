"""``swap_state`` on PostgreSQL: a compare-and-set that two processes racing on one session cannot both
win, which is what keeps two server nodes from starting a run on one session at the same instant."""

from __future__ import annotations

import asyncio

from steadyloop.sessions import SessionNotFound, StateSwap
from steadyloop.sessions.postgres import PostgresSessionStore

A = "agent-a"
RACERS = 16


async def test_many_swaps_racing_from_two_stores_on_a_free_state_let_exactly_one_win(
    postgres_url: str,
) -> None:
    first, second = PostgresSessionStore(postgres_url), PostgresSessionStore(postgres_url)
    try:
        assert isinstance(first, StateSwap)
        sid = (await first.create(A)).session_id

        def free(current: str | None) -> bool:
            return current is None or current == "idle"

        for round_ in range(3):  # a free state (absent, then released) is taken by one racer per round
            results = await asyncio.gather(
                *(
                    store.swap_state(sid, "run", f"taken-{round_}-{n}", agent_id=A, allow=free)
                    for n, store in enumerate([first, second] * (RACERS // 2))
                )
            )
            winners = [n for n, (wrote, _) in enumerate(results) if wrote]
            assert len(winners) == 1, results
            taken = f"taken-{round_}-{winners[0]}"
            # Every loser saw the winner's value, not a stale free one.
            assert all(seen == taken for wrote, seen in results if not wrote)
            assert await second.load_state(sid, "run", agent_id=A) == taken
            await first.save_state(sid, "run", "idle", agent_id=A)
    finally:
        await first.close()
        await second.close()


async def test_a_swap_on_another_agents_session_is_refused(postgres_url: str) -> None:
    async with PostgresSessionStore(postgres_url) as store:
        sid = (await store.create(A)).session_id
        try:
            await store.swap_state(sid, "run", "x", agent_id="agent-b", allow=lambda _: True)
        except SessionNotFound:
            pass
        else:
            raise AssertionError("another agent's session was written")
        assert await store.load_state(sid, "run", agent_id=A) is None
