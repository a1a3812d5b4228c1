"""Interceptors on one turn, through both transports on the scripted server: what each sees, what a
replacement changes, one call per attempt, and a failing interceptor named in a typed error."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

import steadyloop as sl
from steadyloop.events import Event, MessageUpdate
from steadyloop.testing.chunks import stream_of, text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire import DROP, ResponseInfo, SseEvent
from steadyloop.wire.endpoints import Endpoint
from steadyloop.wire.transport.clients import configure_clients

Transport = Literal["httpx2", "aiohttp"]
TRANSPORTS: tuple[Transport, ...] = ("httpx2", "aiohttp")
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


def bad_gateway() -> Any:
    return Reply.json({"error": {"message": "upstream"}}, 502, {"X-Request-Id": "req-1"})


def ok(text: str = "ok") -> Any:
    return Reply.stream(text_chunks(text), headers={"X-Request-Id": "req-2"})


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    configure_clients(transport=request.param)
    return request.param  # type: ignore[no-any-return]


async def test_on_payload_replaces_the_body_on_every_attempt(transport: Transport) -> None:
    seen: list[dict[str, Any]] = []

    async def payload(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        await asyncio.sleep(0)  # may be async
        return {**body, "messages": [{"role": "user", "content": "rewritten"}], "user": "proxy-7"}

    hooks = sl.Interceptors(on_payload=payload)
    async with ScriptedServer(bad_gateway(), ok()) as server:
        turn = await run_turn(Endpoint(server.base_url), BODY, policy=FAST, interceptors=hooks)
        sent = [r.json for r in server.chat_requests]
    assert turn.content == "ok"
    assert len(seen) == 2  # once per attempt, the retry included
    assert all(b["stream"] is True and b["model"] == "m" and b["messages"] == BODY["messages"] for b in seen)
    assert [b["messages"][0]["content"] for b in sent] == ["rewritten", "rewritten"]
    assert all(b["user"] == "proxy-7" for b in sent)


async def test_on_payload_returning_none_sends_the_body_as_it_is(transport: Transport) -> None:
    seen: list[dict[str, Any]] = []
    async with ScriptedServer(ok()) as server:
        await run_turn(Endpoint(server.base_url), BODY, interceptors=sl.Interceptors(on_payload=seen.append))
        sent = server.chat_requests[0].json
    assert sent == seen[0] and sent["messages"] == BODY["messages"]


async def test_on_response_is_told_every_status_and_its_headers(transport: Transport) -> None:
    told: list[ResponseInfo] = []
    async with ScriptedServer(bad_gateway(), ok()) as server:
        await run_turn(
            Endpoint(server.base_url),
            BODY,
            policy=FAST,
            interceptors=sl.Interceptors(on_response=told.append),
        )
    assert [r.status for r in told] == [502, 200]
    ids = [{k.lower(): v for k, v in r.headers.items()}["x-request-id"] for r in told]
    assert ids == ["req-1", "req-2"]
    assert all(r.endpoint == server.base_url and r.model == "m" for r in told)


async def test_response_headers_are_read_without_regard_to_case(transport: Transport) -> None:
    # docs/interceptors.md reads r.headers.get("x-ratelimit-remaining"); the server spells it its own way.
    told: list[ResponseInfo] = []
    reply = Reply.stream(text_chunks("ok"), headers={"X-RateLimit-Remaining": "41"})
    async with ScriptedServer(reply) as server:
        await run_turn(Endpoint(server.base_url), BODY, interceptors=sl.Interceptors(on_response=told.append))
    headers = told[0].headers
    assert headers.get("x-ratelimit-remaining") == headers["X-RATELIMIT-REMAINING"] == "41"
    assert "x-ratelimit-remaining" in headers


async def test_on_sse_event_sees_every_raw_event_before_it_is_read(transport: Transport) -> None:
    told: list[SseEvent] = []

    async def raw(event: SseEvent) -> None:
        told.append(event)

    stream = "data: not json at all\n\n" + "".join(f"data: {c}\n\n" for c in _json_chunks("héllo"))
    reply = Reply.raw(stream + "event: ping\ndata: {}\n\ndata: [DONE]\n\n", headers=_SSE)
    async with ScriptedServer(reply) as server:
        turn = await run_turn(Endpoint(server.base_url), BODY, interceptors=sl.Interceptors(on_sse_event=raw))
    assert turn.content == "héllo"
    assert told[0] == SseEvent("not json at all")  # unreadable, still told
    assert SseEvent("{}", "ping") in told
    assert told[-1] == SseEvent("[DONE]")
    assert sum('"content":' in e.data for e in told) >= 1
    assert "".join(e.data for e in told).count("héllo") == 1


async def test_on_assistant_event_rewrites_what_on_output_hears_not_the_turn(transport: Transport) -> None:
    heard: list[str] = []
    thought: list[str] = []

    def shout(event: Event) -> Any:
        assert isinstance(event, MessageUpdate)
        if event.kind == "thinking":
            return DROP
        return MessageUpdate(kind="text", delta=event.delta.upper())

    reply = Reply.stream(stream_of(["a ", "secret", " b"], reasoning="hmm"))
    async with ScriptedServer(reply) as server:
        turn = await run_turn(
            Endpoint(server.base_url),
            BODY,
            on_output=heard.append,
            on_thinking=thought.append,
            interceptors=sl.Interceptors(on_assistant_event=shout),
        )
    assert turn.content == "a secret b" and turn.reasoning == "hmm"  # the turn keeps what streamed
    assert "".join(heard) == "A SECRET B" and thought == []


@pytest.mark.parametrize("which", ["on_payload", "on_response", "on_sse_event", "on_assistant_event"])
async def test_an_interceptor_that_raises_fails_the_turn_once_named(transport: Transport, which: str) -> None:
    calls = 0

    def broken(value: Any) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("proxy down")

    async with ScriptedServer(bad_gateway(), ok(), ok()) as server:
        with pytest.raises(sl.InterceptorFailed) as caught:
            await run_turn(
                Endpoint(server.base_url), BODY, policy=FAST, interceptors=sl.Interceptors(**{which: broken})
            )
        requests = len(server.chat_requests)
    error = caught.value
    assert error.interceptor == which and which in str(error) and "proxy down" in str(error)
    assert isinstance(error.__cause__, RuntimeError)
    assert calls == 1  # not retried
    # on_payload fails before anything is sent; the others on the first response they see.
    expected = {"on_payload": 0, "on_response": 1, "on_sse_event": 2, "on_assistant_event": 2}
    assert requests == expected[which]


async def test_a_payload_that_is_not_a_body_is_refused(transport: Transport) -> None:
    async with ScriptedServer(ok()) as server:
        with pytest.raises(sl.InterceptorFailed, match="must return the body") as caught:
            await run_turn(
                Endpoint(server.base_url),
                BODY,
                interceptors=sl.Interceptors(on_payload=lambda body: ["not", "a", "body"]),  # type: ignore[arg-type,return-value]
            )
        assert server.chat_requests == []
    assert caught.value.interceptor == "on_payload"


async def test_an_async_assistant_event_interceptor_is_refused() -> None:
    async def later(event: Event) -> None:
        return None

    async with ScriptedServer(ok()) as server:
        with pytest.raises(sl.InterceptorFailed, match="plain function"):
            await run_turn(
                Endpoint(server.base_url),
                BODY,
                interceptors=sl.Interceptors(on_assistant_event=later),  # type: ignore[arg-type]
            )


_SSE = {"Content-Type": "text/event-stream"}


def _json_chunks(text: str) -> list[str]:
    import json

    return [json.dumps(chunk, ensure_ascii=False) for chunk in stream_of(text)]
