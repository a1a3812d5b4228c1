"""An Agent that moves about its session's tree: the branch it leaves is summarised into an entry (custom
instructions, a token reserve, the files carried forward), an aborted or failed summary moves nothing, and
the tree is there again after a reload."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.context.branches import BRANCH_SUMMARY_LEAD, BRANCH_SUMMARY_PROMPT, BranchFiles
from steadyloop.sessions import InMemorySessionStore, SQLiteSessionStore
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import RecordedRequest, ScriptedServer

A = "agent-1"


@sl.tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: where it is.
    """
    return f"contents of {path}"


@sl.tool
def write_file(path: str, text: str) -> str:
    """Write a file.

    Args:
        path: where it goes.
        text: what it holds.
    """
    return "written"


def answer(text: str) -> Any:
    return Reply.stream(stream_of(text))


def call(name: str, id: str, **arguments: Any) -> Any:
    return Reply.stream(stream_of(tool_calls=[{"id": id, "name": name, "arguments": arguments}]))


def is_branch_summary(request: RecordedRequest) -> bool:
    return bool(request.json["messages"][0]["content"] == BRANCH_SUMMARY_PROMPT)


CONVERSATION = [
    answer("Ready."),
    call("write_file", "w1", path="b.py", text="x = 1"),
    answer("Wrote b.py."),
    call("read_file", "r1", path="c.txt"),
    answer("c.txt says hello."),
]


async def converse(agent: sl.Agent) -> None:
    for question in ("Set up.", "Edit b.py.", "Read c.txt."):
        await agent.prompt(question)


def agent_in(server: ScriptedServer, session: sl.AgentSession, **options: Any) -> sl.Agent:
    return sl.Agent(
        sl.Endpoint(server.base_url),
        "m",
        system="Be brief.",
        tools=[read_file, write_file],
        session=session,
        **options,
    )


async def test_the_branch_left_behind_becomes_a_summary_entry_with_its_files(tmp_path: Path) -> None:
    replies = [*CONVERSATION, answer("Tried an edit and a read."), answer("Fresh start.")]
    async with ScriptedServer(*replies) as server, SQLiteSessionStore(tmp_path / "s.db") as store:
        session = await store.session(agent_id=A)
        agent = agent_in(server, session)
        await converse(agent)
        entries = await session.entries()
        assert [e.id for e in entries] == [str(i) for i in range(1, 11)]
        move = await agent.branch_to("2", instructions="Say which files were touched.")
        assert move.moved and move.target == "2" and move.leaf == "11" and move.left == 8
        assert move.summary is not None and move.summary.summarised and move.summary.error is None
        summary_request = next(r for r in server.chat_requests if is_branch_summary(r))
        asked = summary_request.json["messages"][1]["content"]
        assert "Say which files were touched." in asked
        assert 'Assistant called write_file(path="b.py", text="x = 1").' in asked
        assert "User: Edit b.py." in asked and "Set up." not in asked
        # The conversation goes on from entry 2 with the summary in front of the next question.
        assert [m.content for m in agent.state.messages][:2] == ["Set up.", "Ready."]
        carried = agent.state.messages[2].content
        assert carried.startswith(BRANCH_SUMMARY_LEAD) and "Tried an edit and a read." in carried
        assert "Files read: c.txt" in carried and "Files modified: b.py" in carried
        await agent.prompt("Something else.")
        sent = server.chat_requests[-1].json["messages"]
        assert [m["content"] for m in sent[1:3]] == ["Set up.", "Ready."]
        assert sent[3]["content"] == carried and sent[4]["content"] == "Something else."
        assert not any("b.py" in str(m.get("tool_calls", "")) for m in sent)
        tree = await session.entries()
        assert tree[10].parent_id == "2" and tree[10].files == BranchFiles(("c.txt",), ("b.py",))
        assert tree[11].parent_id == "11" and tree[3].parent_id == "3"  # the old branch is still there


async def test_a_reloaded_session_continues_from_its_leaf_and_carries_files_forward(tmp_path: Path) -> None:
    replies = [*CONVERSATION, answer("Edit and read."), answer("Other way."), answer("Back again.")]
    async with ScriptedServer(*replies) as server:
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            session = await store.session(agent_id=A)
            agent = agent_in(server, session)
            await converse(agent)
            await agent.branch_to("2")
            await agent.prompt("Try another way.")
            sid = session.session_id
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            again = await store.session(sid, agent_id=A)
            assert [m.content for m in again.messages][:2] == ["Set up.", "Ready."]
            assert again.messages[2].content.startswith(BRANCH_SUMMARY_LEAD)
            assert [m.content for m in again.messages][3:] == ["Try another way.", "Other way."]
            assert await again.leaf() == "13"
            agent = agent_in(server, again)
            # Back to the first branch: what is left now holds the first summary, whose files come along.
            move = await agent.branch_to("6")
            assert move.moved and move.summary is not None
            assert move.summary.files == BranchFiles(("c.txt",), ("b.py",))
            assert [m.content for m in agent.state.messages][:6] == [
                "Set up.",
                "Ready.",
                "Edit b.py.",
                "",
                "written",
                "Wrote b.py.",
            ]
            assert agent.state.messages[-1].content.startswith(BRANCH_SUMMARY_LEAD)


