"""BFCL (the Berkeley Function Calling Leaderboard) through steadyloop: three ways of asking one server, side by side.

A seeded sample of BFCL's single-turn categories is asked of an OpenAI-compatible endpoint three ways, and
every reply is scored with the ``bfcl-eval`` package's own AST checker:

- ``raw``: the ``openai`` client, one chat completion with the entry's messages and tools, as BFCL's own
  OpenAI-style function-calling handler sends it (``OpenAICompletionsHandler._query_FC``);
- ``default``: steadyloop with the loop policy the ``steadyloop`` command builds (the window and context
  keeping of ``cli/kit.py``'s ``open_conversation``), routing off;
- ``routed``: the same with ``LoopPolicy(tool_routing=True, tool_gate=True)``: the library's routing for
  any host's tools (the which-tool gate, several calls a step; ``docs/steering.md``). The command routes
  its bundled model with its own file-tool set-up, measured by ``bench/small_model_tools.py``.

Categories: ``simple_python``, ``multiple``, ``parallel``, ``irrelevance`` (non-live, the tuning half) and
``live_simple``, ``live_multiple``, ``live_irrelevance`` (live, the held-out half). ``--per-category``
entries of each are drawn with a seed of their own (``--seed``), asked at temperature 0, first step only.

What BFCL does, and this bench does the same (read from bfcl-eval's source):

- the tools are the entry's function docs with the language hint BFCL adds when it generates (" Note that
  the provided function is in Python 3 syntax."), converted by the package's own ``convert_to_tool`` in
  the OpenAI chat style: BFCL's types become JSON Schema's (``dict`` -> ``object``, ``float`` -> ``number``
  with ``format: float``, ``tuple`` -> ``array``, ``any`` -> ``string``) and dots in names become ``_``;
- the messages are the entry's first turn as written (a system message only where the entry has one); the
  endpoint's chat template renders the tools, as it does for every OpenAI-compatible client. (For a
  locally run Qwen model BFCL renders Qwen's template itself; against an endpoint the server does.)
- a reply's tool calls decode to ``[{name: arguments}]``; a reply without calls fails to decode. The AST
  categories go to ``ast_checker`` with the function docs as BFCL checks them (without the hint) and the
  possible answers; the irrelevance categories pass when no call was produced (decoding failed, or the
  decoded output is empty by the package's ``is_empty_output``), BFCL's relevance rule.

First step only, through the path the command takes: ``run_agent_loop`` with the entry's tools, whose
bodies return a fixed text and are never shown to the model, and a ``should_stop_after_turn`` that ends
the run after its first step. The step is everything steadyloop does to one request (routing's gate,
decision and answer requests, calls recovered from text, argument repair); the calls scored are those of
the step's assistant message, as the loop hands them to the tools. Capability latches are forgotten
before each entry, as for a fresh ``steadyloop run``, and any latch notice is counted.

Timing: the categories take turns, and each entry is asked in the three ways one after the other, so load
on a shared machine falls on all of them alike (and a run stopped early has as many entries of each), and the server's prompt cache is erased before each (``POST /slots/N?action=erase``),
so no way reads a prompt another way left. The bench's own server (started when no ``--base-url`` is
given) has one slot, no host-memory prompt cache, and a slot save path so the erase is allowed; against
another server the erase is tried and the report says if it was refused.

The gate's rules and worked examples are the same for every request, so a server that has answered one
gate question holds them in its prompt cache for the rest of a session (the local server keeps four slots:
the gate's and the conversation's prompts each keep their own). With ``--gate-cache warm`` (the default)
the routed way is asked, after the erase, of a server that has answered one gate question about a request
of no entry (``warm_gate``), untimed; ``--gate-cache cold`` times the first question a server ever gets.
Each answer records the prompt tokens of its requests, how many the server read from its cache, and the
tokens they wrote. Time is told against steadyloop's default where it was asked, else the raw client, over
all entries and over the entries both ways answered with the same calls: the latter is the step's own cost
(the gate's), apart from one way writing more than the other (three calls for one, a sentence for a call).

Installing bfcl-eval: its declared dependencies include every vendor SDK and sentence-transformers (with
torch), none of which the data files or the checker need, so it goes in without them, with the few
modules the checker and the tool conversion import::

    .venv/bin/pip install --no-deps -r bench/requirements-bfcl.txt

The checker looks up one flag in BFCL's model registry (``convert_func_name``: were dots in tool names
turned into underscores), and that registry imports every vendor SDK. The bench puts a registry of one
entry in its place, this run's, with ``underscore_to_dot=True``, as BFCL sets it for its OpenAI-style
handlers; the checker itself is the package's, unchanged.

The published figures printed beside are Qwen2.5-1.5B-Instruct's at full precision; the bundled model is
Qwen2.5-Coder-1.5B-Instruct at Q4_K_M, under the chat template steadyloop serves it with.

Run: ``.venv/bin/python bench/bfcl.py [--base-url URL] [--per-category 20] [--seed 1] [--modes
raw,default,routed] [--out FILE] [--resume FILE] [--examples]``. Without ``--base-url`` it starts the
bundled model (``qwen-1.5b``, ``--ctx``, ``--threads``) and stops it at the end. ``--out`` is rewritten
after every answer; ``--resume`` with that file asks only what it does not hold yet, and ``--report`` with
it asks nothing and prints what it holds (with the same sample options).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bfcl_score import (
    CATEGORIES,
    IRRELEVANCE,
    MODES,
    Checker,
    Entry,
    Reply,
    Result,
    decode,
    interleave,
    judge,
    plain,
    restored,
    sample,
    show_examples,
    shown,
    summarise,
    table,
)

import steadyloop as sl
from steadyloop.events import Notice, SideTask
from steadyloop.local import key_for
from steadyloop.messages import from_openai
from steadyloop.steering.decision import which_tool_body
from steadyloop.turn import reset_capabilities
from steadyloop.turn.capabilities import ModelCapabilities
from steadyloop.wire import context_limit_for

MODEL_KEY = "steadyloop-bench"
_REGISTRY = "bfcl_eval.constants.model_config"
NOT_RUN = "not run: the benchmark scores the call, not its result"
INSTALL = "bfcl-eval is not installed: .venv/bin/pip install --no-deps -r bench/requirements-bfcl.txt"

# -- what steadyloop is given ----------------------------------------------------------------------------


def steadyloop_tools(tools: Sequence[Mapping[str, Any]]) -> list[sl.Tool]:
    """The OpenAI tools as steadyloop tools of the same name, description and schema, whose bodies do nothing.

    Raises:
        InvalidInput: a name steadyloop does not take (the model is never asked).
    """

    async def not_run(_arguments: dict[str, Any], _context: sl.ToolContext) -> str:
        return NOT_RUN

    out = []
    for tool in tools:
        function = tool["function"]
        out.append(
            sl.Tool(
                name=function["name"],
                description=function.get("description", ""),
                parameters=function.get("parameters", {"type": "object", "properties": {}}),
                execute=not_run,
            )
        )
    return out


def split_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[sl.Message]]:
    """A first turn as steadyloop takes it: a leading system message as the system prompt, the rest as messages."""
    system: str | None = None
    rest = list(messages)
    if rest and rest[0].get("role") == "system":
        system = str(rest.pop(0).get("content", ""))
    return system, [from_openai(m) for m in rest]


# -- bfcl-eval --------------------------------------------------------------------------------------------


class Bfcl:
    """bfcl-eval's data, tool conversion and checker (a ``Checker``)."""

    def __init__(self) -> None:
        # The package makes result and lock folders where it is told on import; not inside site-packages.
        os.environ.setdefault("BFCL_PROJECT_ROOT", str(Path(tempfile.gettempdir()) / "steadyloop-bfcl"))
        try:
            import bfcl_eval  # noqa: F401
        except ImportError:
            raise SystemExit(INSTALL) from None
        registry = sys.modules.get(_REGISTRY)
        if registry is None:  # see the module docstring: the checker reads one flag of this registry
            registry = types.ModuleType(_REGISTRY, "this run's entry of BFCL's model registry")
            registry.MODEL_CONFIG_MAPPING = {}  # type: ignore[attr-defined]
            sys.modules[_REGISTRY] = registry
        registry.MODEL_CONFIG_MAPPING[MODEL_KEY] = types.SimpleNamespace(underscore_to_dot=True)
        from bfcl_eval import utils
        from bfcl_eval.constants.enums import Language, ModelStyle
        from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.model_handler.utils import convert_to_tool

        self._utils = utils
        self._checker = ast_checker
        self._python = Language.PYTHON
        self._convert: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = lambda functions: (
            convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)
        )

    def entries(self, category: str) -> list[Entry]:
        load = self._utils.load_dataset_entry
        asked = load(category, include_prereq=False, include_language_specific_hint=True)
        checked = {
            e["id"]: e for e in load(category, include_prereq=False, include_language_specific_hint=False)
        }
        answers: dict[str, Any] = {}
        if category not in IRRELEVANCE:
            answers = {a["id"]: a["ground_truth"] for a in self._utils.load_ground_truth_entry(category)}
        return [
            Entry(
                id=e["id"],
                category=category,
                messages=tuple(e["question"][0]),
                functions=tuple(checked[e["id"]]["function"]),
                tools=tuple(self._convert(e["function"])),
                answer=tuple(answers[e["id"]]) if category not in IRRELEVANCE else None,
            )
            for e in asked
        ]

    def ast(
        self,
        functions: list[dict[str, Any]],
        calls: list[dict[str, Any]],
        answer: list[dict[str, Any]],
        category: str,
    ) -> Mapping[str, Any]:
        result: Mapping[str, Any] = self._checker(functions, calls, answer, self._python, category, MODEL_KEY)
        return result

    def well_formed(self, calls: list[dict[str, Any]]) -> bool:
        return bool(self._utils.is_function_calling_format_output(calls))

    def is_empty(self, calls: list[dict[str, Any]]) -> bool:
        return bool(self._utils.is_empty_output(calls))


