"""gpt-oss channel markers in an answer: found, taken out, told to the caller and as a notice."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steadyloop.events import Event, Notice
from steadyloop.loop import LoopPolicy, run_agent_loop
from steadyloop.messages import AssistantMessage, Turn, UserMessage
from steadyloop.request_body import ModelParams
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.turn.harmony import HARMONY_MARKERS, HarmonyLeak, find_harmony_leak, mend_harmony
from steadyloop.wire.endpoints import Endpoint

# As servers without a harmony parser handed them over (vLLM, TensorRT-LLM, mlx-lm reports).
FULL = (
    "<|channel|>analysis<|message|>The user wants 2+2.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Four.<|return|>"
)
COMMENTARY_JSON = '<|channel|>commentary<|message|>{\n  "path": "/",\n  "name_pattern": "*Chen*"\n}<|end|>'
ADDRESSED = (
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}'
    "<|call|>"
)


def test_plain_text_has_no_leak() -> None:
    assert find_harmony_leak("The answer is <b>4</b>, or 2|2.") is None
    assert find_harmony_leak("") is None


def test_the_final_channel_is_the_answer_and_the_analysis_is_reasoning() -> None:
    leak = find_harmony_leak(FULL)
    assert leak is not None
    assert leak.cleaned == "Four." and leak.reasoning == "The user wants 2+2."
    assert leak.markers == ("<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>")


def test_a_trailing_return_and_a_bare_channel_are_stripped() -> None:
    assert find_harmony_leak("Four.<|return|>").cleaned == "Four."  # type: ignore[union-attr]
    leak = find_harmony_leak(COMMENTARY_JSON)
    assert leak is not None and leak.cleaned.startswith('{\n  "path"') and "<|" not in leak.cleaned


def test_framing_that_addresses_a_tool_is_left_for_the_text_call_recovery() -> None:
    leak = find_harmony_leak(ADDRESSED)
    assert leak is not None and leak.cleaned == ADDRESSED and "<|call|>" in leak.markers


def test_a_header_never_closed_by_a_message_was_answer_text() -> None:
    leak = find_harmony_leak("<|start|>Hello there")
    assert leak is not None and leak.cleaned == "Hello there"


@given(st.lists(st.sampled_from([*HARMONY_MARKERS, "final", "analysis", " to=x", "text", "<|", "|>", "\n"])))
def test_total_and_nothing_of_the_framing_left(parts: list[str]) -> None:
    text = "".join(parts)
    leak = find_harmony_leak(text)
    if not any(m in text for m in HARMONY_MARKERS):
        assert leak is None
        return
    assert leak is not None
    if leak.cleaned != text:
        assert not any(m in leak.cleaned for m in HARMONY_MARKERS)


def test_linear_in_the_length() -> None:
    # A hundred thousand markers: a quadratic scan would not finish in the test's time.
    leak = find_harmony_leak("<|start|>x" * 100_000)
    assert leak is not None and len(leak.cleaned) == 100_000


async def test_mend_calls_sync_and_async_callbacks_and_survives_one_that_raises() -> None:
    seen: list[HarmonyLeak] = []
    events: list[Event] = []

    async def later(leak: HarmonyLeak) -> None:
        seen.append(leak)

    def broken(leak: HarmonyLeak) -> None:
        raise RuntimeError("callback bug")

    turn = Turn(content="Four.<|return|>")
    mended = await mend_harmony(turn, step=3, emit=events.append, on_leak=later)
    assert mended.content == "Four." and seen[0].step == 3
    await mend_harmony(turn, emit=events.append, on_leak=broken)
    texts = [e.text for e in events if isinstance(e, Notice)]
    assert any("callback failed" in t and "callback bug" in t for t in texts)
    assert await mend_harmony(Turn(content="fine")) == Turn(content="fine")


async def test_a_run_takes_the_framing_out_tells_a_notice_and_calls_back() -> None:
    leaks: list[HarmonyLeak] = []
    events: list[Event] = []
    policy = LoopPolicy(on_harmony_leak=leaks.append)
    reply: Any = Reply.stream(text_chunks(FULL))
    async with ScriptedServer(reply) as server:
        result = await run_agent_loop(
            Endpoint(server.base_url),
            ModelParams(model="gpt-oss-20b"),
            messages=[UserMessage(content="2+2?")],
            policy=policy,
            on_event=events.append,
        )
    assert result.turn.content == "Four."
    final = result.messages[-1]
    assert isinstance(final, AssistantMessage) and final.content == "Four."
    assert not re.search(r"<\|[a-z]+\|>", final.content)
    assert len(leaks) == 1 and "<|return|>" in leaks[0].markers and leaks[0].step == 1
    assert any(isinstance(e, Notice) and e.name == "harmony_leak" for e in events)
