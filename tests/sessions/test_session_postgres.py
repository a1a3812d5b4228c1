"""What the PostgreSQL store adds to the protocol: many writers at once, migrations shared by nodes, and a
live feed of appends that other processes hear (the protocol itself is in test_session_store.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from steadyloop.errors import InvalidInput
from steadyloop.events import Event, Notice
from steadyloop.messages import AssistantMessage, UserMessage
from steadyloop.sessions import (
    AppendFeed,
    StoreUnavailable,
    follow,
    is_shared_store,
    open_store,
)
from steadyloop.sessions._pg_schema import MIGRATIONS
from steadyloop.sessions.postgres import PostgresSessionStore

A = "agent-a"


@pytest.fixture
async def two_nodes(postgres_url: str) -> AsyncIterator[tuple[PostgresSessionStore, PostgresSessionStore]]:
    """Two stores on one database, each with its own pool: what two machines would have."""
    first, second = PostgresSessionStore(postgres_url), PostgresSessionStore(postgres_url)
    yield first, second
    await first.close()
    await second.close()


async def test_two_writers_get_unique_increasing_seqs_and_never_interleave(
    two_nodes: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = two_nodes
    info = await first.create(A)
    sid = info.session_id
    batches = 40

    async def writer(store: PostgresSessionStore, name: str) -> list[int]:
        lasts = []
        for n in range(batches):
            events: list[Event] = [Notice(text=f"{name}-{n}-{k}") for k in range(3)]
            lasts.append(await store.append_events(sid, events, agent_id=A))
            turn = [UserMessage(content=f"{name}-{n}-q"), AssistantMessage(content=f"{name}-{n}-a")]
            await store.append_messages(sid, turn, agent_id=A)
        return lasts

    results = await asyncio.gather(
        *(writer(s, f"w{i}") for i, s in enumerate([first, second, first, second]))
    )
    returned = sorted(seq for lasts in results for seq in lasts)
    assert len(set(returned)) == len(returned)  # each write got its own last seq
    for lasts in results:
        assert lasts == sorted(lasts)  # a writer's own writes come back increasing
    events = await second.load_events(sid, agent_id=A)
    assert [seq for seq, _ in events] == list(range(1, 4 * batches * 3 + 1))
    texts = [e.text for _, e in events if isinstance(e, Notice)]
    for start in range(0, len(texts), 3):  # one write's three events sit together, in their order
        prefix = texts[start].rsplit("-", 1)[0]
        assert texts[start : start + 3] == [f"{prefix}-{k}" for k in range(3)]
    history = await first.load_messages(sid, agent_id=A)
    assert len(history) == 4 * batches * 2
    for question, answer in zip(history[::2], history[1::2], strict=True):
        assert answer.content == question.content[:-1] + "a"  # the pair one write appended stays a pair


async def test_two_nodes_opening_a_fresh_database_migrate_it_once(postgres_url: str) -> None:
    stores = [PostgresSessionStore(postgres_url) for _ in range(4)]
    try:
        await asyncio.gather(*(s.create(A, session_id=f"s{i}") for i, s in enumerate(stores)))
        with psycopg.connect(postgres_url) as conn:
            versions = [row[0] for row in conn.execute("SELECT version FROM steadyloop.migrations")]
        assert versions == list(range(1, len(MIGRATIONS) + 1))
    finally:
        for s in stores:
            await s.close()


async def test_a_database_from_a_newer_steadyloop_is_refused(postgres_url: str) -> None:
    async with PostgresSessionStore(postgres_url) as store:
        await store.create(A)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO steadyloop.migrations (version) VALUES (99)")
    async with PostgresSessionStore(postgres_url) as store:
        with pytest.raises(InvalidInput, match="newer than this steadyloop"):
            await store.list(A)


async def test_the_same_id_created_on_two_nodes_at_once_is_refused_once(
    two_nodes: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = two_nodes
    await first.list(A)  # both migrated, so the race is the create's
    outcomes = await asyncio.gather(
        first.create(A, session_id="same"), second.create(A, session_id="same"), return_exceptions=True
    )
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], InvalidInput)
    assert "already in use" in str(refused[0])


async def test_an_unreachable_database_is_a_typed_error_without_the_password() -> None:
    with socket_free_port() as port:
        store = PostgresSessionStore(f"postgresql://me:s3cret@127.0.0.1:{port}/x", connect_timeout=1.0)
        with pytest.raises(StoreUnavailable) as caught:
            await store.list(A)
        assert "s3cret" not in str(caught.value)
        await store.close()


REFUSED_OPTIONS = {
    "sslmode": ("?sslmode=bogus", "sslmode"),
    "port out of range": (":99999", "port"),
    "port not a number": (":abc", "port"),
    "target_session_attrs": ("?target_session_attrs=primaryish", "target_session_attrs"),
    "ports that do not match the hosts": ("?port=1,2,3", "port"),
    "hostaddr": ("?hostaddr=1.2.3.4.5", "1.2.3.4.5"),
}


@pytest.mark.parametrize("options", list(REFUSED_OPTIONS.values()), ids=list(REFUSED_OPTIONS))
def test_an_option_libpq_refuses_is_invalid_input_at_once_naming_it(options: tuple[str, str]) -> None:
    # The pool would retry these until the connect timeout (an hour here) and lose the reason: the store
    # refuses them when it is built, before any connection is tried.
    suffix, named = options
    if suffix.startswith(":"):
        url = f"postgresql://me:s3cret@127.0.0.1{suffix}/x"
    else:
        url = f"postgresql://me:s3cret@127.0.0.1:1/x{suffix}"
    with pytest.raises(InvalidInput, match="libpq refuses") as caught:
        PostgresSessionStore(url, connect_timeout=3600)
    assert named in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_an_unknown_parameter_is_invalid_input_without_the_password() -> None:
    with pytest.raises(InvalidInput, match="not a PostgreSQL URL") as caught:
        PostgresSessionStore("postgresql://me:s3cret@127.0.0.1:1/x?colour=blue", connect_timeout=3600)
    assert "s3cret" not in str(caught.value)


async def test_options_libpq_takes_still_reach_the_server(postgres_url: str) -> None:
    # The check starts libpq on a socket folder that cannot exist: what it refuses there is the options,
    # never the missing server, so a store on a good URL with options set works as before.
    url = f"{postgres_url}?sslmode=disable&application_name=steadyloop-test&target_session_attrs=any"
    async with PostgresSessionStore(url) as store:
        info = await store.create(agent_id=A)
        assert [s.session_id for s in await store.list(A)] == [info.session_id]


def test_a_server_that_is_not_there_yet_is_not_refused_when_the_store_is_built() -> None:
    # A missing socket or an unknown host may be a server still starting: the pool waits for those.
    PostgresSessionStore("host=/nonexistent/folder dbname=x", connect_timeout=1)
    PostgresSessionStore("postgresql://me@db.invalid:5432/x", connect_timeout=1)


def test_open_store_picks_the_store_from_the_target(tmp_path: object) -> None:
    assert isinstance(open_store("postgresql://u@127.0.0.1/db"), PostgresSessionStore)
    assert isinstance(open_store("postgres://u@127.0.0.1/db"), AppendFeed)
    assert is_shared_store("postgresql://u@h/db") and not is_shared_store(None)
    assert not is_shared_store("/tmp/x.db")
    with pytest.raises(InvalidInput, match="no session store reads mysql"):
        open_store("mysql://u@h/db")
    with pytest.raises(InvalidInput, match="needs a path"):
        open_store("sqlite://")


async def test_another_node_hears_each_append_once_committed(
    two_nodes: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = two_nodes
    sid = (await first.create(A)).session_id
    heard: asyncio.Queue[tuple[str | None, int]] = asyncio.Queue()
    stop = await second.subscribe(lambda s, seq: heard.put_nowait((s, seq)))
    await first.append_events(sid, [Notice(text="one"), Notice(text="two")], agent_id=A)
    assert await asyncio.wait_for(heard.get(), 30) == (sid, 2)
    stop()
    await first.append_events(sid, [Notice(text="three")], agent_id=A)
    await first.append_events(sid, [Notice(text="after")], agent_id=A)
    # A subscriber that stopped hears nothing more; one still subscribed on the same node does.
    again: asyncio.Queue[tuple[str | None, int]] = asyncio.Queue()
    stop_again = await second.subscribe(lambda s, seq: again.put_nowait((s, seq)))
    await first.append_events(sid, [Notice(text="five")], agent_id=A)
    got = [await asyncio.wait_for(again.get(), 30)]
    while got[-1] != (sid, 5):  # notices of the writes before it may still be on their way
        got.append(await asyncio.wait_for(again.get(), 30))
    assert [seq for _, seq in got] == sorted({seq for _, seq in got})
    assert heard.empty()
    stop_again()


async def test_follow_on_one_node_sees_another_nodes_run_without_gap_or_repeat_across_a_lost_listener(
    two_nodes: tuple[PostgresSessionStore, PostgresSessionStore], postgres_url: str
) -> None:
    writer, reader = two_nodes
    sid = (await writer.create(A)).session_id
    await writer.append_events(sid, [Notice(text=f"before {i}") for i in range(5)], agent_id=A)
    seen: list[int] = []
    halfway, done = asyncio.Event(), asyncio.Event()

    async def watch() -> None:
        async for seq, _ in follow(reader, sid, agent_id=A, after_seq=2):
            seen.append(seq)
            if seq == 30:
                halfway.set()
            if seq == 60:
                done.set()
                return

    task = asyncio.create_task(watch())
    for i in range(25):
        await writer.append_events(sid, [Notice(text=f"live {i}")], agent_id=A)
    await asyncio.wait_for(halfway.wait(), 30)
    # The reader's listening connection dies (a restart, a network cut); appends go on meanwhile.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        )
    for i in range(30):
        await writer.append_events(sid, [Notice(text=f"later {i}")], agent_id=A)
    await asyncio.wait_for(done.wait(), 30)
    await task
    assert seen == list(range(3, 61))


class socket_free_port:
    """A loopback port nothing listens on, for as long as the block runs."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))  # bound, never listening: connects are refused
        return int(self._sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
