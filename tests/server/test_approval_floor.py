"""The operator's approvals are a floor: no client lowers them, by request or by a session kept from before."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from steadyloop.cli.tools import shell_tool
from steadyloop.server import ServerSettings
from steadyloop.server.agents import document_of
from steadyloop.server.runtime import AGENT_STATE
from steadyloop.spec import AgentSpec, ApprovalsSpec
from steadyloop.testing import Reply, ScriptedServer, stream_of

from .conftest import LiveServer, read_sse

DOC = "steadyloop.agent/1"
LOWERINGS: list[tuple[dict[str, Any], str]] = [
    ({"approvals": {"require_for": []}}, "require_for leaves out destructive"),
    ({"approvals": {"require_for": ["destructive"]}}, "leaves out mutate-irreversible, mutate-reversible"),
    ({"approvals": {"overrides": {"run_shell": False}}}, "turns approval off for 'run_shell'"),
    ({"approvals": {"overrides": {"some_mcp_tool": False}}}, "turns approval off for 'some_mcp_tool'"),
    ({"approvals": {"timeout_s": 3600}}, "a decision may take 3600 s, the floor 300 s"),
    ({"agent": {"spec": DOC, "approvals": {"require_for": []}}}, "require_for leaves out destructive"),
    ({"agent": {"spec": DOC, "approvals": {"timeout": 900}}}, "a decision may take 900 s, the floor 300 s"),
]


@pytest.mark.parametrize(("body", "named"), LOWERINGS)
async def test_a_session_asking_for_fewer_approvals_than_the_server_is_refused(
    model: ScriptedServer,
    settings_for: Callable[..., ServerSettings],
    tmp_path: Path,
    body: dict[str, Any],
    named: str,
) -> None:
    settings = settings_for(model.base_url, tools=[shell_tool(tmp_path)])
    async with LiveServer(settings) as server, server.client() as http:
        refused = await http.post("/sessions", json=body)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "approvals_below_floor"
        assert named in error["message"]
        assert "the floor gates destructive, mutate-irreversible, mutate-reversible" in error["message"]
        assert "--require-approval" in error["hint"]
        assert (await http.get("/sessions")).json()["sessions"] == [], "nothing was created"
        # What only adds to the floor is taken.
        tighter = {"approvals": {"overrides": {"run_shell": True}, "timeout_s": 60}}
        assert (await http.post("/sessions", json=tighter)).status_code == 201


async def test_run_shell_still_asks_in_a_session_kept_with_no_approvals(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], tmp_path: Path
) -> None:
    """A session stored by an older server (or before the operator raised the floor) is held to it."""
    shell = shell_tool(tmp_path)
    marker = tmp_path / "ran"
    call = {"id": "s1", "name": "run_shell", "arguments": {"command": f"touch {marker}"}}
    model.enqueue(Reply.stream(stream_of(tool_calls=[call])), Reply.stream(stream_of("Not run.")))
    async with (
        LiveServer(settings_for(model.base_url, tools=[shell])) as server,
        server.client() as http,
    ):
        sid = (await http.post("/sessions", json={})).json()["id"]
        lowered = AgentSpec(
            approvals=ApprovalsSpec(require_for=(), overrides={"run_shell": False}, timeout=9e3)
        )
        store = server.app.state.runtime.store
        await store.save_state(sid, AGENT_STATE, document_of(lowered), agent_id="local")
        asked: list[dict[str, Any]] = []
        async with http.stream(
            "POST",
            f"/sessions/{sid}/messages",
            json={"text": "touch it"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            async for event in read_sse(response):
                if event.event == "approval_required":
                    asked.append(event.data)
                    assert event.data["expires_at"] - time.time() <= 300, "the floor's timeout, not 9000 s"
                    assert not marker.exists(), "nothing runs before the decision"
                    approval = event.data["approval_id"]
                    denied = await http.post(
                        f"/sessions/{sid}/approvals/{approval}", json={"decision": "deny"}
                    )
                    assert denied.status_code == 200, denied.text
        assert [a["name"] for a in asked] == ["run_shell"]
    assert not marker.exists()