async def test_abort_during_the_summary_moves_nothing() -> None:
    store = InMemorySessionStore()
    stalled = Reply.stream(text_chunks("never"), stall_after=0, stall_seconds=None)
    async with ScriptedServer(*CONVERSATION, stalled) as server:
        session = await store.session(agent_id=A)
        agent = agent_in(server, session)
        await converse(agent)
        before = list(agent.state.messages)
        moving = asyncio.ensure_future(agent.branch_to("2"))
        await server.wait_for_requests(len(CONVERSATION) + 1)
        assert agent.is_running  # a prompt now would be refused
        with pytest.raises(sl.AgentBusy):
            await agent.prompt("not now")
        agent.abort()
        move = await moving
    assert not move.moved and move.leaf == "10" and move.summary is not None and move.summary.aborted
    assert move.summary.summary == ""
    assert agent.state.messages == before and await session.leaf() == "10"
    assert not agent.is_running


async def test_a_failed_summary_moves_nothing_and_says_why_and_no_summary_moves_anyway() -> None:
    store = InMemorySessionStore()
    refused = Reply.json({"error": {"message": "model is busy elsewhere", "type": "invalid_request"}}, 400)
    async with ScriptedServer(*CONVERSATION, refused, answer("Fresh.")) as server:
        session = await store.session(agent_id=A)
        agent = agent_in(server, session)
        await converse(agent)
        move = await agent.branch_to("2")
        assert not move.moved and move.summary is not None and not move.summary.summarised
        assert move.summary.error is not None and "busy elsewhere" in move.summary.error
        assert await session.leaf() == "10"
        move = await agent.branch_to("2", summarise=False)
        assert move.moved and move.summary is None and move.leaf == "2"
        assert [m.content for m in agent.state.messages] == ["Set up.", "Ready."]
        await agent.prompt("Fresh question.")
        assert [e.parent_id for e in await session.entries()][-2:] == ["2", "11"]


async def test_the_token_reserve_limits_the_branch_to_its_newest_messages() -> None:
    long = [
        answer("One. " + "a" * 1500),
        answer("Two. " + "b" * 1500),
        answer("Three. " + "c" * 1500),
        answer("Summary."),
    ]
    store = InMemorySessionStore()
    async with ScriptedServer(*long) as server:
        session = await store.session(agent_id=A)
        agent = agent_in(server, session, policy=sl.LoopPolicy(context_limit=1200))
        for question in ("first", "second", "third"):
            await agent.prompt(question)
        # The window is 1,200 tokens; the reserve takes at most half of it, leaving about 600: the last
        # answer (about 380 tokens) and its question fit, the one before does not.
        move = await agent.branch_to(None, reserve_tokens=2000)
        asked = next(r for r in server.chat_requests if is_branch_summary(r)).json["messages"][1]["content"]
    assert move.moved and move.target is None and move.left == 6
    assert "Three." in asked and "User: third" in asked and "Two." not in asked and "User: first" not in asked
    assert len(agent.state.messages) == 1 and agent.state.messages[0].content.startswith(BRANCH_SUMMARY_LEAD)


async def test_branching_needs_a_session_and_a_real_entry() -> None:
    store = InMemorySessionStore()
    async with ScriptedServer(answer("Ready.")) as server:
        plain = sl.Agent(sl.Endpoint(server.base_url), "m")
        with pytest.raises(sl.InvalidInput, match="session"):
            await plain.branch_to("1")
        session = await store.session(agent_id=A)
        agent = agent_in(server, session)
        await agent.prompt("Set up.")
        for bad in ("7", "zero", 0):
            with pytest.raises(sl.InvalidInput):
                await agent.branch_to(bad)
        move = await agent.branch_to(1, summarise=False)
        assert move.moved and move.leaf == "1" and move.left == 1


async def test_the_summariser_reads_tool_exchanges_cut_off_answers_and_images_as_an_account() -> None:
    # A branch holding a tool exchange, an image and an answer cut off by an abort: sent in their own shape,
    # a transcript ending in an unfinished answer, the bundled model's summary came back empty.
    replies = [
        answer("Ready."),
        call("read_file", "r1", path="c.txt"),
        answer("c.txt says hello."),
        Reply.stream(text_chunks(["The sea ", "is wide", " and deep"]), stall_after=2),
        answer("Read c.txt; a poem was cut off."),
    ]
    store = InMemorySessionStore()
    async with ScriptedServer(*replies) as server:
        agent = agent_in(server, await store.session(agent_id=A))
        await agent.prompt("Set up.")
        shot = sl.ImagePart.from_bytes(b"\x89PNG", "image/png")
        await agent.prompt(sl.UserMessage(content=(sl.TextPart(text="Read c.txt."), shot)))
        stop = agent.subscribe(lambda e: agent.abort() if e.type == "message_update" else None)
        with pytest.raises(sl.RunCancelled):
            await agent.prompt("Write a poem about the sea.")
        stop()
        move = await agent.branch_to("2")
        sent = next(r for r in server.chat_requests if is_branch_summary(r)).json["messages"]
    assert move.moved and move.summary is not None and move.summary.summarised
    assert [m["role"] for m in sent] == ["system", "user"]  # it ends with a question to answer
    assert sent[1]["content"].splitlines()[3:] == [
        "User: Read c.txt. [an image (image/png)]",
        'Assistant called read_file(path="c.txt").',
        "read_file returned: contents of c.txt",
        "Assistant: c.txt says hello.",
        "User: Write a poem about the sea.",
        "Assistant (cut off before it finished): The sea",
        "</branch>",
        "",
        "Write the account of this branch now: what was attempted, and what was found or decided.",
    ]