# -- the three ways ---------------------------------------------------------------------------------------


@dataclass
class Target:
    endpoint: sl.Endpoint
    model: str
    window: int | None
    raw: Any  # openai.AsyncOpenAI

    def policy(self, routed: bool) -> sl.LoopPolicy:
        """The policy ``steadyloop run`` builds (``cli/kit.py``, ``open_conversation``), routing as asked."""
        return sl.LoopPolicy(
            context_limit=self.window,
            context=sl.ContextPolicy() if self.window else None,
            tool_routing=routed,
            tool_gate=True,
        )


async def ask_raw(target: Target, entry: Entry) -> Reply:
    import openai

    reply = Reply(requests=1)
    try:
        response = await target.raw.chat.completions.create(
            model=target.model,
            messages=list(entry.messages),
            temperature=0,
            **({"tools": list(entry.tools)} if entry.tools else {}),
        )
    except openai.OpenAIError as exc:
        reply.error = f"{type(exc).__name__}: {exc}"
        return reply
    if response.usage is not None:
        reply.prompt_tokens = response.usage.prompt_tokens
        reply.completion_tokens = response.usage.completion_tokens
        details = response.usage.prompt_tokens_details
        reply.cached_tokens = (details.cached_tokens or 0) if details is not None else 0
    message = response.choices[0].message
    reply.text = message.content or ""
    reply.calls, reply.decode_error = decode(
        [(c.function.name, c.function.arguments) for c in message.tool_calls or () if c.type == "function"]
    )
    return reply


