"""Making a fold: the summary and its fallback, hooks and vetoes, append-only round trips, memory flush."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from steadyloop.context.compaction import (
    CompactionPlan,
    Fold,
    apply_compaction,
    plan_compaction,
    request_index,
    summary_message,
)
from steadyloop.context.folding import (
    MEMORY_FLUSH_PROMPT,
    SUMMARY_PROMPT,
    CompactionInfo,
    HookVerdict,
    compact_transcript,
    memory_flush,
    run_compaction,
    summariser,
)
from steadyloop.context.integrity import check_transcript
from steadyloop.events import Event, Notice
from steadyloop.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from steadyloop.testing.chunks import text_chunks
from steadyloop.testing.replies import Reply
from steadyloop.testing.server import ScriptedServer
from steadyloop.tools.definition import Tool, ToolContext
from steadyloop.wire.endpoints import Endpoint


def _chat(exchanges: int, first: int = 0) -> list[Message]:
    out: list[Message] = [SystemMessage(content="sys")]
    for n in range(first, first + exchanges):
        out.append(UserMessage(content=f"question {n} " + "u" * 300))
        out.append(AssistantMessage(tool_calls=(ToolCall(f"c{n}", "read_file", {"path": f"src/f{n}.py"}),)))
        out.append(ToolResultMessage(call_id=f"c{n}", content="r" * 300, name="read_file"))
        out.append(AssistantMessage(content=f"answer {n}"))
    return out


def _plan(messages: Sequence[Message], limit: int = 1_000, **kwargs: object) -> CompactionPlan:
    plan = plan_compaction(messages, limit=limit, used=limit, **kwargs)  # type: ignore[arg-type]
    assert plan is not None and plan.foldable
    return plan


class Recorder:
    """A summariser that answers from a script and keeps what it was sent."""

    def __init__(self, *answers: str | Exception | None) -> None:
        self.answers = list(answers)
        self.sent: list[str] = []

    async def __call__(self, text: str) -> str | None:
        self.sent.append(text)
        answer = self.answers.pop(0) if self.answers else "notes"
        if isinstance(answer, Exception):
            raise answer
        return answer


class Hooks:
    """A hook runner that records what it was told and answers a fixed verdict."""

    def __init__(self, verdict: HookVerdict | Exception | None = None) -> None:
        self.verdict = verdict if verdict is not None else HookVerdict()
        self.told: list[CompactionInfo] = []

    async def before_compact(self, info: CompactionInfo) -> HookVerdict:
        self.told.append(info)
        if isinstance(self.verdict, Exception):
            raise self.verdict
        return self.verdict


# -- the summary -----------------------------------------------------------------------------------


async def test_the_summariser_is_sent_the_folded_stretch_and_its_answer_becomes_the_fold() -> None:
    messages = _chat(8)
    plan = _plan(messages)
    summarise = Recorder("  the notes  ")
    fold = await run_compaction(messages, plan, summarise)
    assert fold is not None
    assert (fold.summary, fold.through, fold.folded, fold.head, fold.summarised) == (
        "the notes",
        plan.through,
        plan.folded,
        1,
        True,
    )
    assert fold.at > 0
    (sent,) = summarise.sent
    assert "question 0" in sent and "[called: read_file" in sent
    assert f"question {plan.through // 4}" not in sent  # the kept tail is not summarised
    assert "Earlier notes" not in sent


async def test_an_earlier_summary_is_sent_to_be_continued() -> None:
    messages = [SystemMessage(content="sys"), summary_message("old notes"), *_chat(8)[1:]]
    summarise = Recorder()
    await run_compaction(messages, _plan(messages), summarise)
    assert summarise.sent[0].startswith("Earlier notes, to continue:\n\nold notes\n\nConversation since")


async def test_a_failed_summary_says_how_many_messages_were_dropped() -> None:
    messages = _chat(8)
    plan = _plan(messages)
    notes: list[str] = []
    for answer in (None, "   ", RuntimeError("boom")):
        fold = await run_compaction(messages, plan, Recorder(answer), on_note=notes.append)
        assert fold is not None and not fold.summarised
        assert fold.summary == (
            f"[summary unavailable: {plan.folded} messages were removed to free context space]"
        )
    assert any("boom" in note for note in notes)


async def test_a_failed_summary_keeps_the_earlier_notes() -> None:
    messages = _chat(8)
    plan = _plan(messages, from_=0, previous="old notes")
    fold = await run_compaction(messages, plan, Recorder(None))
    assert fold is not None
    assert fold.summary.startswith("old notes\n\n[summary unavailable: ")


async def test_a_plan_that_folds_nothing_keeps_the_transcript() -> None:
    messages: list[Message] = [UserMessage(content="one question"), AssistantMessage(content="x" * 9_000)]
    plan = plan_compaction(messages, limit=100, used=100)
    assert plan is not None and not plan.foldable
    notes: list[str] = []
    summarise = Recorder()
    assert await run_compaction(messages, plan, summarise, on_note=notes.append) is None
    assert summarise.sent == [] and notes
    assert await compact_transcript(messages, plan, summarise) == messages


# -- hooks -----------------------------------------------------------------------------------------


async def test_hooks_are_told_what_is_going() -> None:
    messages = _chat(8)
    plan = _plan(messages)
    hooks = Hooks()
    await run_compaction(messages, plan, Recorder(), hooks=hooks)
    assert hooks.told == [
        CompactionInfo(
            start=plan.start,
            through=plan.through,
            count=plan.folded,
            tokens_before=plan.tokens_before,
            tokens_kept=plan.tokens_kept,
        )
    ]


async def test_an_honoured_veto_keeps_the_transcript_and_names_the_hook() -> None:
    messages = _chat(8)
    plan = _plan(messages)
    notes: list[str] = []
    summarise = Recorder()
    hooks = Hooks(HookVerdict(veto=True, hook="keep-history"))
    fold = await run_compaction(
        messages, plan, summarise, hooks=hooks, honour_veto=True, on_note=notes.append
    )
    assert fold is None
    assert summarise.sent == []  # the summary waited on the hooks, and was never asked for
    assert any("keep-history" in note for note in notes)
    kept = await compact_transcript(messages, plan, summarise, hooks=hooks, honour_veto=True)
    assert kept == messages and kept is not messages


async def test_a_veto_nobody_honours_changes_nothing() -> None:
    messages = _chat(8)
    hooks = Hooks(HookVerdict(veto=True, hook="keep-history"))
    fold = await run_compaction(messages, _plan(messages), Recorder(), hooks=hooks)
    assert fold is not None and fold.summary == "notes"
    assert len(hooks.told) == 1


async def test_a_forced_fold_goes_ahead_whatever_the_hooks_say() -> None:
    messages = _chat(8)
    notes: list[str] = []
    hooks = Hooks(HookVerdict(veto=True, hook="keep-history"))
    fold = await run_compaction(
        messages,
        _plan(messages),
        Recorder(),
        hooks=hooks,
        honour_veto=True,
        forced=True,
        on_note=notes.append,
    )
    assert fold is not None and fold.summary == "notes"
    assert hooks.told[0].forced
    assert any("keep-history" in note and "anyway" in note for note in notes)


async def test_a_failed_hook_vetoes_nothing() -> None:
    messages = _chat(8)
    notes: list[str] = []
    hooks = Hooks(RuntimeError("hook broke"))
    fold = await run_compaction(
        messages, _plan(messages), Recorder(), hooks=hooks, honour_veto=True, on_note=notes.append
    )
    assert fold is not None
    assert any("hook broke" in note for note in notes)


async def test_without_honour_veto_the_hooks_run_beside_the_summary() -> None:
    messages = _chat(8)
    summary_started = asyncio.Event()

    class Slow:
        async def before_compact(self, info: CompactionInfo) -> HookVerdict:
            await summary_started.wait()  # would never return were the summary waiting on this hook
            return HookVerdict(veto=True, hook="slow")

    async def summarise(text: str) -> str:
        summary_started.set()
        return "notes"

    async with asyncio.timeout(10):
        fold = await run_compaction(messages, _plan(messages), summarise, hooks=Slow())
    assert fold is not None


async def test_with_honour_veto_the_summary_waits_for_the_hooks() -> None:
    messages = _chat(8)
    order: list[str] = []

    class First:
        async def before_compact(self, info: CompactionInfo) -> HookVerdict:
            await asyncio.sleep(0)  # yield, so a summary running beside it would get in first
            order.append("hook")
            return HookVerdict()

    async def summarise(text: str) -> str:
        order.append("summary")
        return "notes"

    await run_compaction(messages, _plan(messages), summarise, hooks=First(), honour_veto=True)
    assert order == ["hook", "summary"]


# -- round trips -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(exchanges=st.integers(2, 12), limit=st.integers(300, 4_000), with_summary=st.booleans())
def test_run_then_apply_is_compact_transcript(exchanges: int, limit: int, with_summary: bool) -> None:
    messages = _chat(exchanges)
    if with_summary:
        messages.insert(1, summary_message("old notes"))
    plan = plan_compaction(messages, limit=limit, used=limit)
    assert plan is not None

    async def both() -> tuple[list[Message], list[Message]]:
        fold = await run_compaction(messages, plan, Recorder("notes"))
        return apply_compaction(messages, fold), await compact_transcript(messages, plan, Recorder("notes"))

    stored, rewritten = asyncio.run(both())
    assert stored == rewritten
    assert check_transcript(rewritten) == rewritten


async def test_append_only_folds_continue_and_map_indexes() -> None:
    stored = _chat(8)[1:]  # the host keeps its system prompt apart
    system = SystemMessage(content="sys")
    summarise = Recorder("first notes", "second notes")

    first_plan = _plan(stored)
    first = await run_compaction(stored, first_plan, summarise)
    assert first is not None and first.head == 0
    stored += _chat(8, first=8)[1:]  # the run goes on; nothing stored is rewritten
    second_plan = _plan(stored, from_=first.through, previous=first.summary)
    assert second_plan.start == first.through
    second = await run_compaction(stored, second_plan, summarise)
    assert second is not None
    assert summarise.sent[1].startswith("Earlier notes, to continue:\n\nfirst notes")
    assert f"question {first.through // 4 - 1} " not in summarise.sent[1]  # folded once, not twice

    request = [system, *apply_compaction(stored, second)]
    assert request[1] == summary_message("second notes")
    assert check_transcript(request) == request
    for index, message in enumerate(stored):
        mapped = request_index(index, second)
        if index < second.through:
            assert mapped is None
        else:
            assert mapped is not None and request[mapped + 1] is message

    # An array host reaching the same point reads its summary back out of the array instead.
    array = apply_compaction(stored, first)
    assert _plan(array).previous == "first notes"


def test_a_fold_from_a_plan_made_before_pruning_still_applies() -> None:
    from steadyloop.context.pruning import prune_tool_results

    messages = _chat(8)
    plan = _plan(messages)
    pruned = prune_tool_results(messages, keep_last=1, max_chars=10)
    fold = Fold(summary="n", through=plan.through, at=0.0, folded=plan.folded, head=plan.head)
    assert apply_compaction(pruned, fold)[2:] == pruned[plan.through :]
    assert check_transcript(apply_compaction(pruned, fold))


# -- the summariser side task ----------------------------------------------------------------------


async def test_the_summariser_asks_with_the_summary_prompt() -> None:
    async with ScriptedServer(Reply.stream(text_chunks("the notes"))) as server:
        summarise = summariser(Endpoint(server.base_url), "m", max_tokens=300)
        assert await summarise("[user]\nhello") == "the notes"
    body = server.chat_requests[0].json
    assert body["messages"][0] == {"role": "system", "content": SUMMARY_PROMPT}
    assert body["messages"][1]["content"] == "[user]\nhello"
    assert body["max_tokens"] == 300


async def test_the_summariser_never_raises() -> None:
    events: list[Event] = []
    refused = Reply.json({"error": {"message": "bad request"}}, status=400)
    async with ScriptedServer(refused) as server:
        summarise = summariser(Endpoint(server.base_url), "m", on_event=events.append)
        assert await summarise("text") is None
    assert any(isinstance(e, Notice) for e in events)


# -- the memory flush ------------------------------------------------------------------------------


async def _noop(arguments: dict[str, object], context: ToolContext) -> str:
    return "ok"


MEMORY = Tool(name="memory_update", description="save a note", parameters={"type": "object"}, execute=_noop)


def _calls(n: int) -> list[Message]:
    return [
        AssistantMessage(tool_calls=(ToolCall(f"m{n}", "memory_update", {}),)),
        ToolResultMessage(call_id=f"m{n}", content="saved"),
    ]


async def test_the_memory_flush_offers_only_memory_tools_and_stops_when_the_model_does() -> None:
    messages = _chat(2)
    seen: list[tuple[list[Message], list[str]]] = []
    replies: list[list[Message]] = [_calls(0), [AssistantMessage(content="done")], _calls(9)]

    async def run(transcript: list[Message], tools: Sequence[Tool]) -> list[Message]:
        seen.append((transcript, [t.name for t in tools]))
        return replies.pop(0)

    await memory_flush(messages, [MEMORY], run)
    assert len(seen) == 2
    first, names = seen[0]
    assert names == ["memory_update"]
    assert first == [*messages, UserMessage(content=MEMORY_FLUSH_PROMPT)]
    assert seen[1][0] == [*first, *_calls(0)]
    assert messages == _chat(2)  # silent: the transcript itself is untouched


async def test_the_memory_flush_runs_at_most_max_turns() -> None:
    count = 0

    async def run(transcript: list[Message], tools: Sequence[Tool]) -> list[Message]:
        nonlocal count
        count += 1
        return _calls(count)

    await memory_flush(_chat(1), [MEMORY], run, max_turns=3)
    assert count == 3


async def test_the_memory_flush_never_fails_the_run() -> None:
    notes: list[str] = []

    async def run(transcript: list[Message], tools: Sequence[Tool]) -> list[Message]:
        raise RuntimeError("model went away")

    await memory_flush(_chat(1), [MEMORY], run, on_note=notes.append)
    assert any("model went away" in note for note in notes)
    await memory_flush(_chat(1), [], run, on_note=notes.append)
    assert "no memory tools" in notes[-1]
