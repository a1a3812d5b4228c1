"""Holding the head of every request still, so a prompt cache keeps matching: ``StablePrefix``.

A prompt cache matches from the first token, and a chat template renders the tool block and the system
prompt first, then the messages in order. A request therefore reuses the previous one's cache exactly as
far as it repeats the previous one's bytes. ``StablePrefix`` keeps both halves of that:

- The system prompt and the tool set are frozen at the first run, with a fingerprint and a version. What a
  host changes afterwards is not sent (a notice says so, once) until ``invalidate`` takes the live ones as
  the next version: after an MCP reconnect, a model change, a deliberate new prompt.
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
        tools: the tools, as they were when frozen.
        fingerprint: ``prefix_fingerprint`` of the two.
        version: 1 for the first snapshot, one more after each ``invalidate``.
        reason: why the snapshot before it was invalidated (``""`` for the first).
    """

    system: str | None
    tools: tuple[Tool, ...]
    fingerprint: str
    version: int
    reason: str = ""


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
    """The system prompt and tool block frozen, and the messages held append-only, across a conversation.

    One per conversation: an ``Agent`` keeps one (``agent.prefix``); pass it as ``RunConfig.prefix`` to a
    loop of your own. Not shared between conversations running at the same time.

    Args:
        on_rewrite: what a request that rewrote earlier messages does: ``"notice"`` (the default) tells a
            ``PrefixRewritten`` event and a ``Notice`` and sends it; ``"raise"`` stops the run with
            ``TranscriptRewritten`` before anything is sent.
    """

    __slots__ = (
        "_dressed",
        "_noted",
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
        self._noted: set[tuple[int, str]] = set()
        self._sent: Sequence[Message] | None = None
        self._source: object = None
        self._source_len = 0
        # id(source message) -> (the source message, as it was sent dressed, where it was last seen)
        self._dressed: dict[int, tuple[Message, Message, int]] = {}

    # -- the frozen head ---------------------------------------------------------------------------

    @property
    def snapshot(self) -> PrefixSnapshot | None:
        """The frozen system prompt and tools; ``None`` until the first run freezes them."""
        return self._snapshot

    @property
    def fingerprint(self) -> str | None:
        """The frozen prefix's fingerprint, ``None`` before the first freeze."""
        return self._snapshot.fingerprint if self._snapshot is not None else None

    @property
    def version(self) -> int:
        """How many snapshots have been taken: 0 before the first, one more after each invalidation."""
        return self._version

    def freeze(self, system: str | None, tools: Sequence[Tool]) -> PrefixSnapshot:
        """The frozen snapshot, taken from ``system`` and ``tools`` if there is none yet."""
        if self._snapshot is None:
            self._version += 1
            frozen = tuple(tools)
            self._snapshot = PrefixSnapshot(
                system=system,
                tools=frozen,
                fingerprint=prefix_fingerprint(system, frozen),
                version=self._version,
                reason=self._reason,
            )
        return self._snapshot

    def invalidate(self, reason: str = "") -> None:
        """Let the next run freeze the live system prompt and tools as a new version.

        The only way the head of the request changes. Call it after an MCP reconnect, a model change, or
        a deliberate new system prompt; the message log starts over with it, since nothing after a new
        head can reuse the old cache anyway.
        """
        self._snapshot = None
        self._reason = reason
        self.forget_messages()

    def drift(self, system: str | None, tools: Sequence[Tool]) -> str | None:
        """What in the live ``system`` and ``tools`` differs from the frozen snapshot, in words, the first
        time it is seen for this version; ``None`` when nothing does or it was already told."""
        snapshot = self._snapshot
        if snapshot is None:
            return None
        changed: list[str] = []
        if (system or None) != (snapshot.system or None):
            changed.append("system prompt")
        same_tools = len(tools) == len(snapshot.tools) and all(
            a is b for a, b in zip(tools, snapshot.tools, strict=True)
        )
        if not same_tools and prefix_fingerprint(None, tools) != prefix_fingerprint(None, snapshot.tools):
            changed.append("tool set")
        if not changed:
            return None
        what = " and ".join(changed)
        key = (snapshot.version, what)
        if key in self._noted:
            return None
        self._noted.add(key)
        return (
            f"the {what} given differs from the frozen prefix (version {snapshot.version}); the frozen one "
            "is sent until StablePrefix.invalidate() is called"
        )

    def tools_for(self, live: Sequence[Tool]) -> tuple[Tool, ...]:
        """The run's tools: the frozen declarations, each run by the live tool of its name where there is one.

        A tool given again with the same definition is used as it is; one whose definition changed keeps
        the frozen description and parameters; one no longer given keeps its frozen self.
        """
        snapshot = self._snapshot
        if snapshot is None:
            return tuple(live)
        frozen = snapshot.tools
        if len(live) == len(frozen) and all(a is b for a, b in zip(live, frozen, strict=True)):
            return frozen
        by_name = {tool.name: tool for tool in live}
        out: list[Tool] = []
        for old in frozen:
            new = by_name.get(old.name)
            if new is None:
                out.append(old)
            elif new.definition() == old.definition():
                out.append(new)
            else:
                out.append(replace(new, description=old.description, parameters=old.parameters))
        return tuple(out)

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
