"""The HTTP API end to end over loopback: sessions, runs in JSON and SSE, queues, abort, images, schemas."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, stream_of, usage_chunk

from .conftest import LiveServer, read_sse, wait_for_event

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()


def answer(text: str, **kwargs: Any) -> Any:
    return Reply.stream(stream_of(text, usage=usage_chunk(12, 5)), **kwargs)


async def test_a_session_is_created_run_in_json_listed_exported_and_deleted(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(answer("Paris is the capital."))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        created = await http.post("/sessions", json={"title": "geo", "system": "Be brief."})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        assert created.json()["status"] == "idle"

        run = await http.post(f"/sessions/{sid}/messages", json={"text": "Capital of France?"})
        assert run.status_code == 200, run.text
        body = run.json()
        assert body["outcome"] == "completed"
        assert body["answer"] == "Paris is the capital."
        assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
        assert body["usage"]["prompt_tokens"] == 12

        detail = (await http.get(f"/sessions/{sid}")).json()
        assert [m["role"] for m in detail["messages"]] == ["user", "assistant"]
        assert detail["system"] == "Be brief."
        assert detail["usage"]["runs"] == 1 and detail["status"] == "idle"
        assert model.chat_requests[0].json["messages"][0] == {"role": "system", "content": "Be brief."}

        listed = (await http.get("/sessions")).json()["sessions"]
        assert [s["id"] for s in listed] == [sid]

        export = await http.get(f"/sessions/{sid}/export")
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert export.headers["content-type"].startswith("application/x-ndjson")
        assert len(lines) > 3 and any(line.get("type") == "agent_end" or "event" in line for line in lines)

        assert (await http.delete(f"/sessions/{sid}")).status_code == 204
        gone = await http.get(f"/sessions/{sid}")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"


async def test_sse_ids_are_the_record_seq_in_order_and_deltas_preview_the_recorded_update(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(answer("one two three four"), answer("five six"))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        seen: list[int] = []
        deltas: list[str] = []
        for prompt in ("first", "second"):
            async with http.stream(
                "POST",
                f"/sessions/{sid}/messages",
                json={"text": prompt},
                headers={"Accept": "text/event-stream"},
            ) as response:
                assert response.headers["content-type"].startswith("text/event-stream"), (
                    await response.aread()
                )
                events = [e async for e in read_sse(response)]
            ids = [e.id for e in events if e.id is not None]
            seen += ids
            deltas += [e.data["delta"] for e in events if e.event == "delta"]
            assert events[-1].event == "agent_end"
            # One update per message, unless the machine was slow enough for the record's timed write
            # (a second) to come first: the text is the same either way.
            coalesced = [e.data["delta"] for e in events if e.event == "message_update"]
            assert "".join(coalesced) == ("one two three four" if prompt == "first" else "five six")
        assert seen == list(range(1, len(seen) + 1)), "one seq per recorded event, across runs, from 1"
        assert "".join(deltas) == "one two three fourfive six"
        record = (await http.get(f"/sessions/{sid}")).json()["last_event_seq"]
        assert record == seen[-1]


async def test_a_second_prompt_while_one_runs_is_409_with_what_to_do_and_steer_follow_up_abort_work(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(
        Reply.stream(stream_of("thinking about it for a long time"), stall_after=2, stall_seconds=None)
    )
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        assert (await http.post(f"/sessions/{sid}/steer", json={"text": "x"})).json()["error"]["code"] == (
            "no_run_in_progress"
        )
        running = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "go"}))
        await model.wait_for_requests(1)
        second = await http.post(f"/sessions/{sid}/messages", json={"text": "again"})
        assert second.status_code == 409
        error = second.json()["error"]
        assert error["code"] == "run_in_progress"
        assert "/steer" in error["hint"] and "/follow_up" in error["hint"] and "/abort" in error["hint"]
        assert (await http.get(f"/sessions/{sid}")).json()["status"] == "running"
        assert (await http.post(f"/sessions/{sid}/follow_up", json={"text": "later"})).status_code == 202
        assert (await http.post(f"/sessions/{sid}/abort")).status_code == 202
        done = await running
        assert done.status_code == 200
        assert done.json()["outcome"] == "cancelled"
        assert (await http.get(f"/sessions/{sid}")).json()["status"] == "idle"


async def test_steering_reaches_the_model_at_its_next_step(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    from steadyloop import tool

    gate = asyncio.Event()

    @tool
    async def wait_a_bit() -> str:
        """Wait until released."""
        await gate.wait()
        return "waited"

    model.enqueue(
        Reply.stream(stream_of(tool_calls=[{"id": "c1", "name": "wait_a_bit", "arguments": {}}])),
        answer("Steered."),
    )
    async with (
        LiveServer(settings_for(model.base_url, tools=[wait_a_bit])) as server,
        server.client() as http,
    ):
        sid = (await http.post("/sessions", json={})).json()["id"]
        running = asyncio.create_task(http.post(f"/sessions/{sid}/messages", json={"text": "go"}))
        await model.wait_for_requests(1)
        await wait_for_event(http, sid, "tool_execution_start")
        assert (
            await http.post(f"/sessions/{sid}/steer", json={"text": "stop and say Steered"})
        ).status_code == 202
        gate.set()
        body = (await running).json()
        assert body["answer"] == "Steered."
        sent = model.chat_requests[1].json["messages"]
        assert sent[-1] == {"role": "user", "content": "stop and say Steered"}


async def test_images_and_an_output_schema_ride_on_the_message(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(answer('{"city": "Paris"}'))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        run = await http.post(
            f"/sessions/{sid}/messages",
            json={
                "text": "Where?",
                "images": [
                    {"data": PNG, "mime_type": "image/png"},
                    {"data": f"data:image/webp;base64,{PNG}"},
                ],
                "output_schema": {"schema": schema, "name": "place"},
            },
        )
        assert run.status_code == 200, run.text
        assert run.json()["structured"] == {"city": "Paris"}
        sent = model.chat_requests[0].json
        assert sent["response_format"]["json_schema"]["name"] == "place"
        parts = sent["messages"][-1]["content"]
        assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
        assert parts[2]["image_url"]["url"].startswith("data:image/webp;base64,")
        stored = (await http.get(f"/sessions/{sid}")).json()["messages"][0]["content"]
        assert len(stored) == 3, "the images are kept with the message"


async def test_agent_documents_make_sessions_and_unknown_tools_are_refused(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    model.enqueue(answer("ok"))
    document = {
        "spec": "steadyloop.agent/1",
        "endpoint": {"base_url": "http://10.9.9.9/v1"},
        "model": {"temperature": 0.3},
        "prompt": [{"id": "role", "text": "You review code."}],
    }
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={"agent": document})).json()["id"]
        assert (await http.post(f"/sessions/{sid}/messages", json={"text": "hi"})).status_code == 200
        sent = model.chat_requests[0]
        assert sent.json["temperature"] == 0.3
        assert sent.json["messages"][0]["content"] == "You review code."
        refused = await http.post("/sessions", json={"tools": ["rm_everything"]})
        assert refused.status_code == 400 and "rm_everything" in refused.json()["error"]["message"]
        bad = await http.post("/sessions", json={"agent": {"spec": "other/9"}})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"


async def test_a_session_picks_an_mcp_server_the_server_offers_by_name(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    import sys
    from pathlib import Path

    from steadyloop.spec import MCPServer

    fixture = Path(__file__).parent.parent / "tools" / "mcp_server_fixture.py"
    offered = [MCPServer(name="fx", command=sys.executable, args=(str(fixture),))]
    async with (
        LiveServer(settings_for(model.base_url, mcp_servers=offered)) as server,
        server.client() as http,
    ):
        assert (await http.get("/info")).json()["mcp_servers"] == ["fx"]
        sid = (await http.post("/sessions", json={"mcp_servers": ["fx"]})).json()["id"]
        tools = (await http.get(f"/sessions/{sid}")).json()["tools"]
        add = next(name for name in tools if name.endswith("add"))
        model.enqueue(
            Reply.stream(stream_of(tool_calls=[{"id": "m1", "name": add, "arguments": {"a": 2, "b": 3}}])),
            answer("Five."),
        )
        body = (await http.post(f"/sessions/{sid}/messages", json={"text": "2+3?"})).json()
        assert body["answer"] == "Five."
        results = [m for m in body["messages"] if m["role"] == "tool"]
        assert "5" in json.dumps(results[0]["content"])
        refused = await http.post("/sessions", json={"mcp_servers": ["elsewhere"]})
        assert refused.status_code == 400


async def test_idle_sessions_past_the_cap_are_unloaded_and_load_again_with_their_history(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings], monkeypatch: Any
) -> None:
    import steadyloop.server.runtime as runtime

    monkeypatch.setattr(runtime, "MAX_LOADED", 2)
    for i in range(4):
        model.enqueue(answer(f"answer {i}"))
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        ids = [(await http.post("/sessions", json={})).json()["id"] for _ in range(3)]
        for i, sid in enumerate(ids):
            assert (await http.post(f"/sessions/{sid}/messages", json={"text": f"q{i}"})).status_code == 200
        loaded = server.app.state.runtime._live
        assert ids[0] not in loaded and len(loaded) == 2
        again = await http.post(f"/sessions/{ids[0]}/messages", json={"text": "and again"})
        assert again.json()["answer"] == "answer 3"
        sent = [m["content"] for m in model.chat_requests[-1].json["messages"]]
        assert sent == ["q0", "answer 0", "and again"], "an unloaded session comes back with its history"


async def test_an_output_schema_the_endpoint_refuses_is_stated_in_the_prompt_and_still_checked(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    # ik_llama.cpp's recorded refusal (tests/data/error_bodies/llamacpp.json, from
    # https://github.com/ikawrakow/ik_llama.cpp/issues/778): response_format must be text or json_object.
    recorded = json.loads((Path(__file__).parents[1] / "data/error_bodies/llamacpp.json").read_text())
    refusal = next(r for r in recorded if r["source"].endswith("ik_llama.cpp/issues/778"))
    body = refusal["body"]
    status = refusal["status"]
    model.enqueue(
        Reply.json(body, status=status) if isinstance(body, dict) else Reply.raw(body, status=status)
    )
    model.enqueue(answer('{"city": "Paris"}'))
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    async with LiveServer(settings_for(model.base_url)) as server, server.client() as http:
        sid = (await http.post("/sessions", json={})).json()["id"]
        run = await http.post(
            f"/sessions/{sid}/messages",
            json={"text": "Capital of France?", "output_schema": {"schema": schema, "name": "place"}},
        )
        assert run.status_code == 200, run.text
        assert run.json()["structured"] == {"city": "Paris"}
    first, second = (r.json for r in model.chat_requests)
    assert "response_format" in first and "response_format" not in second
    stated = json.dumps([m.get("content") for m in second["messages"]])
    assert json.dumps(schema, sort_keys=True).replace('"', '\\"') in stated