async def ask_steadyloop(target: Target, entry: Entry, routed: bool) -> Reply:
    reply = Reply()

    def watch(event: sl.Event) -> None:
        if isinstance(event, (sl.UsageReport, SideTask)):
            reply.requests += 1
            usage = event.turn if isinstance(event, sl.UsageReport) else event.usage
            reply.prompt_tokens += usage.prompt_tokens
            reply.cached_tokens += usage.cached_tokens
            reply.completion_tokens += usage.completion_tokens
        elif isinstance(event, Notice) and event.name:
            reply.notices.append(event.name)

    try:
        system, messages = split_messages(entry.messages)
        tools = steadyloop_tools(entry.tools)
    except sl.InvalidInput as exc:
        reply.error = f"not asked: {exc}"
        return reply
    reset_capabilities(target.endpoint)  # a fresh `steadyloop run` per question: nothing latched before
    try:
        result = await sl.run_agent_loop(
            target.endpoint,
            sl.ModelParams(model=target.model, temperature=0.0),
            messages=messages,
            system=system,
            tools=tools,
            policy=target.policy(routed),
            should_stop_after_turn=lambda _turn, _messages: True,
            on_event=watch,
        )
    except sl.SteadyloopError as exc:
        reply.error = f"{type(exc).__name__}: {exc}"
        return reply
    step = next(m for m in result.messages[len(messages) :] if isinstance(m, sl.AssistantMessage))
    reply.text = step.content
    reply.calls, reply.decode_error = decode([(c.name, c.arguments) for c in step.tool_calls])
    return reply


async def ask(target: Target, mode: str, entry: Entry) -> Reply:
    started = time.perf_counter()
    reply = await (
        ask_raw(target, entry) if mode == "raw" else ask_steadyloop(target, entry, mode == "routed")
    )
    reply.seconds = time.perf_counter() - started
    return reply


async def erase_prompt_cache(base_url: str) -> bool:
    """Erase every slot's cached prompt on a llama-server; ``False`` where the server will not."""
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    key = key_for(base_url)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30), headers=headers) as http:
            async with http.get(f"{root}/slots") as got:
                slots = await got.json() if got.status == 200 else []
            ids = [s["id"] for s in slots if isinstance(s, dict) and isinstance(s.get("id"), int)]
            for slot in ids:
                async with http.post(f"{root}/slots/{slot}?action=erase") as erased:
                    if erased.status != 200:
                        return False
            return bool(ids)
    except (aiohttp.ClientError, ValueError, TimeoutError):
        return False


