"""run_turn, its sizing guard, the loading clock, side tasks and continuation against a real llama-server."""

from __future__ import annotations

import http.client
import time
from collections.abc import Iterator

import jsonschema
import pytest

from steadyloop.errors import ContextOverflow
from steadyloop.events import Event, Notice
from steadyloop.local import ensure_binary, ensure_model
from steadyloop.local._process import spawn, terminate
from steadyloop.local.server import _free_port, server_command
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.turn.capabilities import model_capabilities_for
from steadyloop.turn.continuation import continue_turn
from steadyloop.turn.side_tasks import ask_json
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.windows import context_limit_for

from ._model import real_config


def _long_messages() -> list[dict[str, str]]:
    lines = [f"Line {i}: the inventory count for shelf {i % 37} is {i * 13 % 997}." for i in range(90)]
    return [{"role": "user", "content": "\n".join(lines) + "\nWhich shelf has the highest count?"}]


async def test_the_guard_refuses_an_overlong_prompt_before_sending(llama_small: Endpoint) -> None:
    limit = await context_limit_for(llama_small, "qwen")
    assert limit == 512, "the served window comes from llama.cpp's /props"
    with pytest.raises(ContextOverflow) as caught:
        await run_turn(llama_small, {"model": "qwen", "messages": _long_messages()}, context_limit=limit)
    assert caught.value.status is None and caught.value.limit == 512 and (caught.value.requested or 0) > 512


async def test_the_servers_own_overflow_is_the_same_error(llama_small: Endpoint) -> None:
    with pytest.raises(ContextOverflow) as caught:
        await run_turn(llama_small, {"model": "qwen", "messages": _long_messages()})
    error = caught.value
    assert error.status == 400 and error.limit == 512 and (error.requested or 0) > 512
    assert "context" in (error.body or "")


@pytest.fixture
def loading_server() -> Iterator[tuple[str, int]]:
    """A fresh llama-server whose port is open but whose model is still loading."""
    cfg = real_config(require_key=False)  # spawned by hand here, with no key file written for it
    ensure_binary(cfg)
    ensure_model(cfg)
    port = _free_port()
    pid = spawn(server_command(cfg, port), cfg.home / "logs" / f"loading-test-{port}.log")
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                connection.request("GET", "/health")
                status = connection.getresponse().status
                connection.close()
                break
            except OSError:
                time.sleep(0.005)
        assert status == 503, f"expected the loading phase, saw {status}"
        yield f"http://127.0.0.1:{port}/v1", pid
    finally:
        terminate(pid, grace=5.0)


async def test_a_request_sent_while_the_model_loads_is_waited_through(
    loading_server: tuple[str, int],
) -> None:
    base_url, _ = loading_server
    events: list[Event] = []
    turn = await run_turn(
        Endpoint(base_url, request_timeout=60),
        {"model": "qwen", "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 5},
        policy=RetryPolicy(max_retries=0, loading_poll_s=0.2),
        on_event=events.append,
    )
    assert turn.finish_reason in ("stop", "length")
    assert [e for e in events if isinstance(e, Notice) and e.name == "loading"]
    assert turn.usage.retries == 0


async def test_ask_json_returns_a_schema_valid_object(llama: Endpoint) -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "country": {"type": "string"},
            "population_millions": {"type": "number"},
        },
        "required": ["city", "country", "population_millions"],
        "additionalProperties": False,
    }
    value = await ask_json(
        llama, "qwen", "You answer with facts about cities.", "Describe Paris.", schema, name="city"
    )
    jsonschema.validate(value, schema)


async def test_a_reply_cut_at_a_small_ceiling_is_continued_into_one_turn(llama: Endpoint) -> None:
    body = {
        "model": "qwen",
        "messages": [
            {"role": "user", "content": "Count from 1 to 40, numbers separated by commas, nothing else."}
        ],
        "max_tokens": 16,
        "temperature": 0,
    }
    first = await run_turn(llama, body)
    assert first.finish_reason == "length"
    events: list[Event] = []
    whole = await continue_turn(llama, body, first, max_continuations=3, on_event=events.append)
    assert whole.usage.continuations and whole.usage.continuations >= 1, events
    assert whole.content.startswith(first.content) and len(whole.content) > len(first.content)
    assert whole.usage.completion_tokens > first.usage.completion_tokens
    assert model_capabilities_for(llama, "qwen").assistant_prefill is True
