"""The fault proxy: each fault as a client sees it, determinism by seed, tenants, and clean forwarding."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest

from steadyloop.errors import EndpointSilent, EndpointUnavailable
from steadyloop.events import Event, Notice, Retry
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.fault_proxy import ALL_FAULTS, Fault, FaultProxy
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire.endpoints import Endpoint

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
WORDS = ["one ", "two ", "three"]
POLICY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.02, loading_poll_s=0.02, probe_timeout_s=1.0)


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer(default_reply=Reply.stream(text_chunks(WORDS))) as server:
        yield server


async def raw(proxy: FaultProxy, base_url: str | None = None) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=5) as client:
        return await client.post(f"{base_url or proxy.base_url}/chat/completions", json=BODY)


@pytest.mark.parametrize(
    ("fault", "status", "retry_after"),
    [("rate_limited", 429, "1"), ("loading", 503, None), ("server_error", 500, None)],
)
async def test_error_statuses(
    upstream: ScriptedServer, fault: Fault, status: int, retry_after: str | None
) -> None:
    async with FaultProxy(upstream.base_url, faults=[fault], rate=1.0, clean_after=1) as proxy:
        first, second = await raw(proxy), await raw(proxy)
    assert first.status_code == status and first.headers.get("retry-after") == retry_after
    assert "error" in first.json()
    assert second.status_code == 200 and b"three" in second.content
    assert proxy.injected == {fault: 1} and proxy.forwarded == 1
    assert len(upstream.chat_requests) == 1  # the fault never reached the upstream


async def test_keepalive_storms_and_junk_keep_the_stream_whole(upstream: ScriptedServer) -> None:
    async with FaultProxy(upstream.base_url, faults=["keepalive_storm"], rate=1.0, storm=50) as proxy:
        stormy = (await raw(proxy)).content
    assert stormy.count(b": ping\n\n") == 100 and stormy.endswith(b"data: [DONE]\n\n")
    async with FaultProxy(upstream.base_url, faults=["junk_events"], rate=1.0) as proxy:
        junky = (await raw(proxy)).content
    assert b"data: {not json\n\n" in junky and b"upstream-proxy-keepalive\n\n" in junky
    assert junky.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("fault", ["reset_before_first_event", "reset_after_first_event"])
async def test_resets_cut_the_connection(upstream: ScriptedServer, fault: Fault) -> None:
    got = b""
    async with (
        FaultProxy(upstream.base_url, faults=[fault], rate=1.0) as proxy,
        httpx2.AsyncClient(timeout=5) as client,
    ):
        with pytest.raises(httpx2.HTTPError):
            async with client.stream("POST", f"{proxy.base_url}/chat/completions", json=BODY) as r:
                async for data in r.aiter_raw():
                    got += data
    assert got.count(b"data:") == (0 if fault == "reset_before_first_event" else 1)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("rate_limited", EndpointUnavailable),
        ("loading", None),
        ("server_error", EndpointUnavailable),
        ("reset_before_first_event", EndpointUnavailable),
        ("reset_after_first_event", EndpointUnavailable),
        ("stall_before_first_event", EndpointSilent),
        ("stall_after_first_event", EndpointSilent),
        ("keepalive_storm", None),
    ],
)
async def test_a_turn_gets_through_each_fault(
    upstream: ScriptedServer, fault: Fault, expected: type | None
) -> None:
    # Only a stall needs a short silence budget to be seen in the test's time. Every other fault gets a
    # budget no loaded machine runs out of: a clean stream that starts late is not the fault under test.
    stall = fault.startswith("stall_")
    budget = 0.5 if stall else 30.0
    async with FaultProxy(upstream.base_url, faults=[fault], rate=1.0, retry_after_s=0.05) as proxy:
        endpoint = Endpoint(proxy.base_url, request_timeout=budget, first_token_timeout=budget)
        events: list[Event] = []
        turn = await run_turn(endpoint, BODY, policy=POLICY, on_event=events.append)
    assert turn.content == "".join(WORDS)
    retries = [e for e in events if isinstance(e, Retry)]
    if expected is None:
        loading = [e for e in events if isinstance(e, Notice) and e.name == "loading"]
        assert retries == [] and (fault != "loading" or len(loading) == 1)
    elif stall:
        # Faulted on its first two sendings (clean_after=2); on a loaded machine a clean sending may also
        # be slower than the short budget, which is one more silence retry and nothing else.
        assert len(retries) >= 2 and all("sent nothing" in r.reason for r in retries[2:])
    else:
        # Faulted on its first two sendings (clean_after=2), answered on the third.
        assert len(retries) == 2
    assert proxy.injected == {fault: 2 if fault != "keepalive_storm" else 1}


async def test_faults_are_decided_by_the_seed_and_the_request() -> None:
    def plan(seed: int) -> list[Fault | None]:
        proxy = FaultProxy("http://127.0.0.1:1/v1", seed=seed, rate=0.7, clean_after=None)
        return [proxy.fault_for(f"request {i % 5}".encode()) for i in range(40)]

    assert plan(1) == plan(1) and plan(1) != plan(2)
    assert set(plan(3)) <= {*ALL_FAULTS, None}
    capped = FaultProxy("http://127.0.0.1:1/v1", rate=1.0, clean_after=2)
    assert [capped.fault_for(b"same") is None for _ in range(4)] == [False, False, True, True]


async def test_tenants_reach_the_same_upstream_without_their_prefix(upstream: ScriptedServer) -> None:
    async with FaultProxy(upstream.base_url, rate=0.0) as proxy:
        responses = await asyncio.gather(*(raw(proxy, proxy.tenant_base_url(f"t{i}")) for i in range(3)))
        async with httpx2.AsyncClient(timeout=5) as client:
            models = await client.get(f"{proxy.tenant_base_url('t9')}/models")
    assert all(r.status_code == 200 and b"three" in r.content for r in responses)
    assert models.json()["data"][0]["id"] == "scripted"
    assert {r.path for r in upstream.requests} == {"/v1/chat/completions", "/v1/models"}
    with pytest.raises(ValueError, match="tenant"):
        proxy.tenant_base_url("a/b")
