"""``steadyloop chat``: an interactive conversation in the terminal.

The answer streams as markdown, each line styled once it completes; thinking dim behind a ``│`` gutter;
each tool call on one line with how it went. Ctrl-C during a turn cancels that turn (the request in flight
and any running tool) and brings the prompt back; Ctrl-C at the prompt, a second Ctrl-C within two
seconds, ``/exit`` or end of input leave.

One event loop serves the whole chat, and ``input()`` runs between turns in the main thread, so line
editing (readline) and Ctrl-C at the prompt behave as in any shell. During a turn, Ctrl-C is handled by
the event loop instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any, TextIO

from .. import list_models
from ..errors import RunCancelled, SteadyloopError
from ..events import AgentEnd
from ..request_body import build_body, order_tools
from ..sessions import SessionInfo, SessionStore, last_run
from ..sizing import chars_per_token_for, context_tokens
from ..turn import capabilities_for
from ..wire import context_limit_for
from .approvals import TerminalApprovals, open_terminal
from .config import Resolved, with_model
from .kit import AGENT_ID, AgentOptions, Conversation, open_conversation
from .render import Style, TextRenderer, one_line
from .tree import tree_lines

__all__ = ["chat", "session_listing", "session_rows"]

PROMPT = "› "
_DOUBLE_PRESS_S = 2.0
_TICK_S = 0.1
_MAIN_ONLY = {signal.SIGINT, signal.SIGALRM} if hasattr(signal, "SIGALRM") else {signal.SIGINT}

# How a listing names a run that ended without an answer, by its outcome.
_ENDED = {"error": "failed", "timeout": "timed out", "cancelled": "cancelled"}

_HELP = """\
/sessions      list saved sessions (* marks this one)
/context       what fills the context window
/cost          tokens this session has spent
/reset         start a new session
/tree          this session's entries as a tree (numbered; ← marks where it continues from)
/branch N [--no-summary] [INSTRUCTIONS]
               continue from entry N; the branch left is summarised (Ctrl-C cancels the summary)
/model [NAME]  show the model and what the endpoint serves, or switch to NAME
/help          this list
/exit          leave (also Ctrl-C at the prompt, or Ctrl-D)"""


def session_rows(
    sessions: list[SessionInfo], current: str | None = None, ends: Mapping[str, AgentEnd] | None = None
) -> list[str]:
    """Sessions as listing lines: id, last activity, messages, how the last run ended when it did not
    answer (``ends``, by session id), title."""
    rows = []
    for info in sessions:
        when = datetime.fromtimestamp(info.updated_at).strftime("%Y-%m-%d %H:%M")
        mark = "*" if info.session_id == current else " "
        end = (ends or {}).get(info.session_id)
        status = f"[{_ENDED.get(end.outcome, end.outcome)}] " if end is not None else ""
        title = info.title or ""
        rows.append(
            f"{mark} {info.session_id}  {when}  {info.message_count:4} msgs  {status}{title}".rstrip()
        )
    return rows


async def session_listing(store: SessionStore, current: str | None = None) -> str:
    """The CLI's sessions, one a line (``session_rows``), each whose last run gave no answer marked so."""
    found = await store.list(AGENT_ID)
    ends: dict[str, AgentEnd] = {}
    for info in found:
        end = await last_run(store, info)
        if end is not None and end.outcome != "completed":
            ends[info.session_id] = end
    return "\n".join(session_rows(found, current, ends)) or "no sessions yet"


