"""A turn against an endpoint that cannot answer as things stand: told at once, never re-sent; and the
``RequestSent`` event that says a request really went out, before any answer came."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import pytest

import steadyloop as sl
from steadyloop.errors import EndpointUnreachable, RunEndpointUnreachable
from steadyloop.events import Event, Failover, RequestSent, Retry, event_from_json, event_to_json
from steadyloop.testing.chunks import text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire import provider_from
from steadyloop.wire.endpoints import Endpoint, Target
from steadyloop.wire.interceptors import Interceptors, ResponseInfo
from steadyloop.wire.transport.clients import configure_clients

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def answer(text: str) -> Any:
    return Reply.stream([*text_chunks(text), usage_chunk(3, 1)])


async def turn_events(endpoint: Endpoint, **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    options.setdefault("policy", FAST)
    turn = await run_turn(endpoint, BODY, on_event=events.append, **options)
    return turn, events


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    ("url", "connection"),
    [("http://127.0.0.1:{port}/v1", "refused"), ("http://steadyloop-test.invalid/v1", "dns")],
)
async def test_nothing_listening_or_no_such_host_is_told_once_and_not_retried(
    transport: Transport, url: str, connection: str
) -> None:
    configure_clients(transport=transport)
    events: list[Event] = []
    with pytest.raises(EndpointUnreachable) as caught:
        await run_turn(Endpoint(url.format(port=closed_port())), BODY, on_event=events.append)
    assert caught.value.connection == connection
    # The default policy would have retried three times; nothing here changes by waiting.
    assert not [e for e in events if isinstance(e, Retry | RequestSent)]


async def test_a_run_stopped_by_it_is_caught_as_the_endpoints_failure_too() -> None:
    agent = sl.Agent(Endpoint(f"http://127.0.0.1:{closed_port()}/v1"), "m")
    with pytest.raises(sl.EndpointUnreachable) as caught:
        await agent.prompt("hi")
    assert isinstance(caught.value, RunEndpointUnreachable) and isinstance(caught.value, sl.RunError)
    assert caught.value.connection == "refused" and caught.value.problem.startswith("nothing listens on")


async def test_a_dropped_connection_is_still_retried() -> None:
    async with ScriptedServer(Reply.drop(), answer("second time")) as server:
        turn, events = await turn_events(Endpoint(server.base_url))
    assert turn.content == "second time"
    assert len([e for e in events if isinstance(e, Retry)]) == 1


async def test_a_chain_hands_a_turn_on_from_a_port_where_nothing_listens() -> None:
    async with ScriptedServer(answer("from backup")) as backup:
        chain = Endpoint(f"http://127.0.0.1:{closed_port()}/v1").with_fallbacks(
            Target(Endpoint(backup.base_url))
        )
        turn, events = await turn_events(chain)
    assert turn.content == "from backup"
    (hop,) = [e for e in events if isinstance(e, Failover)]
    assert hop.kind == "network" and hop.cause.startswith("nothing listens on 127.0.0.1:")
    assert not [e for e in events if isinstance(e, Retry)]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_request_sent_is_told_when_the_request_went_out_before_any_answer(transport: Transport) -> None:
    # The server holds its headers back, as llama-server did while it read the prompt: the event must come
    # from the request going out, not from the answer.
    configure_clients(transport=transport)
    order: list[str] = []

    def noted(event: Event) -> None:
        if isinstance(event, RequestSent):
            order.append(event.type)

    def responded(_info: ResponseInfo) -> None:
        order.append("response")

    reply = Reply.stream([*text_chunks("ok"), usage_chunk(3, 1)], headers_delay=0.2)
    async with ScriptedServer(reply) as server:
        endpoint = Endpoint(server.base_url)
        turn = await run_turn(
            endpoint, BODY, on_event=noted, policy=FAST, interceptors=Interceptors(on_response=responded)
        )
    # Told by the transport: the headers the server held back had not come yet.
    assert order == ["request_sent", "response"] and turn.content == "ok"


async def test_request_sent_names_the_endpoint_without_its_password_and_each_attempt_has_one() -> None:
    async with ScriptedServer(Reply.drop(), answer("ok")) as server:
        url = server.base_url.replace("http://", "http://ana:s3cret@")
        _, events = await turn_events(Endpoint(url))
    sent = [e for e in events if isinstance(e, RequestSent)]
    assert len(sent) == 2  # the dropped attempt went out too
    assert sent[0].endpoint == url.replace("s3cret", "***") and sent[0].model == "m"
    assert event_from_json(event_to_json(sent[0])) == sent[0]


async def test_a_callers_own_provider_tells_it_when_its_answer_began() -> None:
    order: list[str] = []

    async def backend(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        order.append("answer")
        for chunk in text_chunks("hello"):
            yield chunk

    endpoint = Endpoint("http://proxy.invalid", transport=provider_from(backend, name="mine"))
    turn = await run_turn(
        endpoint, BODY, on_event=lambda e: order.append(e.type), on_output=lambda _t: order.append("text")
    )
    assert turn.content == "hello"
    assert order[0] == "request_sent" and order.count("request_sent") == 1 and "text" in order
