"""Holding the head of every request still, so a prompt cache keeps matching: ``StablePrefix``.

A prompt cache matches from the first token, and a chat template renders the tool block and the system
prompt first, then the messages in order. A request therefore reuses the previous one's cache exactly as
far as it repeats the previous one's bytes. ``StablePrefix`` keeps both halves of that:

- The system prompt and the tool set are held as a snapshot with a fingerprint and a version. They change
  only by an invalidation, and every invalidation is told: a host that sets a new system prompt or a new
  tool set (``agent.state.tools = [...]``) has them take effect on the next request, as a new version
  whose reason says what changed, so a removed tool is never declared or run again. Tools rebuilt with the
  same definitions (an MCP reconnect that changed nothing) are no change. ``invalidate`` starts a new
  version by hand: after a model change, whose cache is not ours anyway.
- The messages are append-only. Every request must start with the messages the previous one sent; the
  one rewrite allowed is the keeper's prune-and-fold, after which the folded request is the new baseline.
  ``admit`` checks a request before it is sent and names the first message that changed.

Hook context is not a rewrite: a run's question is sent dressed with its context from its first request
on, and the dressing is remembered, so every later request (later prompts included) sends that question
exactly as it went the first time.

What the check costs: a request the loop derived from its own transcript, which it only appends to, with
no host hook in between, is admitted in O(1) (its head is what it was by construction, so only the
growth is looked at). A run's first request, a replaced transcript, or a ``transform_context`` /
``convert_to_llm`` hook (which rebuild the whole list every step anyway) compare the earlier messages by
identity, and by value only where the object differs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import InvalidInput
from ..messages import Message
from ..tools.definition import Tool

__all__ = ["PrefixSnapshot", "Rewrite", "RewriteAction", "StablePrefix", "prefix_fingerprint"]

RewriteAction = Literal["notice", "raise"]


def prefix_fingerprint(system: str | None, tools: Sequence[Tool]) -> str:
    """A short digest of a system prompt and the tool definitions, in the order given."""
    data = {"system": system or "", "tools": [tool.definition() for tool in tools]}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class PrefixSnapshot:
    """The system prompt and tool set every request of a conversation declares, until invalidated.

    Attributes:
        system: the system prompt, ``None`` for none.
        tools: the tools, as they were when taken.
        fingerprint: ``prefix_fingerprint`` of the two.
        version: 1 for the first snapshot, one more after each invalidation.
        reason: why the snapshot before it was invalidated (``""`` for the first): what ``invalidate``
            was given, or what changed (``"tools removed: write_file"``).
    """

    system: str | None
    tools: tuple[Tool, ...]
    fingerprint: str
    version: int
    reason: str = ""

    def told(self) -> str:
        """The snapshot as a notice tells it: its version, and why the one before it went."""
        why = f": {self.reason}" if self.reason else ""
        return f"the stable prefix was rebuilt as version {self.version}{why}"


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A request that does not start with what the previous request sent.

    Attributes:
        index: the first message that differs, counted in the request's messages (after the system
            prompt); equal to the new request's length when it only got shorter.
        role: the role of the message now at ``index`` (``""`` when there is none).
    """

    index: int
    role: str

    def describe(self) -> str:
        """In words, for a notice or an error."""
        what = f"message {self.index} ({self.role})" if self.role else f"the messages from {self.index} on"
        return (
            f"{what} differs from what the previous request sent: the transcript was rewritten in "
            "place, so the prompt cache is lost from there (only a fold may rewrite what was sent)"
        )