class _Chat:
    def __init__(self, loop: asyncio.AbstractEventLoop, resolved: Resolved, show_thinking: bool) -> None:
        self.loop = loop
        self.resolved = resolved
        self.out: TextIO = sys.stdout
        self.style = Style(sys.stdout)
        self.show_thinking = show_thinking
        self.approvals = TerminalApprovals(open_terminal())
        self.conversation: Conversation | None = None
        self.last_interrupt = 0.0
        self.leave = False
        self.interrupted = False  # the last prompt ended in Ctrl-C with nothing typed since

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def run(self, job: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(job)

    # -- a turn ----------------------------------------------------------------------------------

    async def turn(self, text: str) -> None:
        conversation = self.conversation
        assert conversation is not None

        def on_sigint() -> None:
            if self.approvals.asking:  # Ctrl-C at an approval question is a no, the turn goes on
                self.approvals.interrupt()
                return
            now = time.monotonic()
            if now - self.last_interrupt < _DOUBLE_PRESS_S:
                self.leave = True
            self.last_interrupt = now
            conversation.agent.abort()

        self.loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            await conversation.prompt(text)
        except RunCancelled:
            self.say(self.style.dim("(cancelled)"))
        except SteadyloopError as exc:
            self.say(self.style.bad(f"error: {one_line(exc)}"))
        finally:
            self.loop.remove_signal_handler(signal.SIGINT)

    # -- slash commands ----------------------------------------------------------------------------

    async def command(self, line: str) -> None:
        conversation = self.conversation
        assert conversation is not None
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        handlers: dict[str, Callable[[str], Coroutine[Any, Any, None]]] = {
            "/sessions": self.sessions,
            "/context": self.context,
            "/cost": self.cost,
            "/reset": self.reset,
            "/model": self.model,
            "/tree": self.tree,
            "/branch": self.branch,
        }
        if name in ("/exit", "/quit"):
            self.leave = True
        elif name == "/help":
            self.say(_HELP)
        elif name in handlers:
            await handlers[name](rest)
        else:
            self.say(f"unknown command {name}; /help lists them")

    async def sessions(self, _: str) -> None:
        assert self.conversation is not None
        self.say(await session_listing(self.conversation.store, self.conversation.session_id))

    async def context(self, _: str) -> None:
        assert self.conversation is not None
        agent = self.conversation.agent
        endpoint, model = agent.endpoint, agent.state.model
        caps = capabilities_for(endpoint)
        # The same body the next request would send, sized by the same code the loop sizes it with.
        body = build_body(
            agent.state.params,
            agent.state.system_prompt or None,
            await agent.request_messages(),
            order_tools(agent.state.tools),
            caps,
            caps.model(model),
        )
        parts = context_tokens(body, chars_per_token=chars_per_token_for(endpoint, model))
        window = await context_limit_for(endpoint, model, self.resolved.context_length)
        head = f"context: ~{parts.total:,} tokens"
        if window:
            head += f" of {window:,} ({100 * parts.total / window:.0f}%)"
        rows = [("system", parts.system), ("tools", parts.tools), ("tool results", parts.tool_results)]
        rows.append(("history", parts.history))
        self.say("\n".join([head, *(f"  {label:<13}{count:>8,}" for label, count in rows)]))

    async def cost(self, _: str) -> None:
        assert self.conversation is not None
        usage = await self.conversation.usage()
        share = f"{100 * usage.cached_tokens / usage.prompt_tokens:.0f}%" if usage.prompt_tokens else "-"
        self.say(
            f"this session: {usage.runs} prompts, {usage.turns} requests\n"
            f"  prompt      {usage.prompt_tokens:>10,} tokens\n"
            f"  cached      {usage.cached_tokens:>10,} tokens ({share} of the prompt)\n"
            f"  completion  {usage.completion_tokens:>10,} tokens"
            + (f"\n  reasoning   {usage.reasoning_tokens:>10,} tokens" if usage.reasoning_tokens else "")
        )

    async def reset(self, _: str) -> None:
        assert self.conversation is not None
        self.conversation.reset()
        self.say(self.style.dim("new session: the transcript is empty"))

    async def model(self, name: str) -> None:
        assert self.conversation is not None
        agent = self.conversation.agent
        if name:
            agent.state.params = replace(agent.state.params, model=name)
            agent.prefix.invalidate(f"the model changed to {name}")  # another model has no cache of ours
            self.say(self.style.dim(f"model: {name}"))
            return
        self.say(f"model: {agent.state.model} at {self.resolved.endpoint.shown_url}")
        with contextlib.suppress(SteadyloopError):
            served = await list_models(agent.endpoint)
            self.say("served: " + ", ".join(m.id for m in served))

    async def tree(self, _: str) -> None:
        assert self.conversation is not None
        session = self.conversation.session
        entries = await session.entries()
        if not entries:
            self.say("no entries yet")
            return
        self.say("\n".join(tree_lines(entries, await session.leaf())))

    async def branch(self, rest: str) -> None:
        assert self.conversation is not None
        number, _, words = rest.partition(" ")
        words = words.strip()
        summarise = not words.startswith("--no-summary")
        if not summarise:
            words = words.removeprefix("--no-summary").strip()
        if not (number.isascii() and number.isdigit()):
            self.say("usage: /branch N [--no-summary] [instructions for the summary]  (N from /tree)")
            return
        agent = self.conversation.agent
        self.loop.add_signal_handler(signal.SIGINT, agent.abort)
        if summarise:
            self.say(
                self.style.dim(f"moving to entry {number}; summarising what is left behind (Ctrl-C cancels)")
            )
        try:
            move = await agent.branch_to(number, summarise=summarise, instructions=words or None)
        except SteadyloopError as exc:
            self.say(self.style.bad(f"error: {one_line(exc)}"))
            return
        finally:
            self.loop.remove_signal_handler(signal.SIGINT)
        summary = move.summary
        if summary is not None and summary.aborted:
            self.say(self.style.dim(f"(branch summary cancelled; still at entry {move.leaf})"))
        elif summary is not None and summary.error is not None:
            self.say(self.style.bad(f"branch summary failed: {summary.error}"))
            self.say(
                self.style.dim(f"still at entry {move.leaf}; /branch {number} --no-summary moves without one")
            )
        elif summary is not None:
            self.say(
                self.style.dim(
                    f"continuing from entry {number}; the {move.left} entries left behind are summarised "
                    f"in entry {move.leaf}"
                )
            )
        else:
            self.say(self.style.dim(f"continuing from entry {number}"))

    # -- the loop ------------------------------------------------------------------------------------

    def read(self) -> str | None:
        """The next line typed; ``None`` when the person leaves (Ctrl-D, or Ctrl-C twice in a row).

        A single Ctrl-C throws away what was typed and asks again, as a shell does: leaving on it would
        lose the conversation's place to a key pressed to clear a half-written line.
        """
        while True:
            try:
                with _ticking():
                    line = input(PROMPT)
            except EOFError:
                self.say("")
                return None
            except KeyboardInterrupt:
                if self.interrupted:
                    self.say("")
                    return None
                self.interrupted = True
                self.say(self.style.dim("\n(line cleared; Ctrl-C again, Ctrl-D or /exit leaves)"))
                continue
            self.interrupted = False
            return line

    def repl(self) -> None:
        conversation = self.conversation
        assert conversation is not None
        model = conversation.agent.state.model
        self.say(
            self.style.dim(
                f"steadyloop chat · {model} at {self.resolved.label} · /help lists commands, "
                "Ctrl-C cancels a turn, /exit leaves"
            )
        )
        if conversation.resumed:
            count = len(conversation.agent.state.messages)
            self.say(self.style.dim(f"resumed session {conversation.session_id} ({count} messages)"))
        while not self.leave:
            line = self.read()
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                self.run(self.command(line))
            else:
                self.run(self.turn(line))


def chat(resolved: Resolved, options: AgentOptions, *, show_thinking: bool = True) -> int:
    """Run the interactive chat until the person leaves; returns the exit code."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (imported for its side effect: line editing and history in input())
    loop = asyncio.new_event_loop()
    loop.set_default_executor(
        ThreadPoolExecutor(thread_name_prefix="steadyloop-chat", initializer=_block_sigint)
    )
    state = _Chat(loop, resolved, show_thinking)
    stack = contextlib.AsyncExitStack()
    try:
        # Threads started now (the session store's worker among them) keep SIGINT blocked for good.
        with _sigint_blocked():
            state.resolved = loop.run_until_complete(with_model(resolved))
            state.conversation = loop.run_until_complete(
                stack.enter_async_context(
                    open_conversation(state.resolved, options, approvals=state.approvals)
                )
            )
            loop.run_until_complete(state.conversation.store.list(AGENT_ID))
        agent = state.conversation.agent
        agent.subscribe(TextRenderer(sys.stdout, sys.stdout, show_thinking=show_thinking, markdown=True))
        state.repl()
    finally:
        try:
            loop.run_until_complete(stack.aclose())
            loop.run_until_complete(_close_clients())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            if state.approvals.terminal is not None:
                state.approvals.terminal.close()
            loop.close()
    return 0


@contextlib.contextmanager
def _ticking() -> Iterator[None]:
    """A harmless timer signal every 0.1 s while the prompt waits.

    A Ctrl-C that lands after input() printed its prompt but before it started waiting for a key is
    noted and not acted on until the wait is interrupted; the tick interrupts it, so the Ctrl-C counts.
    """
    if not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, _TICK_S, _TICK_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _block_sigint() -> None:
    # Ctrl-C at the prompt must reach the main thread, blocked in input(): the kernel may hand a
    # process's signal to any thread that does not block it, and a worker that took it would leave
    # input() waiting. So no thread but the main one takes SIGINT, nor the prompt's timer tick.
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, _MAIN_ONLY)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT and SIGALRM blocked in this thread for the block, so threads started in it inherit that."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _MAIN_ONLY)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


async def _close_clients() -> None:
    from .. import aclose_clients

    await aclose_clients()
