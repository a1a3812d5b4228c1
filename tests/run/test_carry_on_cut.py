"""An answer whose stream broke after part of it was shown is carried on from where it stopped.

The retry loop never sends a turn again once output was shown (the user would read it twice), so before
this a full shared cache on llama-server, a dropped connection or a stall mid-answer ended the run. The run
now sends the transcript with the text shown as a trailing assistant message (a prefill) and shows only
what follows. Against the scripted server on loopback; the first reply of the first test is a byte-exact
capture of llama-server b11434 ending a stream on its full shared cache after one word.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from steadyloop import Agent, Endpoint
from steadyloop.errors import RunEndpointSilent, RunEndpointUnavailable
from steadyloop.events import Event, MessageUpdate, Notice
from steadyloop.loop import LoopPolicy
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn import RetryPolicy

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "captures"
FULL_AFTER_OUTPUT = CAPTURES / "cache_full_after_output.response.txt"  # shows "item", then the 500 event
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05, carry_on_cut_answers=True)


async def _prompt(*replies: Any, retry: RetryPolicy = FAST) -> tuple[str, list[Event], list[dict[str, Any]]]:
    events: list[Event] = []
    async with ScriptedServer(*replies) as server:
        agent = Agent(Endpoint(server.base_url, request_timeout=0.5), "m", policy=LoopPolicy(retry=retry))
        agent.subscribe(events.append)
        try:
            turn = await agent.prompt("Repeat the list.")
        finally:
            sent = [r.json for r in server.chat_requests]
    return turn.content, events, sent


def _shown(events: list[Event]) -> str:
    return "".join(e.delta for e in events if isinstance(e, MessageUpdate) and e.kind == "text")


def _notices(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.name == "continuation"]


async def test_a_full_shared_cache_mid_answer_is_carried_on_and_nothing_is_shown_twice() -> None:
    rest = Reply.stream(text_chunks(["1 item2", " item3."]))
    content, events, sent = await _prompt(Reply.from_capture(FULL_AFTER_OUTPUT), rest)
    assert content == "item1 item2 item3."
    assert _shown(events) == content  # "item" once, then only what followed it
    assert sent[1]["messages"][:-1] == sent[0]["messages"]
    assert sent[1]["messages"][-1] == {"role": "assistant", "content": "item"}
    (notice,) = _notices(events)
    assert "Context size has been exceeded" in notice and "carrying it on" in notice


async def test_a_dropped_connection_and_a_stall_mid_answer_are_carried_on() -> None:
    dropped = Reply.stream(text_chunks(["The list: ", "a, b"]), disconnect_after=3)
    content, events, _ = await _prompt(dropped, Reply.stream(text_chunks([", c."])))
    assert content == "The list: a, b, c." and _shown(events) == content
    stalled = Reply.stream(text_chunks(["The list: ", "a, b"]), stall_after=3, stall_seconds=5)
    content, events, _ = await _prompt(stalled, Reply.stream(text_chunks([", c."])))
    assert content == "The list: a, b, c." and _shown(events) == content


async def test_a_server_that_repeats_the_prefill_shows_only_what_follows_it() -> None:
    dropped = Reply.stream(text_chunks(["The list: ", "a, b"]), disconnect_after=3)
    content, events, _ = await _prompt(dropped, Reply.stream(text_chunks(["The list: a, b", ", c."])))
    assert content == "The list: a, b, c." and _shown(events) == content


async def test_the_cut_stays_an_error_when_the_policy_says_no_or_the_carry_on_fails() -> None:
    def dropped() -> Any:
        return Reply.stream(text_chunks(["The list: ", "a, b"]), disconnect_after=3)

    with pytest.raises(RunEndpointUnavailable):
        # the carry-on is off by default
        await _prompt(
            dropped(), Reply.stream(text_chunks(["never asked"])), retry=RetryPolicy(base_delay_s=0.01)
        )
    refused = Reply.json({"error": {"message": "Assistant prefill is not supported"}}, 400)
    with pytest.raises(RunEndpointUnavailable) as caught:
        await _prompt(dropped(), refused)
    assert caught.value.messages[-1].content == "The list: a, b"  # what was shown is kept
    stalled = Reply.stream(text_chunks(["The list: "]), stall_after=2, stall_seconds=5)
    with pytest.raises(RunEndpointSilent):  # the continuation stalled too: the first error stands
        await _prompt(stalled, Reply.stream(text_chunks(["x"]), stall_after=0, stall_seconds=5))


async def test_a_cut_before_any_output_is_sent_again_whole_not_carried_on() -> None:
    before = Reply.stream(text_chunks(["never shown"]), disconnect_after=0)
    content, events, sent = await _prompt(before, Reply.stream(text_chunks(["Whole answer."])))
    assert content == "Whole answer." and not _notices(events)
    assert sent[1]["messages"] == sent[0]["messages"]