#: The request the gate is warmed with: tools and words of no BFCL entry.
_WARMING_BODY = {
    "messages": [{"role": "user", "content": "What time is it in Lima?"}],
    "tools": [
        {
            "type": "function",
            "function": {"name": "local_time", "description": "The local time in a city.", "parameters": {}},
        }
    ],
}


async def warm_gate(target: Target) -> None:
    """Ask the which-tool gate about a request of no entry, so its rules and worked examples are in the
    server's prompt cache, as they are on any server that has answered one gate question in a session."""
    import openai

    body = which_tool_body(_WARMING_BODY, ModelCapabilities())
    assert body is not None
    for wait in (5, 10, 20, 40, 0):
        try:
            await target.raw.chat.completions.create(
                model=target.model, messages=body["messages"], temperature=0, max_tokens=1
            )
            return
        except openai.InternalServerError:
            # A shared server's cache other processes keep full: untimed, so wait and warm it again.
            if not wait:
                raise
            await asyncio.sleep(wait)


# -- running and reporting --------------------------------------------------------------------------------


Saver = Callable[[Sequence[Result]], None]


async def run_all(
    target: Target,
    base_url: str,
    entries: Sequence[Entry],
    modes: Sequence[str],
    checker: Checker,
    *,
    done: Mapping[tuple[str, str], Result] | None = None,
    save: Saver = lambda _results: None,
    warm: bool = True,
) -> tuple[list[Result], bool]:
    """Every entry asked every way, the ways one after the other per entry; also whether the cache was erased.

    Args:
        done: results of an earlier run of the same sample, by ``(id, mode)``: kept, not asked again.
        save: told the results so far after each one.
        warm: before the routed way, after the erase, warm the gate (``warm_gate``).
    """
    done = done or {}
    results: list[Result] = []
    erased = True
    for i, entry in enumerate(entries, 1):
        for mode in modes:
            result = done.get((entry.id, mode))
            if result is None:
                erased = await erase_prompt_cache(base_url) and erased
                if mode == "routed" and warm:
                    await warm_gate(target)
                reply = await ask(target, mode, entry)
                result = Result(entry, mode, reply, judge(entry, reply, checker))
                mark = "ok " if result.verdict.passed else "BAD"
                said = shown(reply)[:100]
                print(
                    f"{mark} {reply.seconds:5.1f}s {mode:<7} [{i}/{len(entries)}] {entry.id}: {said}",
                    file=sys.stderr,
                    flush=True,
                )
            results.append(result)
            save(results)
    return results, erased


def draw(bfcl: Bfcl, categories: Sequence[str], n: int, seed: int) -> list[Entry]:
    return [e for c in categories for e in sample(bfcl.entries(c), n, seed)]


