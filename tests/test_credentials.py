"""Nothing steadyloop prints, logs or raises shows a credential: an API key, or a password in a base URL."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from steadyloop.agent import Agent
from steadyloop.errors import EndpointError, EndpointUnavailable, RunError, SteadyloopError, redact_url
from steadyloop.events import Event
from steadyloop.loop import LoopPolicy
from steadyloop.testing.chunks import stream_of
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint

KEY = "sk-live-0123456789abcdef"
PASSWORD = "hunter2-pass"


def _with_password(base_url: str) -> str:
    return base_url.replace("http://", f"http://bob:{PASSWORD}@")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _clean(*texts: object) -> None:
    for text in texts:
        assert KEY not in str(text) and PASSWORD not in str(text), text


def test_an_endpoints_repr_and_str_show_no_key_and_no_password() -> None:
    endpoint = Endpoint(f"http://bob:{PASSWORD}@127.0.0.1:8080/v1", api_key=KEY)
    _clean(repr(endpoint), str(endpoint), endpoint.shown_url, [endpoint], {"e": endpoint})
    assert "api_key='***'" in repr(endpoint) and "bob:***@127.0.0.1:8080" in repr(endpoint)
    assert "api_key=None" in repr(Endpoint("http://127.0.0.1:8080/v1"))
    assert endpoint.key == KEY  # still sent, just never shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"http://bob:{PASSWORD}@h/v1", "http://bob:***@h/v1"),
        (f"https://{KEY}@api.example.com/v1", "https://***@api.example.com/v1"),
        ("http://h/v1?email=a@b.c", "http://h/v1?email=a@b.c"),
        (
            f"could not talk to http://bob:{PASSWORD}@h:1/v1: refused",
            "could not talk to http://bob:***@h:1/v1: refused",
        ),
        ("no url here", "no url here"),
    ],
)
def test_redact_url(text: str, shown: str) -> None:
    assert redact_url(text) == shown


def test_every_error_hides_credentials_in_its_message_endpoint_and_body() -> None:
    url = f"http://bob:{PASSWORD}@h/v1"
    error = EndpointError(f"{url} failed", endpoint=url, body=f"upstream {url} said no")
    _clean(str(error), repr(error), error.endpoint, error.body, error.args)
    _clean(str(SteadyloopError(f"at {url}")), str(RunError(f"the run stopped at {url}", reason="endpoint")))


async def test_an_unreachable_endpoint_with_a_password_fails_without_showing_it() -> None:
    endpoint = Endpoint(_with_password(f"http://127.0.0.1:{_free_port()}/v1"), api_key=KEY)
    events: list[Event] = []
    with pytest.raises(EndpointUnavailable) as caught:
        await run_turn(
            endpoint,
            {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            policy=RetryPolicy(max_retries=1, base_delay_s=0.01),
            on_event=events.append,
        )
    _clean(str(caught.value), caught.value.endpoint, repr(caught.value), *[repr(e) for e in events])


async def test_a_run_with_a_credentialled_url_shows_it_nowhere() -> None:
    loading = Reply.json(
        {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}, 503
    )
    refused = Reply.json({"error": {"message": "bad request", "type": "invalid_request_error"}}, 400)
    async with ScriptedServer(loading, Reply.stream(stream_of("Hi!")), refused) as server:
        endpoint = Endpoint(_with_password(server.base_url), api_key=KEY)
        policy = LoopPolicy(retry=RetryPolicy(base_delay_s=0.01, loading_poll_s=0.02))
        agent = Agent(endpoint, "m", policy=policy)
        events: list[Any] = []
        agent.subscribe(events.append)
        assert (await agent.prompt("hello")).content == "Hi!"
        with pytest.raises(RunError) as caught:
            await agent.prompt("again")
    _clean(str(caught.value), repr(caught.value), agent.state.error, *[repr(e) for e in events])
    assert any("bob:***@" in repr(e) for e in events)  # the loading notice names the endpoint, hidden
