"""Keeping a conversation inside its window, as the loop uses it: prune and fold together, rarely, once.

Every rewrite of the transcript's prefix throws the prompt cache away, so nothing here runs until the plan
says the window is filling (three quarters), and then pruning and folding happen in the same step, so the
cache is lost once rather than a little on every turn. A request the window refused anyway is recovered by
pruning, then folding with the hooks' vetoes overruled, and sending once more.

What a fold decided is kept in a ``ContextState``, beside the transcript rather than in it: the summary,
the first message kept after it, and which tool results are sent as stubs. Every later request is built
from the whole transcript through that state, byte for byte the same until the window fills again, and
the next fold continues the summary instead of writing a new one over what the first already folded. The
loop keeps one state per run; an ``Agent`` keeps one for its whole conversation, and a session stores it,
so a long conversation pays one summary request per fold, however many prompts it spans.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import ContextCompacted, ContextPruned, Event, Notice
from ..messages import (
    ImagePart,
    Message,
    ToolResultMessage,
    UserMessage,
    message_from_json,
    message_to_json,
    text_of,
)
from ..tools.definition import Tool
from .compaction import (
    CompactionPlan,
    Fold,
    SummaryPlacement,
    fold_from_json,
    fold_to_json,
    plan_compaction,
    summary_message,
    summary_on_question,
    transcript_tokens,
)
from .folding import CompactionHooks, Summarise, run_compaction
from .pruning import IMAGE_CHARS, prune_stats, prune_tool_results, pruned_stub
from .room import CUT_FLOOR, cut_middle, fit_sizes

__all__ = ["ContextKeeper", "ContextPolicy", "ContextState"]


@dataclass(frozen=True, slots=True)
class ContextPolicy:
    """How a run keeps inside its window.

    Attributes:
        keep_last: tool results kept whole when pruning; older long ones become stubs.
        max_chars: a tool result longer than this is pruned.
        summarise: writes the summary of a folded stretch; default: the run's own model with our prompt.
        hooks: ``before_compact`` hooks told what is about to go.
        honour_veto: wait for the hooks and let any veto keep the transcript (an overflow overrules it).
        memory_tools: offered, alone, in one silent turn before a planned fold, so the model can save what
            matters first (best effort; never before a fold forced by an overflow, which has no room).
        placement: where the summary goes in each request: ``"user"`` (the default) at the start of the
            first kept user message, so the request keeps one leading system prompt, which is all many chat
            templates accept; ``"system"`` as a second system message.
    """

    keep_last: int = 5
    max_chars: int = 256
    summarise: Summarise | None = None
    hooks: CompactionHooks | None = None
    honour_veto: bool = False
    memory_tools: Sequence[Tool] = ()
    placement: SummaryPlacement = "user"


class ContextState:
    """What keeping a conversation inside its window remembers between requests (and runs, and restarts).

    Attributes:
        fold: the fold in force, ``None`` before the first.
        anchor: the first message kept after the summary, found in the transcript by identity.
        pruned: call ids whose results are sent as stubs.
        cut: call ids whose results are sent cut to so many characters, head and tail kept
            (``ContextKeeper.fit``).
        limit: the window an endpoint's refusal named, when smaller than the one configured.
        reported: the last request's prompt tokens, its reply's, and the transcript's length after it.
        version: increases whenever something a store should keep changes.
    """

    __slots__ = ("_at", "_cuts", "_stubs", "anchor", "cut", "fold", "limit", "pruned", "reported", "version")

    def __init__(self) -> None:
        self.fold: Fold | None = None
        self.anchor: Message | None = None
        self.pruned: frozenset[str] = frozenset()
        self.cut: Mapping[str, int] = {}
        self.limit: int | None = None
        self.reported: tuple[int, int, int] | None = None
        self.version = 0
        self._at = 0  # where the anchor was last found: usually where it is now
        self._stubs: dict[str, ToolResultMessage] = {}
        # A cut result, with the message it was cut from and to what length: the same list every request.
        self._cuts: dict[str, tuple[ToolResultMessage, int, ToolResultMessage]] = {}

    def clear(self) -> None:
        """Forget everything (a new conversation)."""
        self.__init__()  # type: ignore[misc]

    def locate(self, messages: Sequence[object]) -> int | None:
        """The anchor's index in ``messages``, or ``None`` when there is no fold or the anchor is gone.

        Found by identity; failing that, an equal message where it was last found counts (a
        ``transform_context`` that copies messages keeps their places).
        """
        anchor = self.anchor
        if anchor is None:
            return None
        at = self._at
        if at < len(messages) and messages[at] is anchor:
            return at
        for index, message in enumerate(messages):
            if message is anchor:
                self._at = index
                return index
        if at < len(messages) and messages[at] == anchor:
            return at
        return None

    def stubbed(self, messages: list[Message]) -> list[Message]:
        """``messages`` with the pruned results as their stubs and the cut ones cut (the same list when
        none are)."""
        if not self.pruned and not self.cut:
            return messages
        out = list(messages)
        for index, message in enumerate(out):
            if not isinstance(message, ToolResultMessage):
                continue
            if message.call_id in self.pruned:
                stub = self._stubs.get(message.call_id)
                if stub is None or stub.content == message.content:
                    stub = self._stubs[message.call_id] = _stub_of(message)
                out[index] = stub
            elif message.call_id in self.cut:
                out[index] = self._cut_of(message, self.cut[message.call_id])
        return out

    def _cut_of(self, message: ToolResultMessage, chars: int) -> ToolResultMessage:
        kept = self._cuts.get(message.call_id)
        if kept is not None and kept[0] is message and kept[1] == chars:
            return kept[2]
        shortened = _cut_result(message, chars)
        self._cuts[message.call_id] = (message, chars, shortened)
        return shortened

    def folded(
        self, messages: list[Message], index: int | None, placement: SummaryPlacement
    ) -> list[Message]:
        """``messages`` as the fold sends them: the head, the summary, then everything from ``index``."""
        fold = self.fold
        if fold is None or index is None:
            return messages
        head = min(fold.head, index)
        first = messages[index] if index < len(messages) else None
        if placement == "user" and isinstance(first, UserMessage):
            return [*messages[:head], summary_on_question(fold.summary, first), *messages[index + 1 :]]
        lead: Message = summary_message(fold.summary)
        if placement == "user":  # no user message to ride on: the summary travels as one
            lead = UserMessage(content=summary_message(fold.summary).content)
        return [*messages[:head], lead, *messages[index:]]

    def changed(self) -> None:
        self.version += 1

    # -- storing ---------------------------------------------------------------------------------------

    def to_json(self, messages: Sequence[object]) -> str:
        """The state as JSON for a store, the anchor placed by its distance from the end of ``messages``."""
        index = self.locate(messages)
        data: dict[str, Any] = {
            "fold": json.loads(fold_to_json(self.fold)) if self.fold is not None else None,
            "anchor": json.loads(message_to_json(self.anchor)) if self.anchor is not None else None,
            "kept": len(messages) - index if index is not None else None,
            "pruned": sorted(self.pruned),
            "cut": dict(sorted(self.cut.items())),
            "limit": self.limit,
        }
        return json.dumps(data, separators=(",", ":"))

    def restore(self, text: str, messages: Sequence[Message], *, capped: bool = False) -> bool:
        """Take a stored state back over a loaded transcript; ``False`` when the fold had to be dropped.

        The anchor is found by value, where its stored distance from the end puts it (messages appended
        since the state was saved move it; then the latest equal message is taken). When the history was
        capped and the anchor is older than what was loaded, the summary is kept ahead of it all.

        Raises:
            InvalidInput: the text is not a stored state.
        """
        from ..errors import InvalidInput

        try:
            data = json.loads(text)
            if not isinstance(data, Mapping):
                raise ValueError("not an object")
            fold = fold_from_json(json.dumps(data["fold"])) if data.get("fold") is not None else None
            anchor = message_from_json(json.dumps(data["anchor"])) if data.get("anchor") is not None else None
            pruned = data.get("pruned") or []
            cut = data.get("cut") or {}
            if not isinstance(cut, Mapping):
                raise ValueError("cut is not an object")
            limit = data.get("limit")
            kept = data.get("kept")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise InvalidInput(f"not a stored context state: {exc}") from None
        self.clear()
        self.pruned = frozenset(str(p) for p in pruned if isinstance(p, str))
        self.cut = {
            key: value
            for key, value in cut.items()
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0
        }
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            self.limit = limit
        if fold is None or anchor is None:
            return fold is None
        found = _find(messages, anchor, kept if isinstance(kept, int) else None)
        if found is None and capped and messages:
            found = 0
        if found is None:
            return False
        self.fold = Fold(
            summary=fold.summary,
            through=found,
            at=fold.at,
            folded=fold.folded,
            summarised=fold.summarised,
            head=min(fold.head, found),
        )
        self.anchor = messages[found]
        self._at = found
        return True


def _find(messages: Sequence[Message], anchor: Message, kept: int | None) -> int | None:
    if kept is not None and 0 < kept <= len(messages) and messages[len(messages) - kept] == anchor:
        return len(messages) - kept
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] == anchor:
            return index
    return None


def _weight(message: ToolResultMessage) -> int:
    """A result's characters, an image weighed as ``IMAGE_CHARS``: what cutting it to text can free."""
    content = message.content
    if isinstance(content, str):
        return len(content)
    return len(text_of(content)) + IMAGE_CHARS * sum(isinstance(p, ImagePart) for p in content)


