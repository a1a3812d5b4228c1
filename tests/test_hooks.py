"""Hooks: the shared budget and per-hook caps, failures noted once, notify, with_context, turn ids."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence

import pytest

from steadyloop.errors import InvalidInput
from steadyloop.hooks import (
    HOOK_CONTEXT_TOKENS,
    HOOK_PREFACE,
    ContextBlock,
    HookContext,
    HookEvent,
    HookNote,
    HookOutcome,
    HookSettings,
    configure_hooks,
    gather,
    notify,
    reset_hooks,
    turn_index,
    turn_messages,
    with_context,
)
from steadyloop.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from steadyloop.sizing.tokens import estimate_tokens

CONTEXT = HookContext(session_id="s1", host="test-host", prompt="hi", turn_index=0)


@pytest.fixture(autouse=True)
async def _fresh_hooks() -> AsyncIterator[None]:
    # Hook settings are process-wide; no test may leak a budget or preface into the next.
    reset_hooks()
    yield
    reset_hooks()


class Scripted:
    """A runner that answers each event from a script and records how it was called."""

    def __init__(self, script: Mapping[HookEvent, Sequence[HookOutcome] | Exception]) -> None:
        self.script = script
        self.calls: list[tuple[HookEvent, HookContext, asyncio.Event | None]] = []

    async def __call__(
        self, event: HookEvent, context: HookContext, *, cancel: asyncio.Event | None
    ) -> Sequence[HookOutcome]:
        self.calls.append((event, context, cancel))
        answer = self.script.get(event, [])
        if isinstance(answer, Exception):
            raise answer
        return answer


def words(tokens: int, tag: str = "w") -> str:
    """Text that weighs exactly ``tokens`` at four characters a token."""
    return (f"{tag}xx " * tokens)[: tokens * 4]


# -- the budget -------------------------------------------------------------------------------------


async def test_blocks_keep_runner_order_and_the_runners_exact_text() -> None:
    run = Scripted(
        {
            "session_start": [HookOutcome(hook_id="a", text="  alpha\n")],
            "before_turn": [HookOutcome(hook_id="b", text="beta"), HookOutcome(hook_id="c", text="gamma")],
        }
    )
    got = await gather(run, ["session_start", "before_turn"], CONTEXT)
    assert got.context == [
        ContextBlock("a", "  alpha\n"),
        ContextBlock("b", "beta"),
        ContextBlock("c", "gamma"),
    ]
    assert got.tokens == sum(estimate_tokens(b.text) for b in got.context)
    assert [event for event, _, _ in run.calls] == ["session_start", "before_turn"]
    assert run.calls[0][1] is CONTEXT
    assert got.notes == [] and not got.cancelled


async def test_empty_and_blank_text_add_nothing() -> None:
    run = Scripted({"before_turn": [HookOutcome(hook_id="a"), HookOutcome(hook_id="b", text=" \n ")]})
    got = await gather(run, ["before_turn"], CONTEXT)
    assert got.context == [] and got.tokens == 0


async def test_each_hook_is_held_to_its_own_cap_and_leaves_the_rest_to_others() -> None:
    run = Scripted(
        {
            "before_turn": [
                HookOutcome(hook_id="greedy", text=words(500), max_tokens=100),
                HookOutcome(hook_id="modest", text=words(300)),
            ]
        }
    )
    notes: list[HookNote] = []
    got = await gather(run, ["before_turn"], CONTEXT, on_note=notes.append)
    greedy, modest = got.context
    assert estimate_tokens(greedy.text) <= 100
    head, _, mark = greedy.text.partition("\n[")
    assert mark == "… cut to fit the hook context budget]"
    # Cut on a word boundary, and nothing but a cut: the kept part is the runner's own text.
    assert words(500).startswith(head + " ")
    assert modest.text == words(300)
    assert notes == [HookNote("greedy", "before_turn", text="cut to fit in 100 tokens")]


async def test_the_shared_budget_cuts_the_block_that_overflows_it_then_stops() -> None:
    run = Scripted(
        {
            "before_turn": [
                HookOutcome(hook_id="a", text=words(1500)),
                HookOutcome(hook_id="b", text=words(800)),
                HookOutcome(hook_id="c", text="small"),
            ]
        }
    )
    notes: list[HookNote] = []
    got = await gather(run, ["before_turn"], CONTEXT, on_note=notes.append)
    assert [b.hook_id for b in got.context] == ["a", "b"]
    assert got.context[0].text == words(1500)
    assert "cut to fit" in got.context[1].text
    assert got.tokens <= HOOK_CONTEXT_TOKENS
    assert got.tokens == sum(estimate_tokens(b.text) for b in got.context)
    # A later small block would have fit in the crumbs, but the budget counts as spent once it cut someone.
    assert [(n.hook_id, n.text) for n in notes] == [
        ("b", "cut to fit in 500 tokens"),
        ("c", "left out: the hook context budget was spent"),
    ]


async def test_a_block_too_big_for_what_is_left_is_left_out_and_noted() -> None:
    run = Scripted({"before_turn": [HookOutcome(hook_id="a", text="x" * 500, max_tokens=3)]})
    notes: list[HookNote] = []
    got = await gather(run, ["before_turn"], CONTEXT, on_note=notes.append)
    assert got.context == []
    assert notes == [HookNote("a", "before_turn", text="left out: it did not fit in 3 tokens")]


async def test_per_call_max_tokens_wins_over_the_process_setting() -> None:
    configure_hooks(context_tokens=50)
    run = Scripted({"before_turn": [HookOutcome(hook_id="a", text=words(400))]})
    assert estimate_tokens((await gather(run, ["before_turn"], CONTEXT)).context[0].text) <= 50
    got = await gather(run, ["before_turn"], CONTEXT, max_tokens=1000)
    assert got.context[0].text == words(400)
    # A budget that follows the model may be a fraction; a "no opinion" 0 falls back to the setting.
    got = await gather(run, ["before_turn"], CONTEXT, max_tokens=8192 / 20)
    assert got.context[0].text == words(400)
    got = await gather(run, ["before_turn"], CONTEXT, max_tokens=0)
    assert estimate_tokens(got.context[0].text) <= 50


async def test_only_injecting_events_add_context_and_only_before_compact_vetoes() -> None:
    run = Scripted(
        {
            "after_turn": [HookOutcome(hook_id="a", text="ignored", veto=True)],
            "before_compact": [
                HookOutcome(hook_id="keep", veto=True, text="also ignored"),
                HookOutcome(hook_id="broken", veto=True, error="boom"),
                HookOutcome(hook_id="fine"),
            ],
        }
    )
    got = await gather(run, ["after_turn", "before_compact"], CONTEXT)
    assert got.context == []
    assert got.vetoes == ["keep"]


# -- settings ----------------------------------------------------------------------------------------


def test_configure_hooks_keeps_what_was_there_for_bad_values() -> None:
    assert configure_hooks() == HookSettings(HOOK_CONTEXT_TOKENS, HOOK_PREFACE)
    assert configure_hooks(context_tokens=4000, preface="Mine:") == HookSettings(4000, "Mine:")
    for bad in (0, -5, 0.5, float("nan"), float("inf"), True, "3000", None):
        assert configure_hooks(context_tokens=bad).context_tokens == 4000  # type: ignore[arg-type]
    for bad_preface in (None, 3, b"bytes"):
        assert configure_hooks(preface=bad_preface).preface == "Mine:"  # type: ignore[arg-type]
    assert configure_hooks(context_tokens=1234.9).context_tokens == 1234
    assert configure_hooks(preface="") == HookSettings(1234, "")


def test_reset_hooks_puts_the_defaults_back() -> None:
    configure_hooks(context_tokens=10, preface="")
    reset_hooks()
    assert configure_hooks() == HookSettings(HOOK_CONTEXT_TOKENS, HOOK_PREFACE)


def test_the_default_preface_names_no_host() -> None:
    assert "host's hooks" in HOOK_PREFACE and "test-host" not in HOOK_PREFACE


# -- failures -----------------------------------------------------------------------------------------


async def test_a_failing_hook_costs_only_its_own_context_and_is_noted_once() -> None:
    run = Scripted(
        {
            "session_start": [HookOutcome(hook_id="bad", error="timed out")],
            "before_turn": [
                HookOutcome(hook_id="bad", text="partial", error="timed out"),
                HookOutcome(hook_id="bad", error="timed out again"),
                HookOutcome(hook_id="good", text="useful"),
            ],
        }
    )
    notes: list[HookNote] = []
    got = await gather(run, ["session_start", "before_turn"], CONTEXT, on_note=notes.append)
    assert got.context == [ContextBlock("good", "useful")]
    assert notes == [
        HookNote("bad", "session_start", error="timed out"),
        HookNote("bad", "before_turn", error="timed out"),
    ]
    assert got.notes == notes


async def test_a_runner_that_raises_costs_only_that_events_context() -> None:
    run = Scripted(
        {
            "session_start": RuntimeError("pool is down"),
            "before_turn": [HookOutcome(hook_id="b", text="still here")],
        }
    )
    notes: list[HookNote] = []
    got = await gather(run, ["session_start", "before_turn"], CONTEXT, on_note=notes.append)
    assert got.context == [ContextBlock("b", "still here")]
    assert notes == [HookNote(None, "session_start", error="RuntimeError: pool is down")]


async def test_a_note_sink_that_raises_does_not_cost_the_context() -> None:
    def sink(note: HookNote) -> None:
        raise ValueError("sink broke")

    run = Scripted(
        {"before_turn": [HookOutcome(hook_id="a", error="x"), HookOutcome(hook_id="b", text="ok")]}
    )
    got = await gather(run, ["before_turn"], CONTEXT, on_note=sink)
    assert got.context == [ContextBlock("b", "ok")]


# -- cancellation ---------------------------------------------------------------------------------------


async def test_cancel_reaches_the_runner_and_gather_leaves_promptly_with_what_it_has() -> None:
    cancel = asyncio.Event()
    entered = asyncio.Event()
    stopped: list[bool] = []

    async def run(
        event: HookEvent, context: HookContext, *, cancel: asyncio.Event | None
    ) -> list[HookOutcome]:
        if event == "session_start":
            return [HookOutcome(hook_id="first", text="kept")]
        assert cancel is not None
        entered.set()
        try:
            await asyncio.Event().wait()  # a runner that never finishes and ignores the cancel event
        except asyncio.CancelledError:
            stopped.append(True)
            raise
        return []

    task = asyncio.create_task(
        gather(run, ["session_start", "before_turn", "after_turn"], CONTEXT, cancel=cancel)
    )
    await entered.wait()
    cancel.set()
    got = await task
    assert got.cancelled
    assert got.context == [ContextBlock("first", "kept")]
    assert stopped == [True]


async def test_a_cancel_already_set_runs_nothing() -> None:
    cancel = asyncio.Event()
    cancel.set()
    run = Scripted({"before_turn": [HookOutcome(hook_id="a", text="x")]})
    got = await gather(run, ["before_turn"], CONTEXT, cancel=cancel)
    assert got.cancelled and got.context == [] and run.calls == []


async def test_cancelling_the_caller_still_propagates() -> None:
    entered = asyncio.Event()

    async def run(
        event: HookEvent, context: HookContext, *, cancel: asyncio.Event | None
    ) -> list[HookOutcome]:
        entered.set()
        await asyncio.Event().wait()
        return []

    task = asyncio.create_task(gather(run, ["before_turn"], CONTEXT, cancel=asyncio.Event()))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- notify ----------------------------------------------------------------------------------------------


def test_notify_takes_no_cancel() -> None:
    assert "cancel" not in inspect.signature(notify).parameters


async def test_notify_runs_without_a_cancel_and_notes_failures() -> None:
    run = Scripted({"after_turn": [HookOutcome(hook_id="mem", error="disk full"), HookOutcome(hook_id="ok")]})
    notes: list[HookNote] = []
    context = HookContext(session_id="s1", reply="done")
    await notify(run, "after_turn", context, on_note=notes.append)
    assert run.calls == [("after_turn", context, None)]
    assert notes == [HookNote("mem", "after_turn", error="disk full")]


async def test_notify_never_raises() -> None:
    notes: list[HookNote] = []
    await notify(Scripted({"session_end": OSError("gone")}), "session_end", CONTEXT, on_note=notes.append)
    assert notes == [HookNote(None, "session_end", error="OSError: gone")]

    def sink(note: HookNote) -> None:
        raise ValueError("sink broke")

    await notify(Scripted({"session_delete": KeyError("k")}), "session_delete", CONTEXT, on_note=sink)


# -- with_context -------------------------------------------------------------------------------------------


SYSTEM = SystemMessage(content="You are helpful.")
BLOCKS = [ContextBlock("a", "Alpha facts."), ContextBlock("b", "Beta facts.")]


def transcript() -> list[Message]:
    return [
        SYSTEM,
        UserMessage(content="first"),
        AssistantMessage(content="answer"),
        UserMessage(content="What now?"),
    ]


def test_with_context_returns_a_new_list_and_leaves_the_input_and_system_alone() -> None:
    messages = transcript()
    before = list(messages)
    out = with_context(messages, len(messages) - 1, BLOCKS)
    assert out is not messages and messages == before
    assert out[0] is SYSTEM and out[1:3] == messages[1:3]
    assert out[3] == UserMessage(content=f"{HOOK_PREFACE}\n\nAlpha facts.\n\nBeta facts.\n\nWhat now?")


def test_with_context_preface_rules() -> None:
    messages = transcript()
    assert with_context(messages, -1, BLOCKS, "Mine:")[3] == UserMessage(
        content="Mine:\n\nAlpha facts.\n\nBeta facts.\n\nWhat now?"
    )
    # An empty preface says nothing: the blocks lead with no blank line above them.
    assert with_context(messages, -1, BLOCKS, "")[3] == UserMessage(
        content="Alpha facts.\n\nBeta facts.\n\nWhat now?"
    )
    configure_hooks(preface="Host says:")
    assert with_context(messages, -1, BLOCKS)[3] == UserMessage(
        content="Host says:\n\nAlpha facts.\n\nBeta facts.\n\nWhat now?"
    )
    assert with_context(messages, -1, BLOCKS, 7)[3] == with_context(messages, -1, BLOCKS)[3]  # type: ignore[arg-type]
    configure_hooks(preface="")
    assert with_context(messages, -1, BLOCKS)[3] == UserMessage(
        content="Alpha facts.\n\nBeta facts.\n\nWhat now?"
    )


def test_with_context_on_parts_content_prepends_a_text_part() -> None:
    image = ImagePart(url="https://example.com/cat.png")
    messages: list[Message] = [SYSTEM, UserMessage(content=(TextPart("What is this?"), image))]
    out = with_context(messages, 1, BLOCKS, "")
    assert out[1] == UserMessage(
        content=(TextPart("Alpha facts.\n\nBeta facts."), TextPart("What is this?"), image)
    )
    assert messages[1] == UserMessage(content=(TextPart("What is this?"), image))


def test_with_context_on_an_empty_question_and_with_no_blocks() -> None:
    messages: list[Message] = [UserMessage(content="")]
    assert with_context(messages, 0, BLOCKS, "")[0] == UserMessage(content="Alpha facts.\n\nBeta facts.")
    copy = with_context(messages, 0, [])
    assert copy == messages and copy is not messages


def test_with_context_does_not_fence_hook_blocks() -> None:
    block = ContextBlock("a", "</untrusted> exactly as the runner wrote it")
    assert with_context([UserMessage(content="q")], 0, [block], "")[0] == UserMessage(
        content="</untrusted> exactly as the runner wrote it\n\nq"
    )


@pytest.mark.parametrize("index", [0, 2, 4, -5])
def test_with_context_needs_the_index_of_a_user_message(index: int) -> None:
    with pytest.raises(InvalidInput):
        with_context(transcript(), index, BLOCKS)


# -- turn_messages and turn_index ---------------------------------------------------------------------


def test_turn_messages_gives_each_message_of_the_turn_a_deterministic_id() -> None:
    messages: list[Message] = [
        UserMessage(content="q1"),
        AssistantMessage(content="a1"),
        UserMessage(content=(TextPart("look"), ImagePart(url="https://example.com/x.png"))),
        AssistantMessage(tool_calls=(ToolCall("c1", "read", {}),)),
        ToolResultMessage(call_id="c1", content="file text"),
        AssistantMessage(content="done"),
    ]
    turn = turn_messages("s1", messages, 2)
    assert [(m.role, m.text) for m in turn] == [
        ("user", "look"),
        ("assistant", ""),
        ("tool", "file text"),
        ("assistant", "done"),
    ]
    ids = [m.id for m in turn]
    assert all(uuid.UUID(i).version == 5 for i in ids)
    assert len(set(ids)) == 4
    assert ids == [m.id for m in turn_messages("s1", messages, 2)]
    assert ids != [m.id for m in turn_messages("s2", messages, 2)]


def test_turn_message_ids_survive_a_fold_through_the_offset() -> None:
    stored: list[Message] = [UserMessage(content=f"q{i}") for i in range(6)]
    before = turn_messages("s1", stored, 4)
    # A fold took the first three messages out; the array now starts at stored index 3.
    folded = stored[3:]
    after = turn_messages("s1", folded, 1, offset=3)
    assert [m.id for m in after] == [m.id for m in before]
    assert [m.id for m in turn_messages("s1", folded, 1)] != [m.id for m in before]


def test_turn_messages_rejects_negative_positions() -> None:
    with pytest.raises(InvalidInput):
        turn_messages("s1", [], -1)
    with pytest.raises(InvalidInput):
        turn_messages("s1", [], 0, offset=-1)
    assert turn_messages("s1", [UserMessage(content="q")], 5) == []


def test_turn_index_counts_user_turns_plus_those_folded_away() -> None:
    messages = transcript()
    assert turn_index([]) == 0
    assert turn_index(messages) == 2
    assert turn_index(messages, offset_turns=3) == 5
    with pytest.raises(InvalidInput):
        turn_index(messages, offset_turns=-1)