async def measure(
    base_url: str,
    args: argparse.Namespace,
    entries: Sequence[Entry],
    checker: Checker,
    done: Mapping[tuple[str, str], Result],
    save: Saver,
) -> tuple[list[Result], bool]:
    from openai import AsyncOpenAI

    api_key = args.api_key or key_for(base_url)
    endpoint = sl.Endpoint(base_url, api_key, request_timeout=900.0)
    raw = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", timeout=900.0, max_retries=0)
    try:
        model = args.model or (await sl.list_models(endpoint))[0].id
        window = await context_limit_for(endpoint, model)
        target = Target(endpoint, model, window, raw)
        kept = f", {len(done)} answers kept from {args.resume}" if args.resume else ""
        print(
            f"model {model}, window {window}, {len(entries)} entries x {len(args.modes)} ways{kept}",
            file=sys.stderr,
        )
        return await run_all(
            target,
            base_url,
            entries,
            args.modes,
            checker,
            done=done,
            save=save,
            warm=args.gate_cache == "warm",
        )
    finally:
        await raw.close()
        await sl.aclose_clients()


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: start the bundled model)")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"), help="default: $OPENAI_API_KEY")
    ap.add_argument("-m", "--model", help="the model name (default: the first the server lists)")
    ap.add_argument("--per-category", type=int, default=20, help="entries drawn from each category")
    ap.add_argument("--seed", type=int, default=1, help="the sample's seed")
    ap.add_argument(
        "--categories", default=",".join(CATEGORIES), help="comma-separated, of " + ", ".join(CATEGORIES)
    )
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of " + ", ".join(MODES))
    bundled = ap.add_argument_group("the bundled model, when this bench starts it")
    bundled.add_argument("--port", type=int, help="its port (default: a free one)")
    bundled.add_argument("--ctx", type=int, default=8192, help="its window in tokens (default: 8192)")
    bundled.add_argument(
        "--threads",
        type=int,
        help="its CPU threads (default: every core; on cores other work shares, 1 can be several times faster)",
    )
    ap.add_argument(
        "--gate-cache",
        choices=("warm", "cold"),
        default="warm",
        help="warm: the routed way finds the gate's fixed part cached, as in any session after its first "
        "question; cold: as the first question a server ever gets (default: %(default)s)",
    )
    ap.add_argument(
        "--out", type=Path, help="write the answers and the summary here as JSON, after each answer"
    )
    ap.add_argument("--ids", default="", help="ask these entries only (comma-separated ids), not a sample")
    ap.add_argument("--resume", type=Path, help="keep the answers an earlier --out of the same sample holds")
    ap.add_argument("--report", type=Path, help="ask nothing: report the answers an earlier --out holds")
    ap.add_argument(
        "--examples", action="store_true", help="show a passing and a failing entry per category and way"
    )
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    categories = [c for c in args.categories.split(",") if c]
    unknown = [m for m in args.modes if m not in MODES] + [c for c in categories if c not in CATEGORIES]
    if unknown:
        ap.error(f"unknown ways or categories: {unknown}")
    bfcl = Bfcl()
    wanted = {i for i in args.ids.split(",") if i}
    if wanted:
        # named entries, as a rule's own check asks them: they are no sample, and are reported as such
        entries = [e for c in categories for e in bfcl.entries(c) if e.id in wanted]
    else:
        entries = interleave(draw(bfcl, categories, args.per_category, args.seed))
    before = json.loads((args.report or args.resume).read_text()) if args.report or args.resume else {}
    done = restored(entries, before)
    if args.report:
        results = [done[(e.id, m)] for e in entries for m in args.modes if (e.id, m) in done]
        report(results, args, before.get("wall_seconds", 0), f"answers of {args.report}")
        return 0
    started, load = time.monotonic(), os.getloadavg()[0]

    def save(results: Sequence[Result]) -> None:
        if args.out is None:
            return
        summary = {m: plain(s) for m, s in summarise(results, args.modes).items()}
        document = {
            "seed": args.seed,
            "per_category": args.per_category,
            "wall_seconds": round(before.get("wall_seconds", 0) + time.monotonic() - started, 1),
            "summary": summary,
            "results": [r.as_json() for r in results],
        }
        args.out.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")

    if args.base_url:
        results, erased = asyncio.run(measure(args.base_url, args, entries, bfcl, done, save))
    else:
        with bundled_server(args.port, args.ctx, args.threads) as base_url:
            results, erased = asyncio.run(measure(base_url, args, entries, bfcl, done, save))
    save(results)
    wall = before.get("wall_seconds", 0) + time.monotonic() - started
    report(results, args, wall, f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    if not erased:
        print(
            "the server's prompt cache could not be erased between ways: a way may have read another's prompt"
        )
    return 0


def report(results: Sequence[Result], args: argparse.Namespace, wall: float, note: str) -> None:
    summary = summarise(results, args.modes)
    print(table(summary))
    asked = len({r.entry.id for r in results})
    print(
        f"\n{asked} entries, seed {args.seed}, wall time {wall / 60:.1f} min; {note}; {os.cpu_count()} cores"
    )
    for mode in args.modes:
        if summary[mode]["notices"]:
            print(f"notices, {MODES[mode]}: {summary[mode]['notices']}")
    if args.examples:
        show_examples(results)


@contextlib.contextmanager
def bundled_server(port: int | None, ctx: int, threads: int | None) -> Iterator[str]:
    """The bundled model on loopback for the length of a ``with``: one slot, no host-memory prompt cache, and
    a slot save path so that its prompt cache may be erased between ways."""
    from steadyloop.local import LocalServerConfig, start

    with tempfile.TemporaryDirectory(prefix="steadyloop-bfcl-slots-") as slots:
        extra = ("-np", "1", "--cache-ram", "0", "--slot-save-path", slots)
        cfg = LocalServerConfig(model="qwen-1.5b", ctx=ctx, extra_args=extra)
        cfg = dataclasses.replace(cfg, threads=threads) if threads else cfg
        progress = lambda event, done, total: print(f"[local] {event}", file=sys.stderr)  # noqa: E731
        with start(cfg, port, progress=progress, stop_with=os.getpid()) as server:
            yield str(server.base_url)


if __name__ == "__main__":
    sys.exit(main())
