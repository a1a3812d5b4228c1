"""The provider seam: an endpoint's wire format, and a caller's own transport under run_turn and the Agent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any

import pytest

import steadyloop as sl
from steadyloop.errors import EndpointUnavailable, InvalidInput
from steadyloop.testing.chunks import text_chunks, tool_call_chunks
from steadyloop.turn import RetryPolicy, run_turn
from steadyloop.wire import provider_from
from steadyloop.wire.endpoints import Endpoint, endpoint_key
from steadyloop.wire.openai_chat.provider import OpenAIChatProvider
from steadyloop.wire.registry import provider_for
from steadyloop.wire.sse import DONE


class _Replayed:
    """A stream of chat-completions chunks a caller's transport produced itself."""

    def __init__(self, batches: Sequence[Sequence[Any]]) -> None:
        self._batches = batches
        self.closed = False

    async def batches(self) -> AsyncIterator[Sequence[Any]]:
        for batch in self._batches:
            yield batch

    def skipped(self) -> str:
        return ""

    def close(self) -> Awaitable[None] | None:
        self.closed = True
        return None


class ProxyBackend:
    """A caller's own provider: answers from a script and keeps every request it was given."""

    def __init__(self, *replies: Sequence[Sequence[Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[Mapping[str, Any]] = []

    @property
    def endpoint(self) -> str:
        return "http://proxy.invalid/v1"

    async def open_turn(self, body: Mapping[str, Any], *, connect_timeout: float | None) -> _Replayed:
        self.requests.append(body)
        if not self.replies:
            raise EndpointUnavailable("the proxy has nothing more", endpoint=self.endpoint, kind="transient")
        return _Replayed(self.replies.pop(0))


def test_api_is_validated_shown_and_part_of_the_identity() -> None:
    openai = Endpoint("http://127.0.0.1:9/v1")
    anthropic = Endpoint("http://127.0.0.1:9/v1", api="anthropic")
    assert openai.api == "openai"
    assert "api='anthropic'" in repr(anthropic)
    assert endpoint_key(openai) != endpoint_key(anthropic)
    assert endpoint_key(anthropic) == endpoint_key("http://127.0.0.1:9/v1", None, "anthropic")
    assert openai != anthropic
    with pytest.raises(InvalidInput, match="api must be one of"):
        Endpoint("http://127.0.0.1:9/v1", api="cohere")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="transport must be"):
        Endpoint("http://127.0.0.1:9/v1", transport=object())  # type: ignore[arg-type]


async def test_an_openai_endpoint_gets_the_chat_completions_provider() -> None:
    assert isinstance(provider_for(Endpoint("http://127.0.0.1:9/v1")), OpenAIChatProvider)
    backend = ProxyBackend()
    assert provider_for(Endpoint("http://127.0.0.1:9/v1", transport=backend)) is backend


async def test_run_turn_reads_a_callers_transport_like_any_stream() -> None:
    backend = ProxyBackend([text_chunks("Hello from the proxy"), [DONE]])
    endpoint = Endpoint("http://127.0.0.1:9/v1", transport=backend)
    seen: list[str] = []
    turn = await run_turn(
        endpoint, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, on_output=seen.append
    )
    assert turn.content == "Hello from the proxy"
    assert "".join(seen) == "Hello from the proxy"
    assert backend.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


async def test_a_transport_failure_is_retried_like_any_transient_one() -> None:
    backend = ProxyBackend()
    endpoint = Endpoint("http://127.0.0.1:9/v1", transport=backend)
    policy = RetryPolicy(max_retries=1, base_delay_s=0.0)
    with pytest.raises(EndpointUnavailable, match="nothing more"):
        await run_turn(
            endpoint, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, policy=policy
        )
    assert len(backend.requests) == 2


async def test_an_agent_runs_tools_through_a_callers_transport() -> None:
    @sl.tool
    def shout(text: str) -> str:
        """Upper-case text."""
        return text.upper()

    backend = ProxyBackend(
        [tool_call_chunks([{"id": "c1", "name": "shout", "arguments": {"text": "hey"}}])],
        [text_chunks("done: HEY")],
    )
    agent = sl.Agent(Endpoint("http://127.0.0.1:9/v1", transport=backend), "m", tools=[shout])
    turn = await agent.prompt("shout hey")
    assert turn.content == "done: HEY"
    second = backend.requests[1]["messages"]
    assert second[-1]["role"] == "tool"
    assert second[-1]["content"] == "HEY"


async def test_a_generator_function_is_a_whole_back_end() -> None:
    seen: list[Mapping[str, Any]] = []

    async def backend(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        seen.append(body)
        for chunk in text_chunks("from a generator"):
            yield chunk

    agent = sl.Agent(Endpoint("http://127.0.0.1:9/v1", transport=provider_from(backend)), "m")
    turn = await agent.prompt("hi")
    assert turn.content == "from a generator"
    assert seen[0]["messages"][-1] == {"role": "user", "content": "hi"}


async def test_a_generator_that_loses_its_connection_is_retried() -> None:
    calls = 0

    async def flaky(body: Mapping[str, Any]) -> AsyncIterator[Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionResetError("proxy dropped")
        for chunk in text_chunks("second time"):
            yield chunk

    endpoint = Endpoint("http://127.0.0.1:9/v1", transport=provider_from(flaky, name="proxy"))
    policy = RetryPolicy(max_retries=1, base_delay_s=0.0)
    turn = await run_turn(
        endpoint, {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, policy=policy
    )
    assert turn.content == "second time"
    assert calls == 2
