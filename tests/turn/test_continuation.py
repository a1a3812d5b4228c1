"""continue_turn against the scripted server: joining pieces, echoed prefills, restarts, refusals."""

from __future__ import annotations

from typing import Any

from steadyloop.messages import ToolCall, Turn
from steadyloop.testing.chunks import text_chunks, usage_chunk
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn.capabilities import model_capabilities_for
from steadyloop.turn.continuation import can_continue, continue_turn
from steadyloop.usage import Usage
from steadyloop.wire.endpoints import Endpoint

BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "Write a long answer."}],
    "max_tokens": 5,
}
CUT = Turn(content="The first part of the answer", usage=Usage(10, 5, 15), finish_reason="length")


def piece(text: str, finish: str = "stop", completion: int = 5) -> Any:
    return Reply.stream([*text_chunks(text, finish=finish), usage_chunk(20, completion)])


async def test_pieces_are_joined_into_one_turn_and_counted() -> None:
    async with ScriptedServer(piece(" goes on", finish="length"), piece(" and ends.")) as server:
        turn = await continue_turn(Endpoint(server.base_url), BODY, CUT, max_continuations=3)
        prefill = server.chat_requests[1].json["messages"][-1]
    assert turn.content == "The first part of the answer goes on and ends."
    assert (
        turn.usage.continuations == 2 and turn.usage.completion_tokens == 15 and turn.finish_reason == "stop"
    )
    assert prefill == {"role": "assistant", "content": "The first part of the answer goes on"}


async def test_an_echoed_prefill_is_taken_off_the_continuation() -> None:
    async with ScriptedServer(piece("The first part of the answer, continued.")) as server:
        turn = await continue_turn(Endpoint(server.base_url), BODY, CUT)
    assert turn.content == "The first part of the answer, continued."


async def test_a_server_that_starts_over_latches_prefill_off() -> None:
    async with ScriptedServer(piece("The first part of the answer", finish="length")) as server:
        endpoint = Endpoint(server.base_url)
        turn = await continue_turn(endpoint, BODY, CUT)
        assert turn == CUT and model_capabilities_for(endpoint, "m").assistant_prefill is False
        again = await continue_turn(endpoint, BODY, CUT)  # latched: no request this time
        assert again == CUT and len(server.chat_requests) == 1


async def test_a_400_latches_prefill_off_and_keeps_the_cut_answer() -> None:
    refusal = Reply.json(
        {"error": {"message": "Assistant response prefill is incompatible with enable_thinking."}}, 400
    )
    async with ScriptedServer(refusal) as server:
        endpoint = Endpoint(server.base_url)
        assert await continue_turn(endpoint, BODY, CUT) == CUT
    assert model_capabilities_for(endpoint, "m").assistant_prefill is False


def test_only_an_answer_begun_and_cut_off_is_continued() -> None:
    assert can_continue(CUT)
    assert not can_continue(Turn(content="", reasoning="thinking...", finish_reason="length"))
    assert not can_continue(Turn(content="x", tool_calls=[ToolCall("c", "f", {})], finish_reason="length"))
    assert not can_continue(Turn(content="done", finish_reason="stop"))