class StablePrefix:
    """The system prompt and tool block changed only by a told invalidation, and the messages held
    append-only, across a conversation.

    One per conversation: an ``Agent`` keeps one (``agent.prefix``); pass it as ``RunConfig.prefix`` to a
    loop of your own. Not shared between conversations running at the same time.

    Args:
        on_rewrite: what a request that rewrote earlier messages does: ``"notice"`` (the default) tells a
            ``PrefixRewritten`` event and a ``Notice`` and sends it; ``"raise"`` stops the run with
            ``TranscriptRewritten`` before anything is sent.
    """

    __slots__ = (
        "_dressed",
        "_reason",
        "_sent",
        "_snapshot",
        "_source",
        "_source_len",
        "_version",
        "on_rewrite",
    )

    def __init__(self, *, on_rewrite: RewriteAction = "notice") -> None:
        if on_rewrite not in ("notice", "raise"):
            raise InvalidInput(f"on_rewrite must be 'notice' or 'raise', got {on_rewrite!r}")
        self.on_rewrite: RewriteAction = on_rewrite
        self._snapshot: PrefixSnapshot | None = None
        self._version = 0
        self._reason = ""
        self._sent: Sequence[Message] | None = None
        self._source: object = None
        self._source_len = 0
        # id(source message) -> (the source message, as it was sent dressed, where it was last seen)
        self._dressed: dict[int, tuple[Message, Message, int]] = {}

    # -- the head ----------------------------------------------------------------------------------

    @property
    def snapshot(self) -> PrefixSnapshot | None:
        """The system prompt and tools in force; ``None`` until the first run takes them."""
        return self._snapshot

    @property
    def fingerprint(self) -> str | None:
        """The snapshot's fingerprint, ``None`` before the first."""
        return self._snapshot.fingerprint if self._snapshot is not None else None

    @property
    def version(self) -> int:
        """How many snapshots have been taken: 0 before the first, one more after each invalidation."""
        return self._version

    def hold(self, system: str | None, tools: Sequence[Tool]) -> PrefixSnapshot:
        """The snapshot of the head in force: the current one while nothing in it changed, else a new version.

        A new version's reason is what ``invalidate`` was given, or else what changed (the system prompt,
        the tools removed, added or redefined); the message log starts over with it, since nothing after a
        new head can reuse the old cache. Tools rebuilt with the same definitions keep the version.
        """
        current = self._snapshot
        if current is not None and _same_head(current, system, tools):
            return current
        taken = tuple(tools)
        fingerprint = prefix_fingerprint(system, taken)
        if current is not None and fingerprint == current.fingerprint:
            # The same definitions in new objects: nothing a request declares changed. The new objects
            # are kept, so the next look is by identity again.
            self._snapshot = replace(current, system=system, tools=taken)
            return self._snapshot
        reason = self._reason or (_what_changed(current, system, taken) if current is not None else "")
        if current is not None:
            self.forget_messages()
        self._version += 1
        self._reason = ""
        self._snapshot = PrefixSnapshot(
            system=system, tools=taken, fingerprint=fingerprint, version=self._version, reason=reason
        )
        return self._snapshot

    def invalidate(self, reason: str = "") -> None:
        """Have the next run take its head as a new version, changed or not, for ``reason``.

        A changed system prompt or tool set is a new version by itself; call this where the cache is lost
        for another reason (the chat's ``/model`` does, as another model has no cache of ours). The message
        log starts over with it.
        """
        self._snapshot = None
        self._reason = reason
        self.forget_messages()

    # -- the append-only messages --------------------------------------------------------------------

    def forget_messages(self) -> None:
        """Start the message log over (a new conversation, a move to another branch); the head stays."""
        self._sent = None
        self._source = None
        self._source_len = 0
        self._dressed.clear()

    def dressing(self, source: Message) -> Message | None:
        """How ``source`` was sent dressed with hook context, if it was."""
        found = self._dressed.get(id(source))
        return found[1] if found is not None and found[0] is source else None

    def remember(self, source: Message, dressed: Message, index: int) -> None:
        """``source`` (at ``index`` of the view) is sent as ``dressed`` from now on."""
        self._dressed[id(source)] = (source, dressed, index)

    def dress(self, view: list[Message]) -> list[Message]:
        """``view`` with every remembered dressing in place (the same list when there is none).

        A dressed message is found where it was last seen, by identity, else by value there (a hook that
        copies messages keeps their places), else anywhere by identity; one no longer in the view is
        forgotten.
        """
        if not self._dressed:
            return view
        out = list(view)
        for key, (source, dressed, at) in list(self._dressed.items()):
            if not (at < len(view) and (view[at] is source or view[at] == source)):
                found = next((i for i, m in enumerate(view) if m is source), None)
                if found is None:
                    del self._dressed[key]
                    continue
                at = found
                self._dressed[key] = (source, dressed, at)
            out[at] = dressed
        return out

    def admit(
        self,
        sent: Sequence[Message],
        *,
        source: object = None,
        pure: bool = False,
        sanctioned: bool = False,
    ) -> Rewrite | None:
        """Check a request's messages against the previous request's, and make them the new baseline.

        Args:
            sent: the messages about to be sent (after the system prompt).
            source: the transcript they were derived from; when it is the same object as last time and
                only grew, and ``pure`` says nothing but the loop's own steps stood between, the earlier
                messages are what they were by construction and are not compared.
            pure: no host hook (``transform_context``, ``convert_to_llm``) rebuilt the list.
            sanctioned: the keeper pruned or folded for this request: the rewrite allowed.

        Returns:
            the rewrite found, or ``None``.
        """
        previous = self._sent
        length = len(source) if isinstance(source, Sequence) else 0
        fast = pure and source is not None and source is self._source and length >= self._source_len
        found = None if previous is None or sanctioned else _rewrite(previous, sent, fast)
        if found is None or self.on_rewrite == "notice":
            # Told once: the request goes out as it is and is the baseline from now on. A refused one is
            # never sent, so the baseline stays the request before it.
            self._sent, self._source, self._source_len = sent, source, length
        return found


def _same_head(snapshot: PrefixSnapshot, system: str | None, tools: Sequence[Tool]) -> bool:
    """The same system prompt and the very same tool objects: nothing to compare."""
    return (system or None) == (snapshot.system or None) and (
        len(tools) == len(snapshot.tools) and all(a is b for a, b in zip(tools, snapshot.tools, strict=True))
    )


def _what_changed(before: PrefixSnapshot, system: str | None, tools: Sequence[Tool]) -> str:
    """What differs between a snapshot and a new head, in words."""
    changed: list[str] = []
    if (system or None) != (before.system or None):
        changed.append("the system prompt changed")
    was = {tool.name: tool.definition() for tool in before.tools}
    now = {tool.name: tool.definition() for tool in tools}
    for label, names in (
        ("removed", [name for name in was if name not in now]),
        ("added", [name for name in now if name not in was]),
        ("redefined", [name for name in now if name in was and now[name] != was[name]]),
    ):
        if names:
            changed.append(f"tools {label}: {', '.join(names)}")
    if not changed:
        changed.append("the tools were reordered")
    return "; ".join(changed)


def _rewrite(previous: Sequence[Message], sent: Sequence[Message], fast: bool) -> Rewrite | None:
    if fast and len(sent) >= len(previous):
        return None
    index = next(
        (
            i
            for i, (was, now) in enumerate(zip(previous, sent, strict=False))
            if was is not now and was != now
        ),
        None,
    )
    if index is None:
        if len(sent) >= len(previous):
            return None
        index = len(sent)
    role = getattr(sent[index], "role", "") if index < len(sent) else ""
    return Rewrite(index=index, role=str(role))
