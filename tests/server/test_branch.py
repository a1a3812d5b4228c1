"""The session tree over HTTP: list its entries, continue from any of them, the branch left summarised."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx2 as httpx

from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of, usage_chunk

from .conftest import LiveServer


def answer(text: str, **kwargs: Any) -> Any:
    return Reply.stream(stream_of(text, usage=usage_chunk(12, 5)), **kwargs)


async def two_exchanges(http: httpx.AsyncClient) -> str:
    sid = str((await http.post("/sessions", json={})).json()["id"])
    for text in ("first question", "second question"):
        run = await http.post(f"/sessions/{sid}/messages", json={"text": text})
        assert run.status_code == 200, run.text
    return sid


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] != "system"]


async def test_the_tree_lists_every_entry_with_its_parent_and_a_move_continues_from_any(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(answer("first answer"), answer("second answer"), answer("another answer"))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = await two_exchanges(http)
        tree = (await http.get(f"/sessions/{sid}/tree")).json()
        assert tree["leaf"] == "4"
        assert [(e["id"], e["parent_id"], e["role"]) for e in tree["entries"]] == [
            ("1", None, "user"),
            ("2", "1", "assistant"),
            ("3", "2", "user"),
            ("4", "3", "assistant"),
        ]
        assert tree["entries"][3]["message"]["content"] == "second answer"

        moved = await http.post(f"/sessions/{sid}/branch", json={"entry_id": "2", "summarise": False})
        assert moved.status_code == 200, moved.text
        assert moved.json() == {"moved": True, "target": "2", "leaf": "2", "left": 2, "summary": None}
        assert texts((await http.get(f"/sessions/{sid}")).json()["messages"]) == [
            "first question",
            "first answer",
        ]

        run = await http.post(f"/sessions/{sid}/messages", json={"text": "a different question"})
        assert run.json()["answer"] == "another answer"
        # The model saw the first exchange and the new question, never the branch left behind.
        assert texts(model.chat_requests[-1].json["messages"]) == [
            "first question",
            "first answer",
            "a different question",
        ]
        tree = (await http.get(f"/sessions/{sid}/tree")).json()
        assert tree["leaf"] == "6"
        assert [(e["id"], e["parent_id"]) for e in tree["entries"]][4:] == [("5", "2"), ("6", "5")]

        # A number works as well as a string, and null goes back to the start.
        back = await http.post(f"/sessions/{sid}/branch", json={"entry_id": 4, "summarise": False})
        assert back.json()["leaf"] == "4"
        start = await http.post(f"/sessions/{sid}/branch", json={"entry_id": None, "summarise": False})
        assert start.json()["moved"] is True and start.json()["leaf"] is None
        assert (await http.get(f"/sessions/{sid}")).json()["messages"] == []
        assert (await http.get(f"/sessions/{sid}/tree")).json()["leaf"] is None


async def test_the_branch_left_is_summarised_into_the_entry_the_session_continues_from(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(
        answer("first answer"),
        answer("second answer"),
        answer("The user asked a second question; it was answered."),
        answer("continued"),
    )
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = await two_exchanges(http)
        moved = await http.post(
            f"/sessions/{sid}/branch",
            json={"entry_id": "2", "instructions": "Keep what was asked.", "reserve_tokens": 1000},
        )
        assert moved.status_code == 200, moved.text
        move = moved.json()
        assert move["moved"] is True and move["target"] == "2" and move["left"] == 2
        assert move["leaf"] == "5"
        summary = move["summary"]
        assert "second question" in summary["summary"] and summary["summarised"] is True
        assert summary["aborted"] is False and summary["error"] is None
        asked = model.chat_requests[2].json["messages"]
        assert any("Keep what was asked." in str(m["content"]) for m in asked)
        assert any("second question" in str(m["content"]) for m in asked)

        tree = (await http.get(f"/sessions/{sid}/tree")).json()
        assert tree["leaf"] == "5"
        entry = tree["entries"][4]
        assert entry["parent_id"] == "2" and entry["role"] == "user"
        assert "second question" in entry["message"]["content"]
        assert entry["read_files"] == [] and entry["modified_files"] == []

        await http.post(f"/sessions/{sid}/messages", json={"text": "go on"})
        sent = texts(model.chat_requests[-1].json["messages"])
        assert sent[:2] == ["first question", "first answer"] and sent[-1] == "go on"
        assert "second question" in sent[2] and "second answer" not in sent


async def test_a_failed_summary_moves_nothing_and_says_why(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(
        answer("first answer"),
        answer("second answer"),
        Reply.json({"error": {"message": "the model fell over"}}, status=400),
    )
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = await two_exchanges(http)
        moved = (await http.post(f"/sessions/{sid}/branch", json={"entry_id": "2"})).json()
        assert moved["moved"] is False and moved["leaf"] == "4" and moved["target"] == "2"
        assert moved["summary"]["error"] and moved["summary"]["aborted"] is False
        assert (await http.get(f"/sessions/{sid}/tree")).json()["leaf"] == "4"
        assert len(texts((await http.get(f"/sessions/{sid}")).json()["messages"])) == 4


async def test_abort_cancels_the_summary_and_nothing_else_starts_while_a_move_or_run_is_going(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(
        answer("first answer"),
        answer("second answer"),
        Reply.stream(stream_of("a summary that never ends"), stall_after=2, stall_seconds=None),
        Reply.stream(stream_of("a run that never ends"), stall_after=2, stall_seconds=None),
    )
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = await two_exchanges(http)
        moving = asyncio.create_task(http.post(f"/sessions/{sid}/branch", json={"entry_id": "2"}))
        await model.wait_for_requests(3)
        for refused in (
            await http.post(f"/sessions/{sid}/messages", json={"text": "now"}),
            await http.post(f"/sessions/{sid}/branch", json={"entry_id": "1"}),
            await http.delete(f"/sessions/{sid}"),
        ):
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"]["code"] == "run_in_progress"
            assert f"/sessions/{sid}/abort" in refused.json()["error"]["hint"]
        assert (await http.post(f"/sessions/{sid}/abort")).status_code == 202
        move = (await moving).json()
        assert move["moved"] is False and move["leaf"] == "4"
        assert move["summary"]["aborted"] is True and move["summary"]["summary"] == ""
        assert (await http.get(f"/sessions/{sid}/tree")).json()["leaf"] == "4"

        running = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "go"}))
        await model.wait_for_requests(4)
        refused = await http.post(f"/sessions/{sid}/branch", json={"entry_id": "2"})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_in_progress"
        assert (await http.post(f"/sessions/{sid}/abort")).status_code == 202
        assert (await running).json()["outcome"] == "cancelled"


async def test_unknown_entries_and_sessions_and_bad_bodies_are_typed_errors(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(answer("first answer"), answer("second answer"))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = await two_exchanges(http)
        for entry_id in ("99", 0, "0"):
            unknown = await http.post(f"/sessions/{sid}/branch", json={"entry_id": entry_id})
            assert unknown.status_code == 422, unknown.text
            error = unknown.json()["error"]
            assert error["code"] == "unknown_entry" and f"/sessions/{sid}/tree" in error["hint"]
        for body in ({}, {"entry_id": "two"}, {"entry_id": True}, {"entry_id": "1", "extra": 1}):
            bad = await http.post(f"/sessions/{sid}/branch", json=body)
            assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request", body
        for missing in (
            await http.get("/sessions/ses_0000000000000000/tree"),
            await http.post("/sessions/ses_0000000000000000/branch", json={"entry_id": "1"}),
        ):
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert (await http.get(f"/sessions/{sid}/tree")).json()["leaf"] == "4"
        assert len(model.chat_requests) == 2  # nothing was asked of the model


async def test_a_new_session_has_an_empty_tree(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        assert (await http.get(f"/sessions/{sid}/tree")).json() == {"leaf": None, "entries": []}
        move = (await http.post(f"/sessions/{sid}/branch", json={"entry_id": None})).json()
        assert move == {"moved": True, "target": None, "leaf": None, "left": 0, "summary": None}