def _cut_result(message: ToolResultMessage, chars: int) -> ToolResultMessage:
    """The result cut to ``chars`` characters of text, head and tail kept; images go with the cut."""
    content = message.content
    text = text_of(content)
    images = 0 if isinstance(content, str) else sum(isinstance(p, ImagePart) for p in content)
    if images:
        gone = f"[{images} image{'s' if images != 1 else ''} cut to fit the context window]"
        text = f"{text}\n{gone}" if text else gone
    return ToolResultMessage(
        call_id=message.call_id,
        content=cut_middle(text, chars, why=" to fit the context window"),
        is_error=message.is_error,
        name=message.name,
        disposition=message.disposition,
    )


def _stub_of(message: ToolResultMessage) -> ToolResultMessage:
    pruned = prune_tool_results([message], keep_last=0, max_chars=0)[0]
    if isinstance(pruned, ToolResultMessage) and pruned is not message:
        return pruned
    return ToolResultMessage(
        call_id=message.call_id,
        content=pruned_stub(0),
        is_error=message.is_error,
        name=message.name,
        disposition=message.disposition,
    )


class ContextKeeper:
    """One run's context management over a ``ContextState``: the window, the summariser, its events."""

    def __init__(
        self,
        policy: ContextPolicy,
        *,
        limit: int,
        summarise: Summarise,
        emit: Callable[[Event], object],
        flush: Callable[[Sequence[Message]], Awaitable[None]] | None = None,
        state: ContextState | None = None,
    ) -> None:
        self.policy = policy
        self.state = state if state is not None else ContextState()
        self._limit = limit
        self._summarise = policy.summarise or summarise
        self._emit = emit
        self._flush = flush
        self.folds = 0

    @property
    def limit(self) -> int:
        """The window planned against: the configured one, or a smaller one an endpoint named."""
        learned = self.state.limit
        return min(self._limit, learned) if learned else self._limit

    def _note(self, step: int) -> Callable[[str], None]:
        def note(text: str) -> None:
            self._emit(Notice(text=text, name="compaction", step=step))

        return note

    def view(self, messages: list[Message], *, step: int) -> tuple[list[Message], int | None]:
        """The transcript with pruned results as stubs, and where the kept fold's tail starts in it.

        A fold whose first kept message is no longer in the transcript (it was replaced) is dropped.
        """
        state = self.state
        index = state.locate(messages)
        if state.fold is not None and index is None:
            state.fold, state.anchor = None, None
            state.changed()
            self._emit(
                Notice(
                    text="the transcript was rewritten under the kept fold; the fold is dropped",
                    name="compaction",
                    step=step,
                )
            )
        return state.stubbed(messages), index

    def sent(self, messages: list[Message], index: int | None) -> list[Message]:
        """The view as it is sent: the kept fold applied at ``index``."""
        return self.state.folded(messages, index, self.policy.placement)

    async def before_request(
        self,
        messages: list[Message],
        index: int | None,
        *,
        used: int,
        chars_per_token: float,
        step: int,
    ) -> bool:
        """Prune and fold when the request would fill three quarters of the window; whether anything changed.

        Args:
            messages: the view (stubs in place, no fold applied).
            index: where the kept fold's tail starts in it.
            used: what the request is expected to take.
        """
        fold = self.state.fold
        plan = plan_compaction(
            messages,
            limit=self.limit,
            used=used,
            chars_per_token=chars_per_token,
            from_=index if fold is not None else None,
            previous=fold.summary if fold is not None else None,
        )
        if plan is None:
            return False
        return await self._shrink(
            messages, index, plan, forced=False, chars_per_token=chars_per_token, step=step
        )

    async def recover(
        self,
        messages: list[Message],
        index: int | None,
        *,
        chars_per_token: float,
        step: int,
        limit: int | None = None,
    ) -> bool:
        """After the window refused a request: prune, then fold regardless of vetoes; whether anything changed.

        Args:
            limit: the window the endpoint said it has, when its refusal named one; it is smaller than
                the one we were told, and from now on it is the one planned against.
        """
        if limit and limit < self.limit:
            self.state.limit = limit
            self.state.changed()
        fold = self.state.fold
        plan = plan_compaction(
            messages,
            limit=self.limit,
            used=self.limit,
            chars_per_token=chars_per_token,
            from_=index if fold is not None else None,
            previous=fold.summary if fold is not None else None,
        )
        if plan is None:
            return False
        self._emit(
            Notice(text="the request did not fit the window; pruning and folding", name="overflow", step=step)
        )
        return await self._shrink(
            messages, index, plan, forced=True, chars_per_token=chars_per_token, step=step
        )

    def fit(
        self,
        messages: list[Message],
        index: int | None,
        *,
        over: int,
        chars_per_token: float,
        step: int,
    ) -> bool:
        """Cut tool results, the largest first, head and tail kept, to free ``over`` tokens; whether any
        was cut.

        What pruning and folding leave too big is most often one result the model has not read yet: a
        long file under a single question, which no fold can reach. Each cut result keeps a line saying
        how much went. A result is never cut below ``CUT_FLOOR`` characters, so a request of many small
        results may still not fit.

        Args:
            messages: the view (stubs and earlier cuts in place, no fold applied).
            index: where the kept fold's tail starts in it; results before it are folded away.
            over: the tokens to free.
        """
        state = self.state
        start = index if state.fold is not None and index is not None else 0
        found = [
            m for m in messages[start:] if isinstance(m, ToolResultMessage) and m.call_id not in state.pruned
        ]
        sizes = [_weight(m) for m in found]
        shed = math.ceil(max(over, 0) * chars_per_token)
        kept = fit_sizes(sizes, shed, floor=CUT_FLOOR)
        cut = {m.call_id: new for m, old, new in zip(found, sizes, kept, strict=True) if new < old}
        if not cut:
            return False
        state.cut = {**state.cut, **cut}
        state.reported = None  # what the server counted was for a request with the whole results
        state.changed()
        freed = sum(sizes) - sum(kept)
        names = sorted({m.name or "a tool" for m in found if m.call_id in cut})
        self._emit(
            Notice(
                text=f"cut {len(cut)} tool result{'s' if len(cut) != 1 else ''} ({', '.join(names)}) by "
                f"{freed:,} characters to fit the window; the head and tail of each are kept",
                name="compaction",
                step=step,
            )
        )
        return True

    async def _shrink(
        self,
        messages: list[Message],
        index: int | None,
        plan: CompactionPlan,
        *,
        forced: bool,
        chars_per_token: float,
        step: int,
    ) -> bool:
        state = self.state
        before = transcript_tokens(self.sent(messages, index), chars_per_token)
        pruned = prune_tool_results(
            messages, keep_last=self.policy.keep_last, max_chars=self.policy.max_chars
        )
        stats = prune_stats(messages, pruned)
        if stats.cleared:
            cleared = {
                new.call_id
                for old, new in zip(messages, pruned, strict=True)
                if old is not new and isinstance(new, ToolResultMessage)
            }
            state.pruned = state.pruned | cleared
            state.changed()
            self._emit(ContextPruned(cleared=stats.cleared, chars=stats.chars, step=step))
        if plan.foldable and not forced and self._flush is not None and self.policy.memory_tools:
            await self._flush(pruned)
        fold = (
            await run_compaction(
                pruned,
                plan,
                self._summarise,
                hooks=self.policy.hooks,
                honour_veto=self.policy.honour_veto,
                forced=forced,
                on_note=self._note(step),
            )
            if plan.foldable
            else None
        )
        state.reported = None  # what the server counted was for the request before this
        if fold is None:
            return stats.cleared > 0
        state.fold = fold
        state.anchor = messages[fold.through]
        state._at = fold.through
        state.changed()
        self.folds += 1
        after = transcript_tokens(self.sent(state.stubbed(messages), fold.through), chars_per_token)
        self._emit(
            ContextCompacted(
                folded=fold.folded,
                tokens_before=before,
                tokens_after=after,
                forced=forced,
                summarised=fold.summarised,
                step=step,
            )
        )
        self._emit(
            Notice(
                text=f"folded {fold.folded} messages into a summary ({before} -> {after} tokens)",
                name="compaction",
                step=step,
            )
        )
        return True
