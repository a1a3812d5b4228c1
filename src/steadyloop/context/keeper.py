"""Keeping a run inside its window, as the loop uses it: prune and fold together, rarely.

Every rewrite of the transcript's prefix throws the prompt cache away, so nothing here runs until the plan
says the window is filling (three quarters), and then pruning and folding happen in the same step, so the
cache is lost once rather than a little on every turn. A request the window refused anyway is recovered by
pruning, then folding with the hooks' vetoes overruled, and sending once more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ..events import ContextCompacted, ContextPruned, Event, Notice
from ..messages import Message
from ..tools.definition import Tool
from .compaction import CompactionPlan, apply_compaction, plan_compaction, transcript_tokens
from .folding import CompactionHooks, Summarise, run_compaction
from .pruning import prune_stats, prune_tool_results

__all__ = ["ContextKeeper", "ContextPolicy"]


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
    """

    keep_last: int = 5
    max_chars: int = 256
    summarise: Summarise | None = None
    hooks: CompactionHooks | None = None
    honour_veto: bool = False
    memory_tools: Sequence[Tool] = ()


class ContextKeeper:
    """One run's context management: the window, the summariser, and the events it emits."""

    def __init__(
        self,
        policy: ContextPolicy,
        *,
        limit: int,
        summarise: Summarise,
        emit: Callable[[Event], object],
        flush: Callable[[Sequence[Message]], Awaitable[None]] | None = None,
    ) -> None:
        self.policy = policy
        self.limit = limit
        self._summarise = policy.summarise or summarise
        self._emit = emit
        self._flush = flush
        self.folds = 0

    def _note(self, step: int) -> Callable[[str], None]:
        def note(text: str) -> None:
            self._emit(Notice(text=text, name="compaction", step=step))

        return note

    async def before_request(
        self, messages: Sequence[Message], *, used: int, chars_per_token: float, step: int
    ) -> list[Message] | None:
        """A smaller transcript when the window is three quarters full, else ``None`` (nothing touched)."""
        plan = plan_compaction(messages, limit=self.limit, used=used, chars_per_token=chars_per_token)
        if plan is None:
            return None
        return await self._shrink(messages, plan, forced=False, chars_per_token=chars_per_token, step=step)

    async def recover(
        self, messages: Sequence[Message], *, chars_per_token: float, step: int, limit: int | None = None
    ) -> list[Message] | None:
        """After the window refused a request: prune, then fold regardless of vetoes; ``None`` if nothing
        could be made smaller.

        Args:
            limit: the window the endpoint said it has, when its refusal named one; it is smaller than
                the one we were told, and from now on it is the one planned against.
        """
        if limit and limit < self.limit:
            self.limit = limit
        plan = plan_compaction(messages, limit=self.limit, used=self.limit, chars_per_token=chars_per_token)
        if plan is None:
            return None
        self._emit(
            Notice(text="the request did not fit the window; pruning and folding", name="overflow", step=step)
        )
        return await self._shrink(messages, plan, forced=True, chars_per_token=chars_per_token, step=step)

    async def _shrink(
        self,
        messages: Sequence[Message],
        plan: CompactionPlan,
        *,
        forced: bool,
        chars_per_token: float,
        step: int,
    ) -> list[Message] | None:
        before = transcript_tokens(messages, chars_per_token)
        pruned = prune_tool_results(
            messages, keep_last=self.policy.keep_last, max_chars=self.policy.max_chars
        )
        stats = prune_stats(messages, pruned)
        if stats.cleared:
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
        if fold is None:
            return list(pruned) if stats.cleared else None
        folded = apply_compaction(pruned, fold)
        self.folds += 1
        after = transcript_tokens(folded, chars_per_token)
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
        return folded
