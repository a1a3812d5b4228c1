"""What the page's session list and new-session form read: titles from the first message, rename, search,
the waiting badge, the operator's floor and the endpoint's models in ``/info``."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable

import pytest

from steadyloop import ApprovalPolicy, InvalidInput, tool
from steadyloop.server import ServerLimits, ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer, wait_for_event


async def test_a_session_made_over_the_api_is_titled_from_its_first_message_and_renamed(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(Reply.stream(stream_of("Blue.")), Reply.stream(stream_of("Green.")))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        titled = (await http.post("/sessions", json={"title": "mine"})).json()["id"]
        long = "  What   colour is\tthe sky " + "on a clear day " * 8 + "\nsecond line"
        assert (await http.post(f"/sessions/{sid}/messages", json={"text": long})).status_code == 200
        await http.post(f"/sessions/{titled}/messages", json={"text": "and the grass?"})
        listed = {s["id"]: s for s in (await http.get("/sessions")).json()["sessions"]}
        title = listed[sid]["title"]
        assert title.startswith("What colour is the sky on a clear day") and title.endswith("…")
        assert len(title) <= 80
        assert listed[titled]["title"] == "mine", "a title given at creation stays"

        renamed = await http.patch(f"/sessions/{sid}", json={"title": "  Sky   colours "})
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["title"] == "Sky colours" and renamed.json()["id"] == sid
        order = [s["id"] for s in (await http.get("/sessions")).json()["sessions"]]
        assert order == [titled, sid], "a rename leaves the session where it was in the list"
        cleared = await http.patch(f"/sessions/{sid}", json={"title": " "})
        assert cleared.json()["title"] is None

        for body, code in (({"title": "x" * 201}, 400), ({"name": "x"}, 400), ({}, 400)):
            refused = await http.patch(f"/sessions/{sid}", json=body)
            assert refused.status_code == code and refused.json()["error"]["code"] == "invalid_request"
        missing = await http.patch("/sessions/nope", json={"title": "x"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        plain = await http.patch(f"/sessions/{sid}", content=b'{"title": "x"}')
        assert plain.status_code == 415


async def test_the_list_searches_titles_and_what_was_said_but_not_tool_output(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    @tool(effect="read")
    def lookup(key: str) -> str:
        """Look a key up."""
        return "the zebra database says hello"

    model.enqueue(
        Reply.stream(stream_of("Paris, of course.")),
        Reply.stream(stream_of(tool_calls=[{"id": "l1", "name": "lookup", "arguments": {"key": "k"}}])),
        Reply.stream(stream_of("Done looking.")),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=[lookup])) as server,
        server.client() as http,
    ):
        geo = (await http.post("/sessions", json={})).json()["id"]
        await http.post(f"/sessions/{geo}/messages", json={"text": "Capital of France?"})
        other = (await http.post("/sessions", json={"title": "Errands"})).json()["id"]
        await http.post(f"/sessions/{other}/messages", json={"text": "Look k up."})

        async def found(query: str) -> list[str]:
            answer = await http.get("/sessions", params={"q": query})
            assert answer.status_code == 200, answer.text
            return [s["id"] for s in answer.json()["sessions"]]

        assert await found("paris,  OF course") == [geo], "the assistant's words, case and spacing aside"
        assert await found("capital") == [geo], "the title (the first message)"
        assert await found("errands") == [other]
        assert await found("done looking") == [other]
        assert await found("zebra") == [], "a tool's output is not what was said"
        assert sorted(await found("  ")) == sorted([geo, other])
        too_long = await http.get("/sessions", params={"q": "x" * 201})
        assert too_long.status_code == 400


async def test_a_session_waiting_for_an_approval_says_so_in_the_list(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    @tool(effect="destructive")
    def wipe(path: str) -> str:
        """Wipe a path."""
        return "wiped"

    model.enqueue(
        Reply.stream(stream_of(tool_calls=[{"id": "w1", "name": "wipe", "arguments": {"path": "/tmp/x"}}])),
        Reply.stream(stream_of("Wiped.")),
    )
    async with LiveServer(settings_for(model.base_url, tools=[wipe])) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        idle = (await http.post("/sessions", json={"title": "idle"})).json()["id"]
        task = asyncio.ensure_future(http.post(f"/sessions/{sid}/messages", json={"text": "wipe it"}))
        asked = await wait_for_event(http, sid, "approval_required")
        listed = {s["id"]: s for s in (await http.get("/sessions")).json()["sessions"]}
        assert (listed[sid]["waiting"], listed[sid]["status"]) == (1, "running")
        assert listed[idle]["waiting"] == 0
        decided = await http.post(
            f"/sessions/{sid}/approvals/{asked.data['approval_id']}", json={"decision": "allow"}
        )
        assert decided.status_code == 200
        assert (await task).json()["answer"] == "Wiped."
        listed = {s["id"]: s for s in (await http.get("/sessions")).json()["sessions"]}
        assert (listed[sid]["waiting"], listed[sid]["status"]) == (0, "idle")


async def test_info_tells_the_floor_which_tools_it_gates_and_the_endpoints_models(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    @tool(effect="read")
    def look(path: str) -> str:
        """Look."""
        return "seen"

    @tool(effect="mutate-reversible")
    def write(path: str) -> str:
        """Write."""
        return "written"

    policy = ApprovalPolicy(
        require_for=frozenset({"mutate-reversible"}), overrides={"look": True}, timeout_s=60
    )
    settings = settings_for(model.base_url, tools=[look, write], approval_policy=policy)
    async with LiveServer(settings) as server, server.client() as http:
        info = (await http.get("/info")).json()
        assert info["approvals"] == {
            "require_for": ["mutate-reversible"],
            "overrides": {"look": True},
            "timeout_s": 60.0,
        }
        assert {t["name"]: t["gated"] for t in info["tools"]} == {"look": True, "write": True}
        assert info["models"], "the scripted server lists its models"


async def test_the_deprecated_limits_timeout_sets_the_floors_timeout(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    """ServerLimits.approval_timeout_s once did nothing; set, it is the floor's wait, with a warning."""
    with pytest.warns(DeprecationWarning, match="approval_policy"):
        settings = settings_for(model.base_url, limits=ServerLimits(approval_timeout_s=7))
    assert settings.approval_policy.timeout_s == 7
    async with LiveServer(settings) as server, server.client() as http:
        assert (await http.get("/info")).json()["approvals"]["timeout_s"] == 7.0
    policy = ApprovalPolicy(timeout_s=60)
    with pytest.warns(DeprecationWarning), pytest.raises(InvalidInput, match="disagree"):
        settings_for(model.base_url, limits=ServerLimits(approval_timeout_s=7), approval_policy=policy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # left unset, nothing warns
        assert settings_for(model.base_url).approval_policy.timeout_s == ApprovalPolicy().timeout_s
