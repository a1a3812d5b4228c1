"""Where a fold's summary goes, against a real llama-server whose chat template takes one leading system
message only (as Qwen3.5's and others' do): the default placement is accepted, a second system message is
refused by the server itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import steadyloop as sl
from steadyloop.errors import RunEndpointError
from steadyloop.local import key_for, running_server

from ._model import real_config

TEMPLATE = Path(__file__).parent.parent / "data" / "templates" / "one-leading-system.jinja"


@pytest.fixture(scope="module")
def strict_template_url() -> Iterator[str]:
    config = real_config(
        template="stock", ctx=2048, extra_args=("-np", "1", "--chat-template-file", str(TEMPLATE))
    )
    with running_server(
        config, progress=lambda e, d, t: print(f"[local server] {e}", file=sys.stderr)
    ) as server:
        yield server.base_url


def _history() -> list[sl.Message]:
    history: list[sl.Message] = [sl.UserMessage(content="Read the logs one by one and tell me what you see.")]
    for n in range(5):
        history.append(sl.AssistantMessage(tool_calls=(sl.ToolCall(f"r{n}", "read_log", {"n": n}),)))
        history.append(
            sl.ToolResultMessage(call_id=f"r{n}", content=f"log {n}: " + "ok " * 250, name="read_log")
        )
        history.append(sl.AssistantMessage(content=f"Log {n} is fine."))
        history.append(sl.UserMessage(content=f"Next one please ({n})."))
    return history


async def _prompt(url: str, placement: str) -> sl.Turn:
    async def summarise(text: str) -> str:
        return "Logs 0 to 3 were read; every one was fine."

    agent = sl.Agent(
        sl.Endpoint(url, key_for(url), request_timeout=120.0),
        sl.ModelParams(model="m", max_tokens=16, temperature=0.0),
        system="You are terse.",
        messages=_history(),
        policy=sl.LoopPolicy(
            context_limit=1200,
            context=sl.ContextPolicy(summarise=summarise, placement=placement),  # type: ignore[arg-type]
            retry=sl.RetryPolicy(max_retries=0),
        ),
    )
    turn = await agent.prompt("In one word: were the logs fine?")
    assert agent.context.fold is not None  # the request did carry a summary
    return turn


async def test_the_summary_on_the_first_kept_user_message_is_accepted(strict_template_url: str) -> None:
    turn = await _prompt(strict_template_url, "user")
    assert turn.content.strip()


async def test_a_second_system_message_is_refused_by_the_template(strict_template_url: str) -> None:
    with pytest.raises(RunEndpointError) as caught:
        await _prompt(strict_template_url, "system")
    assert "System message must be at the beginning" in str(caught.value.body or caught.value)
