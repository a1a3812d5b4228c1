"""The server's SSE stream never carries a tool call the model wrote as text as answer text."""

from __future__ import annotations

import json
from collections.abc import Callable

from steadyloop import tool
from steadyloop.server import ServerSettings
from steadyloop.testing import Reply, ScriptedServer, text_chunks

from .conftest import LiveServer, read_sse

CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


async def test_a_call_written_as_text_streams_as_a_call_never_as_text(
    model: ScriptedServer, settings_for: Callable[..., ServerSettings]
) -> None:
    written = [CALL[i : i + 6] for i in range(0, len(CALL), 6)]
    model.enqueue(Reply.stream(text_chunks(written)), Reply.stream(text_chunks(["Sunny ", "in Paris."])))
    async with (
        LiveServer(settings_for(model.base_url, tools=[get_weather])) as server,
        server.client() as http,
    ):
        sid = (await http.post("/sessions", json={})).json()["id"]
        async with http.stream(
            "POST",
            f"/sessions/{sid}/messages",
            json={"text": "Weather in Paris?"},
            headers={"Accept": "text/event-stream"},
        ) as response:
            events = [e async for e in read_sse(response)]
    names = [e.event for e in events]
    deltas = [e.data["delta"] for e in events if e.event in ("delta", "message_update")]
    assert not [d for d in deltas if "get_weather" in d or "{" in d]
    call = names.index("tool_execution_start")
    assert events[call].data["arguments"] == {"city": "Paris"}
    after = "".join(e.data["delta"] for e in events[call:] if e.event == "delta")
    assert after == "Sunny in Paris."
